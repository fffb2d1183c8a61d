"""Which namespaces this operator serves, when a label selector chooses them (settings
``watch_namespace_selector``): the answer every intake asks before it takes an object in.

Why here and not in the apiserver: a custom resource cannot be listed or watched by its
namespace's labels. So the SecretSync watches stay as they are (cluster-wide, or one per listed
namespace), and what they deliver is kept only when its namespace is served now; the namespace
watch (identity_intake.py, metadata only, already there for ClusterMachineIdentity selectors)
tells which those are, and when that changes.

Without a selector every namespace the watches deliver is served (the list of names, if any,
already narrowed the watches), and nothing here waits or filters. With one, nothing is served
until the namespace watch has listed once (start-up waits for that: startup.py), so a SecretSync
of a namespace that is not ours is never reconciled, not even once. Then a namespace that comes
to match is taken in (``observe`` returns True: its SecretSyncs are listed and queued, its
identities checked), and one that stops matching, or is deleted, is let go (False: forgotten in
memory, nothing written or deleted; another release, or nobody, takes it over).

Namespace labels are set by cluster admins: whoever can label a namespace decides which release
serves it (README, "Namespace selection").
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from secretferry.models import base as models_base


class ServedNamespaces:
    def __init__(self, selector: models_base.LabelSelector | None, *, names: Iterable[str] = ()) -> None:
        """``names``: the ``watch_namespaces`` list, if any; a namespace must be in it as well."""
        self._selector = selector
        self._names = frozenset(names)
        self._served: set[str] = set()
        self.listed = asyncio.Event()
        """Set once the namespace watch has listed every namespace (at once without a selector)."""
        if selector is None:
            self.listed.set()

    @property
    def selecting(self) -> bool:
        """Whether a selector chooses the namespaces (else every delivered one is served)."""
        return self._selector is not None

    def serves(self, namespace: str) -> bool:
        return self._selector is None or namespace in self._served

    def served(self) -> frozenset[str]:
        return frozenset(self._served)

    def observe(self, name: str, labels: Mapping[str, str]) -> bool | None:
        """A namespace as the watch saw it: True when it is served from now on, False when it no
        longer is, None when nothing changed (or before the first listing completed, which only
        fills in what is served)."""
        if self._selector is None:
            return None
        listed = not self._names or name in self._names
        return self._set(name, listed and self._selector.matches(labels))

    def gone(self, name: str) -> bool | None:
        """The namespace was deleted: False when it was served (let go), else None."""
        return self._set(name, False) if self._selector is not None else None

    def listing_done(self, seen: Iterable[str]) -> list[str]:
        """A complete listing named ``seen``: what it did not name is gone (returned, to let go).
        The first one marks the set complete."""
        vanished = sorted(self._served - set(seen))
        self._served -= set(vanished)
        first = not self.listed.is_set()
        self.listed.set()
        return [] if first else vanished

    def _set(self, name: str, serve: bool) -> bool | None:
        before = name in self._served
        if serve:
            self._served.add(name)
        else:
            self._served.discard(name)
        if before == serve or not self.listed.is_set():
            return None
        return serve

"""The SecretSync table: every entry by key, and which entries write each Secret.

Why an index beside the table: a PushSecret pass asks "does a SecretSync of this namespace write
the Secret I push, from the folder I push to?" (push/loops.py), once per pass. Answered by a scan,
each pass cost O(all SecretSyncs) — 10,000 body reads for one PushSecret at scale, repeated on
every Secret change. Indexed by the Secret each entry writes, the question costs O(entries
writing that Secret), nearly always zero or one.

Why a mapping of its own rather than an index maintained by each writer: the table is written in
several places (sync_intake, cluster_syncs); every change goes through ``__setitem__`` and
``__delitem__`` here (``MutableMapping`` derives ``pop``, ``setdefault``, ``update`` and
``clear`` from them), so the index cannot fall behind the table. Entries replace their body only
by being replaced (sync_intake and cluster_syncs build a new ``SyncEntry`` for a new
generation), never in place.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, MutableMapping, ValuesView
from typing import Any

from secretferry.reconcile import state

WrittenSecret = tuple[str, str]
"""(namespace, name) of a Secret an entry writes."""


def written_secret(key: state.SyncKey, body: Mapping[str, Any]) -> WrittenSecret | None:
    """The Secret an entry writes: ``spec.target.name``, else the object's own name (a
    ClusterSecretSync's entry: the ClusterSecretSync's, as its pass names the target); None for
    a ConfigMap target."""
    spec = body.get("spec") or {}
    target = spec.get("target") or {}
    if target.get("kind", "Secret") != "Secret":
        return None
    name = target.get("name") or (body.get("metadata") or {}).get("name") or key[1]
    return (key[0], str(name))


class SyncTable(MutableMapping[state.SyncKey, state.SyncEntry]):
    """A dict of ``SyncEntry`` by key that also knows, for each Secret, the entries writing it."""

    def __init__(self) -> None:
        self._entries: dict[state.SyncKey, state.SyncEntry] = {}
        self._writers: dict[WrittenSecret, set[state.SyncKey]] = {}

    # --- the index ----------------------------------------------------------------------------
    def writing(self, namespace: str, secret: str) -> list[tuple[state.SyncKey, Mapping[str, Any]]]:
        """(key, body) of every entry that writes Secret ``namespace/secret``, sorted by key."""
        keys = self._writers.get((namespace, secret), ())
        return [(key, self._entries[key].body) for key in sorted(keys)]

    def _index(self, key: state.SyncKey, entry: state.SyncEntry) -> None:
        secret = written_secret(key, entry.body)
        if secret is not None:
            self._writers.setdefault(secret, set()).add(key)

    def _unindex(self, key: state.SyncKey, entry: state.SyncEntry) -> None:
        secret = written_secret(key, entry.body)
        writers = self._writers.get(secret) if secret is not None else None
        if writers is not None and secret is not None:
            writers.discard(key)
            if not writers:
                del self._writers[secret]

    # --- MutableMapping: every change passes here ---------------------------------------------
    def __setitem__(self, key: state.SyncKey, entry: state.SyncEntry) -> None:
        old = self._entries.get(key)
        if old is not None:
            self._unindex(key, old)
        self._entries[key] = entry
        self._index(key, entry)

    def __delitem__(self, key: state.SyncKey) -> None:
        entry = self._entries.pop(key)
        self._unindex(key, entry)

    def __getitem__(self, key: state.SyncKey) -> state.SyncEntry:
        return self._entries[key]

    def __iter__(self) -> Iterator[state.SyncKey]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    # Reads at dict speed (the mixins' versions go through __getitem__ once per key: at 10,000
    # entries a requeue's scan would be several times slower).
    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: state.SyncKey, default: Any = None) -> Any:
        return self._entries.get(key, default)

    def keys(self) -> KeysView[state.SyncKey]:
        return self._entries.keys()

    def values(self) -> ValuesView[state.SyncEntry]:
        return self._entries.values()

    def items(self) -> ItemsView[state.SyncKey, state.SyncEntry]:
        return self._entries.items()

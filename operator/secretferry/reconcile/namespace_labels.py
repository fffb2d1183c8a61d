"""Namespace labels, for ClusterMachineIdentity.spec.allowedNamespaces selectors.

Why watched: a label removed must refuse the namespace's SecretSyncs at once, not when a cache
of reads expires (it took ~30 s, issue 20). The namespace watch (identity_intake.py) feeds
``seen``/``gone``/``listed``; once it has listed every namespace, ``get`` answers from it. Until
then (start-up, or a watch the apiserver refuses), and for a namespace the watch has not
delivered yet (just created), one GET per namespace, reused for a while.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import namespaces as kube_namespaces
from secretferry.reconcile import problems, reasons

# Only before the watch has listed, or for a namespace it has not delivered: one GET per
# namespace per 30 s at most (the watch delivers a new namespace within moments anyway).
READ_TTL_SECONDS = 30.0


class NamespaceLabels:
    def __init__(self, kube: kube_client.Kube, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._kube = kube
        self._clock = clock
        self._read: dict[str, tuple[float, dict[str, str]]] = {}
        self._watched: dict[str, dict[str, str]] = {}
        self._listed = False

    def seen(self, name: str, labels: Mapping[str, str]) -> bool:
        """Record a namespace's labels from the watch; whether they differ from what it said before."""
        previous = self._watched.get(name)
        self._watched[name] = dict(labels)
        return previous is not None and previous != labels

    def gone(self, name: str) -> None:
        self._watched.pop(name, None)
        self._read.pop(name, None)

    def listed(self, seen: set[str]) -> None:
        """A complete listing: what it did not name is gone, and the watched labels are trusted."""
        for name in set(self._watched) - seen:
            del self._watched[name]
        self._listed = True

    def known(self) -> Mapping[str, Mapping[str, str]] | None:
        """Every namespace and its labels, once the watch has listed them all; None before."""
        return self._watched if self._listed else None

    async def get(self, namespace: str) -> dict[str, str]:
        """The namespace's labels; raises a retriable ``problems.Problem`` when they cannot be read."""
        if self._listed and namespace in self._watched:
            return self._watched[namespace]
        cached = self._read.get(namespace)
        now = self._clock()
        if cached is not None and now - cached[0] < READ_TTL_SECONDS:
            return cached[1]
        try:
            labels = await kube_namespaces.labels(self._kube, namespace)
        except kube_errors.KubeError as exc:
            raise problems.Problem(
                reasons.KUBERNETES_ERROR,
                f"cannot read the labels of namespace {namespace!r} (spec.allowedNamespaces): {exc}",
                retriable=True,
            ) from exc
        self._read[namespace] = (now, labels)
        return labels

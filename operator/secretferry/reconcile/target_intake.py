"""Managed Secrets and ConfigMaps in: the watch cache every "does it need a write?" reads, and repairs.

Watched by label only (ours), so a hand edit or a deletion is repaired within seconds: the
SecretSync that owns the object is queued as live work. Our own writes echoing back are not
(``TargetCache.is_echo``). Repairs begin once the cache is complete (every watch listed once):
before that every existing Secret would look missing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from secretferry.kube import client as kube_client
from secretferry.kube import objects as kube_objects
from secretferry.kube import watching
from secretferry.models import labels
from secretferry.reconcile import scheduler, state

KINDS: tuple[kube_objects.Kind, ...] = ("Secret", "ConfigMap")


class TargetIntake:
    def __init__(
        self,
        *,
        kube: kube_client.Kube,
        targets: state.TargetCache,
        syncs: Mapping[state.SyncKey, state.SyncEntry],
        queue: scheduler.Scheduler[state.SyncKey],
    ) -> None:
        self._kube = kube
        self._targets = targets
        self._syncs = syncs
        self._queue = queue
        self.ready = asyncio.Event()
        """Set once every watch has listed once: the cache is complete."""
        self.synced_sources: set[tuple[str, str | None]] = set()
        self._sources_synced = asyncio.Event()

    async def watch(
        self, kind: kube_objects.Kind, namespace: str | None, lists_may_start: asyncio.Event
    ) -> None:
        selector = f"{labels.MANAGED_BY_LABEL}={labels.MANAGED_BY_VALUE}"
        seen: set[state.TargetKey] = set()
        async for event in watching.watch(
            self._kube,
            path=kube_objects.collection_path(kind),
            label_selector=selector,
            namespace=namespace,
            list_after=lists_may_start,
        ):
            if event.type == "SYNCED":
                for gone in self._targets.forget_unseen(kind, namespace=namespace, seen=seen):
                    self._repair(gone)
                seen = set()
                self.synced_sources.add((kind, namespace))
                self._sources_synced.set()
                continue
            obj = event.object
            meta = obj.get("metadata", {})
            tkey: state.TargetKey = (kind, meta.get("namespace", ""), meta.get("name", ""))
            obj.setdefault("kind", kind)
            if event.type == "DELETED":
                self._targets.forget(tkey)
                self._repair(tkey)
                continue
            seen.add(tkey)
            echo = self._targets.is_echo(tkey, obj)
            self._targets.remember(tkey, obj)
            if not echo:
                self._repair(tkey, labels_of=meta.get("labels") or {})

    async def until_complete(self, expected: int) -> None:
        """Wait until ``expected`` watches (kinds times namespaces) have listed once; then ``ready``."""
        while len(self.synced_sources) < expected:
            self._sources_synced.clear()
            await self._sources_synced.wait()
        self.ready.set()

    def cached(self) -> int:
        return self._targets.count()

    def _repair(self, tkey: state.TargetKey, *, labels_of: Mapping[str, str] | None = None) -> None:
        """A managed object changed or vanished under us: reconcile its SecretSync now."""
        if not self.ready.is_set():
            return
        owner = self._targets.owner_of(tkey)
        if owner is None and labels_of and labels_of.get(labels.SYNC_LABEL):
            candidate = (tkey[1], labels_of[labels.SYNC_LABEL])
            owner = candidate if candidate in self._syncs else None
        if owner is not None and owner in self._syncs:
            self._queue.enqueue(owner, live=True)

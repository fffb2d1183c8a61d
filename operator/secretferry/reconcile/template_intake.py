"""Template sources in: the label-selected watch of ConfigMaps and Secrets that consented to be
templates (``secretferry.io/template-source: "true"``), their cache, and which SecretSyncs use
each (rendering/template_sources.py decides what they mean).

Why a label-selected watch: a change to a source must re-render every SecretSync using it within
a second, and a cluster-wide ConfigMap and Secret cache would hold every object of the cluster
(tens of MiB, and every Secret's value). Selected by label, the apiserver sends only the objects
whose owner consented: nothing else is received, so an unlabelled Secret's data never reaches the
operator. Each kept source is at most 64 KiB (bigger ones are kept as their size alone).

Which SecretSyncs to re-render: each pass that reads templateFrom tells ``bind`` which sources
it used (before reading them, so one that appears later re-renders it too); a change to a source
queues those SecretSyncs as live work, in the one work queue every other change goes through.
A SecretSync deleted since is dropped from the index when a change would have queued it.

What the cache has not seen (a source created a moment ago, the watch not listed yet, or an
object without the label) is asked of the apiserver: the object only if it carries the label
(``objects.get_selected``), else its metadata alone, to tell "missing" from "not labelled".
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterable, Mapping

from secretferry import metrics
from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import objects as kube_objects
from secretferry.kube import watching
from secretferry.models import templatefrom
from secretferry.reconcile import outcomes, scheduler, state
from secretferry.reconcile.rendering import template_sources as sources

log = logging.getLogger(__name__)

KINDS: tuple[kube_objects.Kind, ...] = ("ConfigMap", "Secret")


class TemplateSourceIntake:
    """The ``sources.Reader`` of the pass, kept current by ``watch``."""

    def __init__(
        self,
        *,
        kube: kube_client.Kube,
        syncs: Mapping[state.SyncKey, state.SyncEntry],
        queue: scheduler.Scheduler[state.SyncKey],
    ) -> None:
        self._kube = kube
        self._syncs = syncs
        self._queue = queue
        self._cache: dict[sources.SourceKey, sources.SourceObject] = {}
        self._users: dict[sources.SourceKey, set[state.SyncKey]] = {}
        self._uses: dict[state.SyncKey, tuple[sources.SourceKey, ...]] = {}
        for kind in KINDS:  # counted at each scrape, not at each change
            metrics.TEMPLATE_SOURCES.labels(kind=kind).set_function(functools.partial(self.cached, kind))

    # --- the pass's side (sources.Reader) ---------------------------------------------------------
    def bind(self, sync_key: state.SyncKey, keys: Iterable[sources.SourceKey]) -> None:
        new = tuple(dict.fromkeys(keys))
        old = self._uses.pop(sync_key, ())
        for key in old:
            users = self._users.get(key)
            if users is not None:
                users.discard(sync_key)
                if not users:
                    del self._users[key]
        if new:
            self._uses[sync_key] = new
            for key in new:
                self._users.setdefault(key, set()).add(sync_key)

    async def read(self, key: sources.SourceKey) -> sources.Found:
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        kind, namespace, name = key
        what = f"reading template source {kind} {namespace}/{name}"
        if kind not in KINDS:
            raise ValueError(f"not a template source kind: {kind}")
        typed: kube_objects.Kind = "ConfigMap" if kind == "ConfigMap" else "Secret"
        try:
            body = await kube_objects.get_selected(
                self._kube,
                kind=typed,
                namespace=namespace,
                name=name,
                label_selector=templatefrom.TEMPLATE_SOURCE_SELECTOR,
            )
            if body is not None:
                return sources.parse(kind, body)
            metadata = await kube_objects.get_metadata(self._kube, kind=typed, namespace=namespace, name=name)
        except kube_errors.KubeError as exc:
            raise outcomes.from_kube_error(exc, what=what) from None
        # An object labelled between the two reads counts as not labelled: the watch's event for
        # the label queues this SecretSync again.
        return sources.Absent.MISSING if metadata is None else sources.Absent.NOT_LABELLED

    # --- the watch's side -------------------------------------------------------------------------
    async def watch(
        self, kind: kube_objects.Kind, namespace: str | None, lists_may_start: asyncio.Event
    ) -> None:
        """Labelled ``kind`` objects of ``namespace`` (None: every namespace) into the cache;
        each change queues the SecretSyncs using the object."""
        seen: set[sources.SourceKey] = set()
        async for event in watching.watch(
            self._kube,
            path=kube_objects.collection_path(kind),
            label_selector=templatefrom.TEMPLATE_SOURCE_SELECTOR,
            namespace=namespace,
            list_after=lists_may_start,
        ):
            if event.type == "SYNCED":
                gone = [
                    k
                    for k in self._cache
                    if k[0] == kind and (namespace is None or k[1] == namespace) and k not in seen
                ]
                for lost in gone:
                    del self._cache[lost]
                    self._changed(lost)
                seen = set()
                continue
            meta = event.object.get("metadata") or {}
            key: sources.SourceKey = (kind, meta.get("namespace", ""), meta.get("name", ""))
            if event.type == "DELETED":  # deleted, or its label taken away
                if self._cache.pop(key, None) is not None:
                    self._changed(key)
                continue
            seen.add(key)
            parsed = sources.parse(kind, event.object)
            if self._cache.get(key) != parsed:
                self._cache[key] = parsed
                self._changed(key)

    def cached(self, kind: str | None = None) -> int:
        """How many labelled sources (of ``kind``, or of both kinds) the cache holds."""
        return sum(1 for key in self._cache if kind is None or key[0] == kind)

    def users(self, key: sources.SourceKey) -> set[state.SyncKey]:
        """The SecretSyncs the last passes found using ``key``."""
        return set(self._users.get(key, ()))

    def _changed(self, key: sources.SourceKey) -> None:
        """A source appeared, changed or went: re-render whoever uses it, now."""
        for sync_key in sorted(self._users.get(key, ())):
            if sync_key in self._syncs:
                self._queue.enqueue(sync_key, live=True)
                metrics.TEMPLATE_SOURCE_RERENDERS.inc()
            else:
                self.bind(sync_key, ())

"""SecretSyncs in: our own LIST+WATCH (not kopf's change handlers) into the work queue.

Why not kopf: at 10,000 SecretSyncs its per-object handlers cost minutes (docs/architecture.md, "Scale
decisions"). What arrives is kept slim (slim.py) in ``syncs``; a change queues the SecretSync,
live work ahead of the backlog; a status-only change (our own patch echoing back) queues nothing
unless the force-sync annotation moved; a deletion lets go of its scopes and targets.

With a namespace selector (served.py) only the SecretSyncs of served namespaces are taken in:
the others are dropped on arrival, never reconciled. A namespace that comes to be served is
listed (``take_in``); one that no longer is, is let go (``let_go``): forgotten like a deleted
SecretSync, in memory only, its Secrets left as they are. A pass already running finishes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from secretferry import backoff, metrics
from secretferry.kube import client as kube_client
from secretferry.kube import customresources, watching
from secretferry.kube import errors as kube_errors
from secretferry.reconcile import conditions, reasons, scheduler, served, slim, state, sync_report
from secretferry.service import scopes as scope_mod

log = logging.getLogger(__name__)
# Listing a namespace that came to be served: retried a few times (the namespace watch brings
# it again only if its labels change), each wait doubling from 0.5 s up to 5 s.
_TAKE_IN_ATTEMPTS = 8
_TAKE_IN_RETRY_INITIAL_SECONDS = 0.5
_TAKE_IN_RETRY_MAX_SECONDS = 5.0


class SyncIntake:
    def __init__(
        self,
        *,
        kube: kube_client.Kube,
        syncs: MutableMapping[state.SyncKey, state.SyncEntry],
        scopes: state.ScopeIndex,
        targets: state.TargetCache,
        queue: scheduler.Scheduler[state.SyncKey],
        on_scopes_changed: Callable[[set[scope_mod.Scope], set[scope_mod.Scope]], None],
        served_namespaces: served.ServedNamespaces | None = None,
    ) -> None:
        self._kube = kube
        self._syncs = syncs
        self._scopes = scopes
        self._targets = targets
        self._queue = queue
        self._on_scopes_changed = on_scopes_changed
        self._served = served_namespaces or served.ServedNamespaces(None)
        self._initial_listed = False
        self.listed_watches: set[str | None] = set()
        """The namespaces (None: all) whose watch has listed once: the readiness probe's input."""

    async def watch(self, namespace: str | None, lists_may_start: asyncio.Event) -> None:
        path = customresources.collection_path(sync_report.PLURAL)
        seen: set[state.SyncKey] = set()
        # Objects a watch event deleted while a LIST was still arriving: a list item may show them
        # from before their deletion (watching.py, early watch) and must not bring them back.
        deleted_uids: set[str] = set()
        async for event in watching.watch(
            self._kube, path=path, namespace=namespace, list_after=lists_may_start
        ):
            if event.type == "SYNCED":
                # Entries of ClusterSecretSyncs are no SecretSyncs: their intake is cluster_syncs.py.
                for gone in [
                    k
                    for k, e in self._syncs.items()
                    if k not in seen and e.origin is None and (namespace is None or k[0] == namespace)
                ]:
                    self.deleted(gone)
                if not self._initial_listed:
                    log.info("listed %d SecretSyncs", len(self._syncs))
                seen, deleted_uids = set(), set()
                self._initial_listed = True
                self.listed_watches.add(namespace)
                continue
            meta = event.object.get("metadata", {})
            key: state.SyncKey = (meta.get("namespace", ""), meta.get("name", ""))
            if event.type == "DELETED":
                deleted_uids.add(meta.get("uid", ""))
                self.deleted(key)
            elif not self._served.serves(key[0]):
                continue  # another release's, or nobody's (served.py)
            elif not (event.listed and meta.get("uid", "") in deleted_uids):
                seen.add(key)
                # A change made after start-up (not part of the initial LIST) is live work, even
                # when it arrives while the LIST is still coming in. Of the initial LIST, objects
                # not in sync yet (new, or edited while we were down) go before the rest.
                live = self._initial_listed or not event.listed
                first = not live and not _in_sync(event.object)
                self.upserted(event.object, live=live, first=first)

    async def take_in(self, namespace: str) -> None:
        """``namespace`` is served from now on: queue its SecretSyncs as live work (one LIST of the
        namespace: a handful of objects, the quota's 200 at most)."""
        retry = backoff.Backoff(
            _TAKE_IN_RETRY_INITIAL_SECONDS, _TAKE_IN_RETRY_MAX_SECONDS, jitter=backoff.EQUAL_JITTER
        )
        for attempt in range(_TAKE_IN_ATTEMPTS):
            try:
                items = await customresources.list_items(
                    self._kube, plural=sync_report.PLURAL, namespace=namespace
                )
                break
            except kube_errors.KubeError as exc:
                log.warning("listing the SecretSyncs of %s, attempt %d: %s", namespace, attempt + 1, exc)
                await asyncio.sleep(retry.next_delay())
        else:
            log.error("the SecretSyncs of newly served namespace %s could not be listed", namespace)
            return
        if not self._served.serves(namespace):
            return  # let go again while the list was under way
        for body in items:
            self.upserted(body, live=True)
        log.info("namespace %s served: %d SecretSyncs taken in", namespace, len(items))

    def let_go(self, namespace: str) -> None:
        """``namespace`` is no longer served: forget its SecretSyncs (in memory only)."""
        keys = [k for k in self._syncs if k[0] == namespace]
        for key in keys:
            self.deleted(key)
        if keys:
            log.info("namespace %s let go: %d SecretSyncs no longer served here", namespace, len(keys))

    def upserted(self, body: Mapping[str, Any], *, live: bool, first: bool = False) -> None:
        meta = body.get("metadata", {})
        key: state.SyncKey = (meta.get("namespace", ""), meta.get("name", ""))
        uid, generation = meta.get("uid", ""), meta.get("generation")
        force = (meta.get("annotations") or {}).get(state.FORCE_SYNC_ANNOTATION)
        current = self._syncs.get(key)
        if (
            current is not None
            and current.uid == uid
            and generation is not None
            and current.generation is not None
            and generation < current.generation
        ):
            return  # a list item older than what a watch event already brought
        if current is not None and current.uid == uid and current.generation == generation:
            if force != current.force_annotation:
                current.force_annotation, current.force_pending = force, force is not None
                self._queue.enqueue(key, live=True)
            return  # a status-only change, most likely our own patch echoing back
        # Status as we last wrote it, unless this is a new object (or one recreated under the name).
        same = current is not None and current.uid == uid
        status = current.status if current is not None and same else slim.status(body.get("status"))
        self._syncs[key] = state.SyncEntry(
            key=key,
            uid=uid,
            generation=generation,
            body=slim.sync_body(body),
            status=status,
            force_annotation=force,
            force_pending=current is not None and force != current.force_annotation and force is not None,
        )
        self._queue.enqueue(key, live=live, first=first)

    def deleted(self, key: state.SyncKey) -> None:
        entry = self._syncs.pop(key, None)
        self._queue.forget(key)
        metrics.forget_sync(key)  # its per-object series, when those are on
        if entry is None:
            return
        removed = self._scopes.unbind(key)
        self._targets.release(key)
        self._on_scopes_changed(set(), removed)


def _in_sync(body: Mapping[str, Any]) -> bool:
    """Whether status says this generation was reconciled (successfully or not)."""
    status = body.get("status") or {}
    reconciled = conditions.find(status.get("conditions") or [], reasons.READY) is not None
    generation = (body.get("metadata") or {}).get("generation")
    return reconciled and status.get("observedGeneration") == generation

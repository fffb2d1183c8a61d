"""PushSecrets in, the Secrets they name watched, a queue of passes, and the finalizer.

Why not kopf: like SecretSyncs, PushSecrets come through our own LIST+WATCH (watching.py) into a
deduplicating queue (scheduler.py), so 1,000 of them cost one watch and no per-object timers.

Why the source Secrets cost almost nothing: the identity intake already watches every Secret's
*metadata* (for the identities' opt-ins). A Secret's resourceVersion moves with every change of
its data or annotations, so that same watch tells us a source changed: ``secret_seen`` looks the
(namespace, name) up in ``_by_source`` — the Secrets some PushSecret names — and queues those
PushSecrets as live work. No Secret's data is cached; a pass reads its one Secret (one GET).

A pass runs on: a new PushSecret, a spec change (generation), deletion, a change of its source
Secret, a retry after a retriable failure, and ``spec.refreshInterval`` when set. Our own status
patches echo back as MODIFIED with the same generation and start nothing: at rest, no calls.

The finalizer (``secretferry.io/push-finalizer``) is added only under deletionPolicy Delete: there
is nothing to do at deletion otherwise, and a finalizer that nobody removes (operator uninstalled)
would hold the object.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from secretferry.kube import client as kube_client
from secretferry.kube import customresources, watching
from secretferry.kube import errors as kube_errors
from secretferry.kube import status as kube_status
from secretferry.models import base as models_base
from secretferry.models import pushsecret as push_models
from secretferry.reconcile import scheduler
from secretferry.reconcile.push import passes, pushing, trust
from secretferry.reconcile.push import plan as plan_mod

log = logging.getLogger(__name__)

FINALIZER: Final = "secretferry.io/push-finalizer"
PushKey = tuple[str, str]  # (namespace, name)


@dataclass
class _Entry:
    body: dict[str, Any]
    handled_generation: int | None = None
    source: str | None = None
    """The Secret the last pass read (named, or a generator's), for ``_by_source``."""
    failures: int = 0
    records: dict[str, plan_mod.Record] | None = None
    """What the last pass left at the service as ours (status.pushedKeys may not have echoed back
    yet when the next change comes); None until a pass listed the destination."""
    records_for: str | None = None
    """The destination ``records`` describe: after the spec changes it they are not used."""


class PushIntake:
    def __init__(
        self,
        *,
        deps: pushing.PushDeps,
        workers: int,
        backoff_initial_seconds: float,
        backoff_max_seconds: float,
        serves: Callable[[str], bool] = lambda _namespace: True,
    ) -> None:
        self._deps = deps
        self._serves = serves
        self._entries: dict[PushKey, _Entry] = {}
        self._by_source: dict[tuple[str, str], set[PushKey]] = {}
        self._source_versions: dict[tuple[str, str], str] = {}
        self._backoff_initial = backoff_initial_seconds
        self._backoff_max = backoff_max_seconds
        self.queue: scheduler.Scheduler[PushKey] = scheduler.Scheduler(
            self._work, workers=workers, tenant=lambda key: key[0]
        )

    @property
    def kube(self) -> kube_client.Kube:
        return self._deps.kube

    def count(self) -> int:
        return len(self._entries)

    # --- PushSecrets ------------------------------------------------------------------------
    async def watch(self, namespace: str | None) -> None:
        async for event in watching.watch(
            self.kube, path=customresources.collection_path(push_models.PLURAL), namespace=namespace
        ):
            if event.type == "SYNCED":
                continue
            meta = event.object.get("metadata") or {}
            key: PushKey = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            if event.type == "DELETED":
                self._drop(key)
                continue
            self.seen(key, event.object)

    def seen(self, key: PushKey, body: dict[str, Any]) -> None:
        """A PushSecret as the watch saw it. In a namespace the operator does not serve
        (namespace selector) it is not ours; one that was served when seen stays until deleted."""
        if key not in self._entries and not self._serves(key[0]):
            return
        meta = body.get("metadata") or {}
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(body=body)
            self._index(key, entry, _named_source(body))
            self.queue.enqueue(key)
            return
        entry.body = body
        if meta.get("deletionTimestamp") or meta.get("generation") != entry.handled_generation:
            self.queue.enqueue(key)

    def _drop(self, key: PushKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._index(key, entry, None)
        self.queue.forget(key)

    def _index(self, key: PushKey, entry: _Entry, source: str | None) -> None:
        if entry.source == source:
            return
        if entry.source is not None:
            users = self._by_source.get((key[0], entry.source))
            if users is not None:
                users.discard(key)
                if not users:
                    del self._by_source[(key[0], entry.source)]
                    self._source_versions.pop((key[0], entry.source), None)
        entry.source = source
        if source is not None:
            self._by_source.setdefault((key[0], source), set()).add(key)

    # --- source Secrets (from the identity intake's metadata-only Secret watch) -------------
    def secret_seen(self, namespace: str, name: str, meta: Mapping[str, Any] | None) -> None:
        """A Secret as the metadata watch saw it (``None``: deleted): queue its PushSecrets when
        it is one of theirs and it changed (resourceVersion moved)."""
        users = self._by_source.get((namespace, name))
        if not users:
            return
        version = "" if meta is None else str(meta.get("resourceVersion", ""))
        if self._source_versions.get((namespace, name)) == version:
            return
        self._source_versions[(namespace, name)] = version
        for key in users:
            self.queue.enqueue(key)

    # --- identities (from the identity intake) ---------------------------------------------
    def identity_changed(self, kind: str, namespace: str | None, name: str) -> None:
        """An identity appeared, changed, went, or its consent did: queue the PushSecrets naming
        it (a scan of the kept bodies: PushSecrets are few)."""
        for key, entry in self._entries.items():
            ref = (entry.body.get("spec") or {}).get("identityRef") or {}
            if ref.get("kind", "MachineIdentity") != kind or ref.get("name") != name:
                continue
            if kind == "ClusterMachineIdentity" or key[0] == namespace:
                self.queue.enqueue(key)

    # --- the worker -------------------------------------------------------------------------
    async def _work(self, key: PushKey) -> None:
        entry = self._entries.get(key)
        if entry is None:
            return
        body = entry.body
        meta = body.get("metadata") or {}
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            if FINALIZER in finalizers:
                outcome = await passes.remove(self._deps, body)
                if outcome.retriable:
                    self._retry(key, entry, outcome)
                    return
                await self._set_finalizers(key, body, [f for f in finalizers if f != FINALIZER])
            return
        try:
            model = push_models.PushSecret.from_body(body)
        except ValueError as exc:  # the CRD validates; an older CRD may not
            log.warning("PushSecret %s/%s has an invalid spec: %s", *key, exc)
            entry.handled_generation = meta.get("generation")
            return
        wants_finalizer = model.spec.deletion_policy == "Delete"
        if wants_finalizer != (FINALIZER in finalizers):
            wanted = (
                [*finalizers, FINALIZER] if wants_finalizer else [f for f in finalizers if f != FINALIZER]
            )
            if not await self._set_finalizers(key, body, wanted):
                return  # the patched object comes back through the watch and is queued again
        entry.handled_generation = meta.get("generation")
        destination = trust.describe(model.spec.destination)
        last = entry.records if entry.records_for == destination else None
        outcome = await passes.push(self._deps, body, last=last)
        if outcome.records is not None:
            entry.records, entry.records_for = outcome.records, destination
        if outcome.source_secret is not None:
            self._index(key, entry, outcome.source_secret)
        if outcome.retriable:
            self._retry(key, entry, outcome)
            return
        entry.failures = 0
        refresh = model.spec.refresh_interval_seconds
        if refresh is not None:
            self.queue.enqueue_after(key, refresh)

    def _retry(self, key: PushKey, entry: _Entry, outcome: pushing.Outcome) -> None:
        entry.failures += 1
        delay = outcome.retry_after or min(
            self._backoff_max, self._backoff_initial * 2 ** min(entry.failures - 1, 16)
        )
        self.queue.enqueue_after(key, delay)

    async def _set_finalizers(self, key: PushKey, body: Mapping[str, Any], finalizers: list[str]) -> bool:
        """Merge-patch ``metadata.finalizers`` guarded by resourceVersion (a race is retried by the
        watch event that beat us). Returns whether it was written."""
        meta = body.get("metadata") or {}
        path = kube_status.resource_path(
            group=models_base.GROUP,
            version=models_base.VERSION,
            plural=push_models.PLURAL,
            namespace=key[0],
            name=key[1],
        )
        try:
            await self.kube.request(
                "PATCH",
                path,
                body={"metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}},
                content_type=kube_status.MERGE_PATCH,
            )
        except (kube_errors.Conflict, kube_errors.NotFound):
            return False
        return True


def _named_source(body: Mapping[str, Any]) -> str | None:
    """The Secret a PushSecret names directly (a generator's is learnt from its first pass)."""
    secret = ((body.get("spec") or {}).get("selector") or {}).get("secret") or {}
    name = secret.get("name")
    return name if isinstance(name, str) else None

"""Identities in: the start-up read, kopf's events after it, and the hand-off from standby to leader.

kopf delivers (Cluster)MachineIdentity events to every replica (handlers/operator.py). A standby
replica only keeps its registry current; once this replica leads (``take_over``), a new or
changed identity is logged in once (identity_status.py) and the SecretSyncs naming it are queued.
Identities delivered while waiting to lead are kept as they are by the start-up read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from secretferry import backoff
from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.kube import customresources
from secretferry.kube import errors as kube_errors
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import identity_status, scheduler, state

log = logging.getLogger(__name__)
# "storage is (re)initializing" right after a CRD install: a few attempts, then kopf's watch
# brings the identities anyway.
_LIST_ATTEMPTS = 10
_LIST_RETRY_INITIAL_SECONDS = 0.5
_LIST_RETRY_MAX_SECONDS = 5.0


class IdentityIntake:
    def __init__(
        self,
        *,
        kube: kube_client.Kube,
        settings: settings_mod.Settings,
        identities: ident_mod.IdentityRegistry,
        syncs: Mapping[state.SyncKey, state.SyncEntry],
        queue: scheduler.Scheduler[state.SyncKey],
        status: identity_status.IdentityStatus,
    ) -> None:
        self._kube = kube
        self._settings = settings
        self._identities = identities
        self._syncs = syncs
        self._queue = queue
        self._status = status
        self.leading = False

    def take_over(self) -> None:
        """This replica leads from now on: identity events reach the SecretSyncs, not just the registry."""
        self.leading = True

    def step_down(self) -> None:
        """This replica no longer leads: identity events only keep the registry current again."""
        self.leading = False

    async def list_all(self) -> None:
        """Read every identity before the first reconcile. kopf delivers them too, but later: a
        SecretSync reconciled first would report IdentityNotFound, post a Warning and back off.
        Identities kopf delivered already (e.g. while we waited to lead) are kept as they are."""
        namespaces: list[str | None] = list(self._settings.watched_namespaces()) or [None]
        sources = [(ident_mod.CLUSTER, None)] + [(ident_mod.MACHINE, ns) for ns in namespaces]
        for kind, namespace in sources:
            plural = ident_mod.PLURALS[kind]
            retry = backoff.Backoff(
                _LIST_RETRY_INITIAL_SECONDS, _LIST_RETRY_MAX_SECONDS, jitter=backoff.EQUAL_JITTER
            )
            for attempt in range(_LIST_ATTEMPTS):
                try:
                    items = await customresources.list_items(self._kube, plural=plural, namespace=namespace)
                    break
                except kube_errors.KubeError as exc:
                    where = customresources.collection_path(plural, namespace=namespace)
                    log.warning("listing identities (%s), attempt %d: %s", where, attempt + 1, exc)
                    await asyncio.sleep(retry.next_delay())
            else:
                continue  # kopf's watch will still bring them
            for body in items:
                self._identities.upsert(kind, body)

    def check_all(self) -> list[asyncio.Task[None]]:
        """Log every known identity in once (start-up), each in its own task."""
        return [self._status.spawn_check(entry) for entry in self._identities.entries()]

    def event(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """An identity event from kopf: update the registry; when leading, re-check and requeue."""
        meta = body.get("metadata", {})
        if event_type == "DELETED":
            self._identities.remove(kind, meta.get("namespace"), meta.get("name", ""))
        else:
            previous = self._identities.get((kind, meta.get("namespace") or "", meta.get("name", "")))
            entry = self._identities.upsert(kind, body)
            if previous is not None and previous.generation == entry.generation and previous.uid == entry.uid:
                return
            if self.leading:
                self._status.spawn_check(entry)
        if not self.leading:
            return  # a standby replica only keeps its registry current
        for key, e in self._syncs.items():
            if _uses(e, kind, meta.get("namespace"), meta.get("name", "")):
                self._queue.enqueue(key, live=False)  # possibly thousands: behind user changes


def _uses(entry: state.SyncEntry, kind: str, namespace: str | None, name: str) -> bool:
    """Whether the SecretSync names this identity (read from the kept body: no parse needed)."""
    ref = (entry.body.get("spec") or {}).get("identityRef") or {}
    ref_kind, ref_name = ref.get("kind", ident_mod.MACHINE), ref.get("name")
    if ref_kind != kind or ref_name != name:
        return False
    return kind == ident_mod.CLUSTER or entry.key[0] == namespace

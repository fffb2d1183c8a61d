"""The controller: the composition root that builds the collaborators and wires them together.

Shape (docs/architecture.md, "Scale decisions"): SecretSyncs arrive through our own LIST+WATCH (not kopf
change handlers), go into one deduplicating work queue with live changes ahead of the resync
backlog, and are reconciled by a bounded worker pool. Scopes — not SecretSyncs — are what the
resync loop and the event streams talk about: a due scope or an event marks the scope stale and
queues its SecretSyncs; the first of them to run fetches (one list call, ETag-aware) and the rest
reuse that result.

Each job has its own module (see ``reconcile/__init__.py``); this one only builds them, hands each
what it needs, and runs a queued SecretSync through the pass (sync.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from secretferry import metrics
from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.reconcile import (
    deps,
    identity_intake,
    identity_status,
    recovery,
    resync,
    rollouts,
    scheduler,
    served,
    startup,
    state,
    streaming,
    sync,
    sync_intake,
    target_intake,
    tasks,
    template_intake,
)
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile.privileges import manager as privileges_mod
from secretferry.service import fetcher as fetcher_mod
from secretferry.service import scopes as scope_mod

log = logging.getLogger(__name__)
# How long a routine status patch may wait for the live work around it (Scheduler.step_aside):
# long enough for a burst of writes, short enough that status never lags noticeably.
_STEP_ASIDE_MAX_SECONDS = 1.0


class Controller:
    def __init__(
        self,
        *,
        kube: kube_client.Kube,
        settings: settings_mod.Settings,
        hmac_key: bytes,
        instance: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.syncs: dict[state.SyncKey, state.SyncEntry] = {}
        self.served = served.ServedNamespaces(
            settings.namespace_selector(), names=settings.watched_namespaces()
        )
        self.background = tasks.Tasks()
        self.identities = ident_mod.IdentityRegistry(
            kube=kube,
            settings=settings,
            on_host_recovered=lambda host: self.recovery.host_recovered(host),
            clock=clock,
        )
        self.fetcher = fetcher_mod.ScopeFetcher(
            backoff_initial=settings.backoff_initial_seconds,
            backoff_max=settings.backoff_max_seconds,
            on_call=metrics.count_list_call,
        )
        self.scopes = state.ScopeIndex(jitter_fraction=settings.resync_jitter_fraction)
        self.targets = state.TargetCache()
        self.rollouts = rollouts.RolloutManager(
            kube,
            cooldown_seconds=settings.rollout_cooldown_seconds,
            instance=instance,
            enabled=settings.rollouts_enabled,
        )
        self.queue: scheduler.Scheduler[state.SyncKey] = scheduler.Scheduler(
            self._work, workers=settings.workers, tenant=_namespace
        )
        self.slugs = scope_mod.SlugCache()
        self.identity_status = identity_status.IdentityStatus(
            kube=kube,
            identities=self.identities,
            routes=self.fetcher.routes,
            slug_routes=self.slugs.routes,
            background=self.background,
        )
        self.streaming = streaming.Streaming(
            settings=settings,
            identities=self.identities,
            scopes=self.scopes,
            fetcher=self.fetcher,
            queue=self.queue,
            background=self.background,
            clock=clock,
        )
        self.recovery = recovery.Recovery(
            identities=self.identities,
            syncs=self.syncs,
            scopes=self.scopes,
            fetcher=self.fetcher,
            streams=self.streaming.manager,
            queue=self.queue,
        )
        self.sync_intake = sync_intake.SyncIntake(
            kube=kube,
            syncs=self.syncs,
            scopes=self.scopes,
            targets=self.targets,
            queue=self.queue,
            on_scopes_changed=self.streaming.scopes_changed,
            served_namespaces=self.served,
        )
        self.target_intake = target_intake.TargetIntake(
            kube=kube, targets=self.targets, syncs=self.syncs, queue=self.queue
        )
        self.template_intake = template_intake.TemplateSourceIntake(
            kube=kube, syncs=self.syncs, queue=self.queue
        )
        self.identity_intake = identity_intake.IdentityIntake(
            kube=kube,
            settings=settings,
            identities=self.identities,
            syncs=self.syncs,
            queue=self.queue,
            status=self.identity_status,
            served_namespaces=self.served,
            on_namespace_served=self._namespace_served,
        )
        self.resync = resync.Resync(
            settings=settings,
            syncs=self.syncs,
            scopes=self.scopes,
            streams=self.streaming.manager,
            queue=self.queue,
            clock=clock,
        )
        self.privileges = privileges_mod.PrivilegeManager(
            kube=kube, settings=settings, identities=self.identities, instance=instance
        )
        self.deps = deps.Deps(
            kube=kube,
            settings=settings,
            hmac_key=hmac_key,
            identities=self.identities,
            fetcher=self.fetcher,
            slugs=self.slugs,
            scopes=self.scopes,
            targets=self.targets,
            rollouts=self.rollouts,
            on_scopes_changed=self.streaming.scopes_changed,
            on_identity=self.identity_status.report,
            instance=instance,
            clock=clock,
            step_aside=lambda: self.queue.step_aside(max_wait_seconds=_STEP_ASIDE_MAX_SECONDS),
            off_slot=self.queue.off_slot,
            template_sources=self.template_intake,
        )

    # --- lifecycle (handlers/operator.py: at once, or once this replica leads) -----------------
    async def start(self) -> None:
        self.identity_intake.take_over()
        boot = startup.boot(
            settings=self.settings,
            background=self.background,
            syncs=self.sync_intake,
            targets=self.target_intake,
            templates=self.template_intake,
            identities=self.identity_intake,
            resync_=self.resync,
            queue=self.queue,
            served_=self.served,
        )
        self.background.spawn(boot, "start-up")
        self.background.spawn(self._start_privileges(), "temporary privileges")

    async def _start_privileges(self) -> None:
        await self.identity_intake.listed.wait()
        await self.privileges.start()

    async def wait_ready(self) -> None:
        await self.target_intake.ready.wait()

    async def stop(self) -> None:
        # Nothing new first (no identity checks, no passes), then what runs: once stop begins, this
        # replica may have lost its Lease, and every write from here on could race the new leader.
        self.identity_intake.step_down()
        await self.queue.stop()
        await self.privileges.stop()
        await self.background.cancel_all()
        await self.streaming.manager.close()
        await self.rollouts.close()
        await self.identities.close()

    def identity_event(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """An identity event from kopf (handlers/operator.py)."""
        self.identity_intake.event(kind, event_type, body)
        if kind == ident_mod.CLUSTER:
            self.privileges.granter_changed(str(body.get("metadata", {}).get("name") or ""))

    def privilege_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A TemporaryPrivilege event from kopf (handlers/operator.py)."""
        self.privileges.event(event_type, body)

    def _namespace_served(self, namespace: str, serve: bool) -> None:
        """A namespace came to match the namespace selector (taken in) or stopped (let go)."""
        if serve:
            self.identity_intake.namespace_served(namespace)
            self.background.spawn_side(self.sync_intake.take_in(namespace))
        else:
            self.sync_intake.let_go(namespace)
            self.identity_intake.namespace_let_go(namespace)

    # --- the worker: one queued SecretSync through the pass -----------------------------------
    async def _work(self, key: state.SyncKey) -> None:
        entry = self.syncs.get(key)
        if entry is None:
            return
        entry.parse()
        try:
            delay = await sync.reconcile(self.deps, entry)
        finally:
            entry.model = None  # parsed again next time: see SyncEntry.body
            if key not in self.syncs:
                # Deleted during the pass: the intake dropped its per-object series before the
                # report set them again, and an unchanged status patches nothing to find it gone.
                metrics.forget_sync(key)
        if delay is not None and key in self.syncs:
            self.queue.enqueue_after(key, delay)


def _namespace(key: state.SyncKey) -> str:
    """The queue's tenant: no namespace takes more than its share of the workers (fairness.py)."""
    return key[0]

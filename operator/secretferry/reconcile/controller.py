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

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from secretferry import metrics
from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.reconcile import (
    cluster_report,
    cluster_syncs,
    deps,
    identity_intake,
    identity_status,
    identity_summary,
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
    sync_table,
    target_intake,
    tasks,
    template_intake,
    webhook_relay,
    webhooks,
)
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile.generators import intake as generator_intake
from secretferry.reconcile.privileges import manager as privileges_mod
from secretferry.reconcile.push import intake as push_intake
from secretferry.reconcile.push import pushing as push_pushing
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
        webhook_leader: Callable[[], webhook_relay.Address | None] = lambda: None,
    ) -> None:
        """``webhook_leader``: where a standby relays a verified webhook (the address the leader
        advertises on the Lease; handlers/operator.py)."""
        self.settings = settings
        self.clock = clock
        self.leading = asyncio.Event()
        """Set while this replica works (started, not stopped): kopf's per-object handlers of
        DynamicSecretLease (handlers/leases.py) act only then."""
        self.syncs = sync_table.SyncTable()
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
            # Counts the call and notes it on its scope (no write): the identity's status shows it.
            on_call=lambda scope, outcome, endpoint: self.identity_summary.list_called(
                scope, outcome, endpoint
            ),
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
        self.identity_summary = identity_summary.IdentitySummary(
            kube=kube,
            settings=settings,
            identities=self.identities,
            scopes=self.scopes,
            streams=lambda: self.streaming.manager,
            slugs=self.slugs,
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
        self.webhooks = webhooks.Receiver(
            settings=settings,
            scopes=self.scopes,
            on_resync=self.streaming.on_resync,
            background=self.background,
            leading=self.leading.is_set,
            leader=webhook_leader,
        )
        # The receiver's own tasks: it listens from start-up to shutdown, leading or not (a standby
        # relays), so not among ``background``, which a step-down cancels.
        self.receiving = tasks.Tasks()
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
        # ClusterSecretSyncs: one entry per selected namespace in ``syncs``, through the same pass.
        self.cluster_records: dict[str, cluster_report.ClusterRecord] = {}
        self.cluster_report = cluster_report.ClusterReport(
            kube=kube, syncs=self.syncs, records=self.cluster_records, instance=instance
        )
        self.cluster_syncs = cluster_syncs.ClusterSyncs(
            kube=kube,
            settings=settings,
            syncs=self.syncs,
            queue=self.queue,
            namespaces=self.identities.namespaces,
            sync_intake_=self.sync_intake,
            records=self.cluster_records,
            report=self.cluster_report,
            background=self.background,
            serves=self.served.serves,
        )
        self.template_intake = template_intake.TemplateSourceIntake(
            kube=kube, syncs=self.syncs, queue=self.queue
        )
        self.push = push_intake.PushIntake(
            deps=push_pushing.PushDeps(
                kube=kube,
                identities=self.identities,
                routes=self.fetcher.routes,
                slugs=self.slugs,
                hmac_key=hmac_key,
                instance=instance,
                syncs_writing=self.syncs.writing,
            ),
            workers=settings.workers,
            backoff_initial_seconds=settings.backoff_initial_seconds,
            backoff_max_seconds=settings.backoff_max_seconds,
            serves=self.served.serves,
        )
        self.generators = generator_intake.GeneratorIntake(
            kube=kube, instance=instance, enqueue_sync=self._generator_wrote, served=self.served
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
            on_namespace=self.cluster_syncs.namespace_changed,
            on_secret=self.push.secret_seen,
            on_identity=self.push.identity_changed,
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
            on_cluster_report=self.cluster_report.entry_reported,
            generator_sources=self.generators,
            until_decided=self.streaming.until_decided,
        )

    # --- lifecycle (handlers/operator.py: at once, or once this replica leads) -----------------
    async def start(self) -> None:
        self.identity_intake.take_over()
        self.leading.set()
        boot = startup.boot(
            settings=self.settings,
            background=self.background,
            syncs=self.sync_intake,
            targets=self.target_intake,
            templates=self.template_intake,
            identities=self.identity_intake,
            clusters=self.cluster_syncs,
            cluster_report_=self.cluster_report,
            resync_=self.resync,
            queue=self.queue,
            served_=self.served,
        )
        self.background.spawn(boot, "start-up")
        # An identity's streams and scopes in its status, at most once per interval (never per list).
        self.background.spawn(self.identity_summary.run(), "identity summaries")
        self.background.spawn(self._start_push(), "start pushsecrets")
        self._start_generators()
        self.background.spawn(self._start_privileges(), "temporary privileges")

    async def _start_privileges(self) -> None:
        """TemporaryPrivileges (reconcile/privileges/), once the identities are read (else their
        granter would read as missing for a moment)."""
        await self.identity_intake.listed.wait()
        await self.privileges.start()

    async def _start_push(self) -> None:
        """PushSecrets (reconcile/push/): their own watch and queue, once the identities are read
        (else the first passes would report IdentityNotFound)."""
        await self.identity_intake.listed.wait()
        namespaces: list[str | None] = list(self.settings.watched_namespaces()) or [None]
        for ns in namespaces:
            self.background.spawn(self.push.watch(ns), f"watch pushsecrets {ns or '*'}")
        self.push.queue.start()

    def _start_generators(self) -> None:
        """PasswordGenerators and UUIDGenerators (generators/intake.py): their own watches and
        workers, apart from the SecretSync start-up (they are few, and wait for nothing)."""
        at_once = asyncio.Event()
        at_once.set()
        namespaces: list[str | None] = list(self.settings.watched_namespaces()) or [None]
        for ns in namespaces:
            for kind in generator_intake.KINDS:
                self.background.spawn(self.generators.watch(kind, ns, at_once), f"watch {kind}s {ns or '*'}")
            self.background.spawn(
                self.generators.watch_secrets(ns, at_once), f"watch generator Secrets {ns or '*'}"
            )
        self.background.spawn(self.generators.run(), "generator workers")

    def open_receiver(self) -> None:
        """Serve the webhook receiver (if configured) on every replica, from start-up on."""
        if self.settings.webhook_port:
            self.receiving.spawn(self.webhooks.serve(), "webhook receiver")

    async def close_receiver(self) -> None:
        await self.receiving.cancel_all()

    async def wait_ready(self) -> None:
        await self.target_intake.ready.wait()

    def serving(self) -> bool:
        """This replica leads and its caches are complete: the identities listed, every SecretSync
        watch listed once, and the managed-object cache complete (the backlog then runs). What the
        readiness probe reports as serving (secretferry/readiness.py)."""
        watches = len(self.settings.watched_namespaces()) or 1
        return (
            self.leading.is_set()
            and self.identity_intake.listed.is_set()
            and len(self.sync_intake.listed_watches) >= watches
            and self.target_intake.ready.is_set()
        )

    async def stop(self) -> None:
        # Nothing new first (no identity checks, no passes), then what runs: once stop begins, this
        # replica may have lost its Lease, and every write from here on could race the new leader.
        self.identity_intake.step_down()
        self.leading.clear()
        await self.queue.stop()
        await self.push.queue.stop()
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
            self.background.spawn_side(self.generators.take_in(namespace))
        else:
            self.sync_intake.let_go(namespace)
            self.generators.let_go(namespace)
            self.identity_intake.namespace_let_go(namespace)

    def _generator_wrote(self, key: state.SyncKey) -> None:
        """A generator a SecretSync reads wrote a new value: that SecretSync re-reads it, now."""
        if key in self.syncs:
            self.queue.enqueue(key, live=True)

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

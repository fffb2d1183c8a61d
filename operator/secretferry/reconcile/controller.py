"""The controller: intake, scheduling, periodic resync and event streams, wired together.

Shape (design.md, "Scale decisions"): SecretSyncs arrive through our own LIST+WATCH (not kopf
change handlers), go into one deduplicating work queue with live changes ahead of the resync
backlog, and are reconciled by a bounded worker pool. Scopes — not SecretSyncs — are what the
resync loop and the event streams talk about: a due scope or an event marks the scope stale and
queues its SecretSyncs; the first of them to run fetches (one list call, ETag-aware) and the rest
reuse that result.

Managed Secrets are watched by label only, so a hand edit or a deletion is repaired within
seconds, and every "does it need a write?" question is answered from memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import pydantic

from secretferry import metrics
from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.kube import customresources, watching
from secretferry.kube import errors as kube_errors
from secretferry.kube import objects as kube_objects
from secretferry.kube import status as kube_status
from secretferry.models import base as models_base
from secretferry.models import errors as model_errors
from secretferry.models import labels
from secretferry.models import secretsync as sync_models
from secretferry.reconcile import conditions, outcomes, reasons, rollouts, scheduler, slim, state, sync
from secretferry.reconcile import identities as ident_mod
from secretferry.service import errors as service_errors
from secretferry.service import events as service_events
from secretferry.service import fetcher as fetcher_mod
from secretferry.service import health as service_health
from secretferry.service import listroutes
from secretferry.service import scopes as scope_mod
from secretferry.service import streams as streams_mod

log = logging.getLogger(__name__)
_RESYNC_TICK_SECONDS = (
    1.0  # granularity of the periodic resync; intervals are minutes, jitter covers the rest
)
# How long a routine status patch may wait for the live work around it (Scheduler.step_aside):
# long enough for a burst of writes, short enough that status never lags noticeably.
_STEP_ASIDE_MAX_SECONDS = 1.0
# How long the start-up waits for the first logins before listing SecretSyncs and Secrets (_boot).
_LOGIN_HEAD_START_SECONDS = 2.0
_IDENTITY_PLURALS = {ident_mod.MACHINE: "machineidentities", ident_mod.CLUSTER: "clustermachineidentities"}


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
        self.kube = kube
        self.settings = settings
        self.clock = clock
        self.syncs: dict[state.SyncKey, state.SyncEntry] = {}
        self.identities = ident_mod.IdentityRegistry(
            kube=kube, settings=settings, on_host_recovered=self._host_recovered
        )
        self.fetcher = fetcher_mod.ScopeFetcher(
            backoff_initial=settings.backoff_initial_seconds,
            backoff_max=settings.backoff_max_seconds,
            on_call=_count_list_call,
        )
        self.slugs = scope_mod.SlugCache()
        self.scopes = state.ScopeIndex(jitter_fraction=settings.resync_jitter_fraction)
        self.targets = state.TargetCache()
        self.rollouts = rollouts.RolloutManager(
            kube, cooldown_seconds=settings.rollout_cooldown_seconds, instance=instance
        )
        self.queue: scheduler.Scheduler[state.SyncKey] = scheduler.Scheduler(
            self._work, workers=settings.workers
        )
        self.streams = streams_mod.StreamManager(
            open_stream=self._open_stream,
            on_resync=self._on_resync,
            on_mode=self._on_mode,
            heartbeat_seconds=settings.stream_heartbeat_seconds,
            debounce_seconds=settings.event_debounce_seconds,
            watchdog_heartbeats=settings.stream_watchdog_heartbeats,
            retry_after_refusal_seconds=settings.stream_retry_after_refusal_seconds,
            backoff_initial=settings.backoff_initial_seconds,
            backoff_max=min(settings.backoff_max_seconds, 60.0),
        )
        self.deps = sync.Deps(
            kube=kube,
            settings=settings,
            hmac_key=hmac_key,
            identities=self.identities,
            fetcher=self.fetcher,
            slugs=self.slugs,
            scopes=self.scopes,
            targets=self.targets,
            rollouts=self.rollouts,
            on_scopes_changed=self._on_scopes_changed,
            on_identity=self._on_identity,
            instance=instance,
            clock=clock,
            step_aside=lambda: self.queue.step_aside(max_wait_seconds=_STEP_ASIDE_MAX_SECONDS),
        )
        self._stream_groups: dict[tuple[str, str], frozenset[scope_mod.Scope]] = {}
        self._streams_dirty = False
        self._targets_ready = asyncio.Event()
        self._initial_listed = False
        self._synced_sources: set[tuple[str, str | None]] = set()
        self._sources_synced = asyncio.Event()
        self._reconnects_seen = 0
        self._started = False
        self._tasks: list[asyncio.Task[None]] = []
        self._identity_tasks: set[asyncio.Task[None]] = set()

    # --- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        self._started = True
        self._spawn(self._boot(), "start-up")

    async def _boot(self) -> None:
        """Watches at once, identities next, their logins then, the big LISTs last.

        Why this order: while the apiserver serves 10,000 SecretSyncs and 10,000 Secrets, every
        other request waits for CPU. Measured at 10,000 objects: listing the identities took 0.7 s
        and the first login (TokenRequest, then the service's TokenReview) 1 s when made during
        those LISTs, and a SecretSync created right after start waited for both; made before
        them, they take tens of milliseconds. The watches' early part (watching.py) runs from the
        start, so what is created meanwhile is live work, not part of the LIST. The logins get a
        head start, not a veto: a service that is down must not hold up the intake.
        """
        lists_may_start = asyncio.Event()
        namespaces: list[str | None] = list(self.settings.watched_namespaces()) or [None]
        target_kinds: tuple[kube_objects.Kind, ...] = ("Secret", "ConfigMap")
        for kind in target_kinds:
            for ns in namespaces:
                self._spawn(
                    self._watch_targets(kind, ns, lists_may_start),
                    f"watch {kube_objects.collection_path(kind)} {ns or '*'}",
                )
        for ns in namespaces:
            self._spawn(self._watch_syncs(ns, lists_may_start), f"watch secretsyncs {ns or '*'}")
        try:
            await self._list_identities()
            checks = [self._spawn_identity_check(entry) for entry in self.identities.entries()]
            if checks:
                await asyncio.wait(checks, timeout=_LOGIN_HEAD_START_SECONDS)
        finally:
            lists_may_start.set()
        self._spawn(self._resync_loop(), "resync loop")
        self._spawn(self._start_workers_when_ready(len(namespaces) * 2), "workers")

    async def wait_ready(self) -> None:
        await self._targets_ready.wait()

    async def stop(self) -> None:
        for task in self._tasks + list(self._identity_tasks):
            task.cancel()
        for task in self._tasks + list(self._identity_tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.queue.stop()
        await self.streams.close()
        await self.rollouts.close()
        await self.identities.close()

    def _spawn(self, coro: Any, name: str) -> None:
        self._tasks.append(asyncio.create_task(coro, name=name))

    # --- managed Secrets / ConfigMaps -------------------------------------------------------
    async def _watch_targets(
        self, kind: kube_objects.Kind, namespace: str | None, lists_may_start: asyncio.Event
    ) -> None:
        selector = f"{labels.MANAGED_BY_LABEL}={labels.MANAGED_BY_VALUE}"
        seen: set[state.TargetKey] = set()
        async for event in watching.watch(
            self.kube,
            path=kube_objects.collection_path(kind),
            label_selector=selector,
            namespace=namespace,
            list_after=lists_may_start,
        ):
            if event.type == "SYNCED":
                for gone in self.targets.forget_unseen(kind, namespace=namespace, seen=seen):
                    self._repair(gone)
                seen = set()
                self._targets_synced_once(kind, namespace)
                continue
            obj = event.object
            meta = obj.get("metadata", {})
            tkey: state.TargetKey = (kind, meta.get("namespace", ""), meta.get("name", ""))
            obj.setdefault("kind", kind)
            if event.type == "DELETED":
                self.targets.forget(tkey)
                self._repair(tkey)
                continue
            seen.add(tkey)
            echo = self.targets.is_echo(tkey, obj)
            self.targets.remember(tkey, obj)
            if not echo:
                self._repair(tkey, labels_of=meta.get("labels") or {})

    def _targets_synced_once(self, kind: kube_objects.Kind, namespace: str | None) -> None:
        self._synced_sources.add((kind, namespace))
        self._sources_synced.set()

    async def _list_identities(self) -> None:
        """Read every identity before the first reconcile. kopf delivers them too, but later: a
        SecretSync reconciled first would report IdentityNotFound, post a Warning and back off.
        Identities kopf delivered already (e.g. while we waited to lead) are kept as they are."""
        namespaces: list[str | None] = list(self.settings.watched_namespaces()) or [None]
        sources = [(ident_mod.CLUSTER, None)] + [(ident_mod.MACHINE, ns) for ns in namespaces]
        for kind, namespace in sources:
            plural = _IDENTITY_PLURALS[kind]
            for attempt in range(10):  # "storage is (re)initializing" right after a CRD install
                try:
                    items = await customresources.list_items(self.kube, plural=plural, namespace=namespace)
                    break
                except kube_errors.KubeError as exc:
                    where = customresources.collection_path(plural, namespace=namespace)
                    log.warning("listing identities (%s), attempt %d: %s", where, attempt + 1, exc)
                    await asyncio.sleep(min(0.5 * 2**attempt, 5.0))
            else:
                continue  # kopf's watch will still bring them
            for body in items:
                self.identities.upsert(kind, body)

    async def _start_workers_when_ready(self, expected: int) -> None:
        """Live work (objects created or changed after start) begins at once (identities are read
        by now, see _boot); the backlog (every existing SecretSync) once the target cache is
        complete, because without it every existing Secret would look missing and be rewritten.
        A live reconcile needs no cache: it creates its target, or reads the one that exists."""
        self.queue.start(backlog=False)
        while len(self._synced_sources) < expected:
            self._sources_synced.clear()
            await self._sources_synced.wait()
        self._targets_ready.set()
        log.info(
            "%d managed objects cached; %d workers take the backlog now",
            self.targets.count(),
            self.settings.workers,
        )
        self.queue.open_backlog()

    def _repair(self, tkey: state.TargetKey, *, labels_of: Mapping[str, str] | None = None) -> None:
        """A managed object changed or vanished under us: reconcile its SecretSync now."""
        if not self._targets_ready.is_set():
            return
        owner = self.targets.owner_of(tkey)
        if owner is None and labels_of and labels_of.get(labels.SYNC_LABEL):
            candidate = (tkey[1], labels_of[labels.SYNC_LABEL])
            owner = candidate if candidate in self.syncs else None
        if owner is not None and owner in self.syncs:
            self.queue.enqueue(owner, live=True)

    # --- SecretSync intake ---------------------------------------------------------------------
    async def _watch_syncs(self, namespace: str | None, lists_may_start: asyncio.Event) -> None:
        path = customresources.collection_path(sync.PLURAL)
        seen: set[state.SyncKey] = set()
        # Objects a watch event deleted while a LIST was still arriving: a list item may show them
        # from before their deletion (watching.py, early watch) and must not bring them back.
        deleted_uids: set[str] = set()
        async for event in watching.watch(
            self.kube, path=path, namespace=namespace, list_after=lists_may_start
        ):
            if event.type == "SYNCED":
                for gone in [
                    k for k in self.syncs if k not in seen and (namespace is None or k[0] == namespace)
                ]:
                    self._sync_deleted(gone)
                if not self._initial_listed:
                    log.info("listed %d SecretSyncs", len(self.syncs))
                seen, deleted_uids = set(), set()
                self._initial_listed = True
                continue
            meta = event.object.get("metadata", {})
            key: state.SyncKey = (meta.get("namespace", ""), meta.get("name", ""))
            if event.type == "DELETED":
                deleted_uids.add(meta.get("uid", ""))
                self._sync_deleted(key)
            elif not (event.listed and meta.get("uid", "") in deleted_uids):
                seen.add(key)
                # A change made after start-up (not part of the initial LIST) is live work, even
                # when it arrives while the LIST is still coming in. Of the initial LIST, objects
                # not in sync yet (new, or edited while we were down) go before the rest.
                live = self._initial_listed or not event.listed
                first = not live and not _in_sync(event.object)
                self.sync_upserted(event.object, live=live, first=first)

    def sync_upserted(self, body: Mapping[str, Any], *, live: bool, first: bool = False) -> None:
        meta = body.get("metadata", {})
        key: state.SyncKey = (meta.get("namespace", ""), meta.get("name", ""))
        uid, generation = meta.get("uid", ""), meta.get("generation")
        force = (meta.get("annotations") or {}).get(state.FORCE_SYNC_ANNOTATION)
        current = self.syncs.get(key)
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
                self.queue.enqueue(key, live=True)
            return  # a status-only change, most likely our own patch echoing back
        # Status as we last wrote it, unless this is a new object (or one recreated under the name).
        same = current is not None and current.uid == uid
        status = current.status if current is not None and same else slim.status(body.get("status"))
        self.syncs[key] = state.SyncEntry(
            key=key,
            uid=uid,
            generation=generation,
            body=slim.sync_body(body),
            status=status,
            force_annotation=force,
            force_pending=current is not None and force != current.force_annotation and force is not None,
        )
        self.queue.enqueue(key, live=live, first=first)

    def _sync_deleted(self, key: state.SyncKey) -> None:
        entry = self.syncs.pop(key, None)
        self.queue.forget(key)
        if entry is None:
            return
        removed = self.scopes.unbind(key)
        self.targets.release(key)
        self._on_scopes_changed(set(), removed)

    async def _work(self, key: state.SyncKey) -> None:
        entry = self.syncs.get(key)
        if entry is None:
            return
        _parse(entry)
        try:
            delay = await sync.reconcile(self.deps, entry)
        finally:
            entry.model = None  # parsed again next time: see SyncEntry.body
        if delay is not None and key in self.syncs:
            self.queue.enqueue_after(key, delay)

    # --- periodic resync ------------------------------------------------------------------------
    async def _resync_loop(self) -> None:
        ticks = 0
        while True:
            await asyncio.sleep(_RESYNC_TICK_SECONDS)
            ticks += 1
            now = self.clock()
            for scope in self.scopes.due(
                now, streaming_seconds=self.settings.streaming_refresh_interval_seconds
            ):
                for key in self.scopes.keys_of(scope):
                    self.queue.enqueue(key, live=False)
            # SecretSyncs without scopes (identity missing, invalid spec) are retried by backoff or
            # brought back by the watch event that fixes them.
            metrics.ACTIVE_SCOPES.set(len(self.scopes.all()))
            reconnects = self.streams.stats.reconnects
            metrics.STREAM_RECONNECTS.inc(reconnects - self._reconnects_seen)
            self._reconnects_seen = reconnects
            if ticks % 10 == 0:  # a pass over every SecretSync: every 10 s is plenty for a gauge
                ready = sum(1 for e in self.syncs.values() if _is_ready(e.status))
                metrics.RESOURCES.labels(ready="true").set(ready)
                metrics.RESOURCES.labels(ready="false").set(len(self.syncs) - ready)

    # --- event streams ----------------------------------------------------------------------------
    def _on_scopes_changed(self, added: set[scope_mod.Scope], removed: set[scope_mod.Scope]) -> None:
        for scope in removed:
            if self.scopes.get(scope) is None:
                self.fetcher.forget(scope)
        if not self._streams_dirty:
            self._streams_dirty = True  # one refresh for a burst of scope changes (start-up)
            task = asyncio.create_task(self._refresh_streams())
            self._identity_tasks.add(task)
            task.add_done_callback(self._identity_tasks.discard)

    async def _refresh_streams(self) -> None:
        """Give each (identity, project) its current scope set; unchanged groups are left alone."""
        await asyncio.sleep(0)
        self._streams_dirty = False
        groups = {k: frozenset(v) for k, v in self.scopes.streamed_by_project().items()}
        previous, self._stream_groups = self._stream_groups, groups
        for group in set(previous) | set(groups):
            new = groups.get(group, frozenset())
            if previous.get(group, frozenset()) != new:
                await self.streams.update(group[0], group[1], set(new))

    @contextlib.asynccontextmanager
    async def _open_stream(
        self, identity_key: str, project_id: str, registrations: Sequence[service_events.EventRegistration]
    ) -> AsyncIterator[AsyncIterator[service_events.StreamMessage]]:
        """Open one stream with the identity's shared session (re-login on a rejected token)."""
        entry = next((e for e in self.identities.entries() if ident_mod.key_str(e.key) == identity_key), None)
        if entry is None or entry.model is None:
            raise service_errors.AuthenticationError(f"identity {identity_key} is gone")
        try:
            session = await self.identities.session(entry)
            await session.token()  # log in here, so a credentials problem surfaces as an auth failure
        except ident_mod.IdentityProblem as exc:
            raise service_errors.AuthenticationError(exc.message) from exc
        async with session.subscribe(project_id, registrations) as it:
            metrics.OPEN_STREAMS.inc()
            try:
                yield _counting(it)
            finally:
                metrics.OPEN_STREAMS.dec()

    def _on_resync(self, scopes: set[scope_mod.Scope], reason: str) -> None:
        now = self.clock()
        if reason == streams_mod.RESYNC_RECONNECT:
            metrics.RESYNCS_AFTER_RECONNECT.inc(len(scopes))
        # An event is news for these scopes: live. A (re)connect resync is a safety net over every
        # scope of the stream: backlog, so it never delays a new SecretSync.
        live = reason != streams_mod.RESYNC_RECONNECT
        for scope in scopes:
            st = self.scopes.get(scope)
            if st is None:
                continue
            st.fresh_after = now
            for key in st.keys:
                self.queue.enqueue(key, live=live)

    def _on_mode(self, scope: scope_mod.Scope, mode: str, reason: str) -> None:
        st = self.scopes.get(scope)
        if st is None or (st.mode, st.mode_reason) == (mode, reason):
            return
        st.mode, st.mode_reason = mode, reason
        if mode != reasons.STREAMING:
            interval = self.scopes.interval(
                scope, streaming_seconds=self.settings.streaming_refresh_interval_seconds
            )
            st.next_due = min(st.next_due, self.clock() + interval)
        for key in st.keys:
            self.queue.enqueue(key, live=False)  # status.updateMode follows

    # --- recovery after an outage ---------------------------------------------------------------
    def _host_recovered(self, host: service_health.HostHealth) -> None:
        """The service at ``host`` answers again: what waits only because it did not retries now.

        Without this, each scope, stream and SecretSync sleeps out its own backoff (full jitter up
        to ``backoff_max_seconds``) and the last of them converges a whole backoff period later.
        Woken are the streams that failed to connect, the scopes whose list call found nobody
        answering (their backoff is cut short, not reset: should the host fail again, the next
        delay is as long as before) and the SecretSyncs that reported ServiceUnavailable before
        reaching a scope (a login, a slug lookup). A 429's retry-after still holds (``not_before``).
        Bounded: the SecretSyncs go to the backlog, which the worker pool drains ``workers`` at a
        time, the fetcher makes one call per scope, and each identity logs in at most once.
        """
        identity_keys = {
            ident_mod.key_str(e.key)
            for e in self.identities.entries()
            if e.session is not None and e.session.host_health is host
        }
        if not identity_keys:
            return
        streams = self.streams.retry_now(identity_keys)
        keys: set[state.SyncKey] = set()
        scopes = 0
        for scope, st in self.scopes.all().items():
            if scope.identity_key in identity_keys and self.fetcher.retry_now(
                scope, not_before=host.not_before
            ):
                scopes += 1
                keys |= st.keys
        for key, entry in self.syncs.items():
            if _waits_for_service(entry) and _identity_key_str(entry) in identity_keys:
                keys.add(key)
        for key in keys:
            self.queue.enqueue(key, live=False)
        log.info(
            "the service at %s answers again: %d SecretSyncs (%d scopes) and %d event streams retry now",
            host.name,
            len(keys),
            scopes,
            streams,
        )

    # --- identities (events come from the kopf handlers) ---------------------------------------
    def identity_event(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata", {})
        if event_type == "DELETED":
            self.identities.remove(kind, meta.get("namespace"), meta.get("name", ""))
        else:
            previous = self.identities.get((kind, meta.get("namespace") or "", meta.get("name", "")))
            entry = self.identities.upsert(kind, body)
            if previous is not None and previous.generation == entry.generation and previous.uid == entry.uid:
                return
            if self._started:
                self._spawn_identity_check(entry)
        if not self._started:
            return  # a standby replica only keeps its registry current
        for key, e in self.syncs.items():
            if _uses(e, kind, meta.get("namespace"), meta.get("name", "")):
                self.queue.enqueue(key, live=False)  # possibly thousands: behind user changes

    def _spawn_identity_check(self, entry: ident_mod.IdentityEntry) -> asyncio.Task[None]:
        task = asyncio.create_task(self._check_identity(entry))
        self._identity_tasks.add(task)
        task.add_done_callback(self._identity_tasks.discard)
        return task

    async def _check_identity(self, entry: ident_mod.IdentityEntry) -> None:
        """Log in once when an identity appears or changes, so its status says whether it works."""
        if entry.model is None:
            await self._on_identity(entry, (reasons.INVALID_SPEC, entry.invalid or "invalid spec"))
            return
        try:
            session = await self.identities.session(entry)
            await session.token()
        except ident_mod.IdentityProblem as exc:
            await self._on_identity(entry, (exc.reason, exc.message))
        except service_errors.ServiceError as exc:
            failure = outcomes.from_service_error(exc, scope_text="login")
            await self._on_identity(entry, (failure.reason, failure.message))
        else:
            await self._on_identity(entry, None)

    async def _on_identity(self, entry: ident_mod.IdentityEntry, problem: tuple[str, str] | None) -> None:
        session = entry.session
        last_login = session.last_login_at if session is not None else None
        login_text = last_login.strftime("%Y-%m-%dT%H:%M:%SZ") if last_login else ""
        # Which list route the identity's host has, once a list there showed it (listroutes).
        list_path = self.fetcher.routes.known(session.api_root) if session is not None else None
        notes = (*entry.notes, listroutes.V3_NOTE) if list_path == listroutes.V3 else entry.notes
        if problem is None:
            reported = ("True", reasons.LOGGED_IN, login_text, list_path or "")
        else:
            reported = ("False", problem[0], login_text, list_path or "")
        if entry.reported == reported:
            return
        entry.reported = reported
        kind, namespace, name = entry.key
        status: dict[str, Any] = {
            "conditions": conditions.set_condition(
                [],
                type_=reasons.READY,
                status=reported[0],
                reason=reported[1],
                message="; ".join(("login works", *notes)) if problem is None else problem[1],
                observed_generation=entry.generation,
                now=conditions.now_iso(),
            ),
            "observedGeneration": entry.generation,
        }
        if last_login is not None:
            status["lastLoginTime"] = login_text
        if list_path is not None:
            status["listEndpoint"] = list_path
        expires = session.expires_at if session is not None else None
        if expires is not None:
            status["tokenExpiresAt"] = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            await kube_status.patch_status(
                self.kube,
                group=models_base.GROUP,
                version=models_base.VERSION,
                plural=_IDENTITY_PLURALS[kind],
                namespace=namespace or None,
                name=name,
                status=status,
            )
        except kube_errors.KubeError as exc:
            entry.reported = None
            log.warning("status of %s not written: %s", ident_mod.key_str(entry.key), exc)


async def _counting(
    it: AsyncIterator[service_events.StreamMessage],
) -> AsyncIterator[service_events.StreamMessage]:
    async for message in it:
        if isinstance(message, service_events.SecretEvent):
            metrics.STREAM_EVENTS.labels(type=message.event_type).inc()
            if not message.items:
                metrics.STREAM_UNKNOWN_SCOPE.inc()
        yield message


def _in_sync(body: Mapping[str, Any]) -> bool:
    """Whether status says this generation was reconciled (successfully or not)."""
    status = body.get("status") or {}
    reconciled = conditions.find(status.get("conditions") or [], reasons.READY) is not None
    generation = (body.get("metadata") or {}).get("generation")
    return reconciled and status.get("observedGeneration") == generation


def _count_list_call(scope: scope_mod.Scope, outcome: str, endpoint: str) -> None:
    metrics.SERVICE_CALLS.labels(endpoint=endpoint, status=outcome).inc()


def _waits_for_service(entry: state.SyncEntry) -> bool:
    """Whether the last reconcile failed because the service was unavailable (not rate limited)."""
    cond = conditions.find(entry.status.get("conditions") or [], reasons.READY)
    return (
        cond is not None
        and cond.get("status") == "False"
        and cond.get("reason") == reasons.SERVICE_UNAVAILABLE
    )


def _identity_key_str(entry: state.SyncEntry) -> str:
    """The ``key_str`` of the identity a SecretSync names (from the kept body: no parse needed)."""
    ref = (entry.body.get("spec") or {}).get("identityRef") or {}
    kind, name = ref.get("kind", ident_mod.MACHINE), ref.get("name", "")
    return ident_mod.key_str((kind, entry.key[0] if kind == ident_mod.MACHINE else "", name))


def _is_ready(status: Mapping[str, Any]) -> bool:
    cond = conditions.find(status.get("conditions") or [], reasons.READY)
    return cond is not None and cond.get("status") == "True"


def _parse(entry: state.SyncEntry) -> None:
    try:
        entry.model, entry.invalid = sync_models.SecretSync.from_body(entry.body), None
    except pydantic.ValidationError as exc:
        entry.model, entry.invalid = None, model_errors.describe_validation_error(exc)


def _uses(entry: state.SyncEntry, kind: str, namespace: str | None, name: str) -> bool:
    """Whether the SecretSync names this identity (read from the kept body: no parse needed)."""
    ref = (entry.body.get("spec") or {}).get("identityRef") or {}
    ref_kind, ref_name = ref.get("kind", ident_mod.MACHINE), ref.get("name")
    if ref_kind != kind or ref_name != name:
        return False
    return kind == ident_mod.CLUSTER or entry.key[0] == namespace

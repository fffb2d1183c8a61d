"""The event streams, wired to the scopes: which streams to hold, and what their news means.

Scopes — not SecretSyncs — are what the streams talk about. Each (identity, project) holds one
stream over its scope set, refreshed when the scopes the SecretSyncs bind change. An event marks
its scopes stale and queues their SecretSyncs as live work; a (re)connect resync is a safety net
and waits in the backlog; a stream's mode (streaming or polling) shortens the scope's resync.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence

from secretferry import metrics
from secretferry import settings as settings_mod
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import problems, reasons, scheduler, state, tasks
from secretferry.service import errors as service_errors
from secretferry.service import events as service_events
from secretferry.service import fetcher as fetcher_mod
from secretferry.service import scopes as scope_mod
from secretferry.service import streams as streams_mod

# Streams back off at most a minute between connects, whatever the general backoff cap: a stream
# that is down leaves its scopes polling, so reconnecting soon is worth more than elsewhere.
_STREAM_BACKOFF_MAX_SECONDS = 60.0
# The longest a new scope's first list waits for its stream to subscribe (``until_decided``): a
# subscribe takes a login (usually done) and one round trip; a stream that neither connects nor
# fails within this is not waited for (the list goes, and the connect makes it stale as before).
_FIRST_LIST_WAIT_SECONDS = 2.0


class Streaming:
    def __init__(
        self,
        *,
        settings: settings_mod.Settings,
        identities: ident_mod.IdentityRegistry,
        scopes: state.ScopeIndex,
        fetcher: fetcher_mod.ScopeFetcher,
        queue: scheduler.Scheduler[state.SyncKey],
        background: tasks.Tasks,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._identities = identities
        self._scopes = scopes
        self._fetcher = fetcher
        self._queue = queue
        self._background = background
        self._clock = clock
        self._groups: dict[tuple[str, str], frozenset[scope_mod.Scope]] = {}
        # on_resync says why: when each (identity, project)'s latest subscribe went out.
        self._subscribed_at: dict[tuple[str, str], float] = {}
        self._dirty = False
        self._undecided: dict[scope_mod.Scope, asyncio.Event] = {}
        """Scopes whose first list waits for their stream's first word (``until_decided``)."""
        self.manager = streams_mod.StreamManager(
            open_stream=self._open_stream,
            on_resync=self.on_resync,
            on_mode=self.on_mode,
            heartbeat_seconds=settings.stream_heartbeat_seconds,
            debounce_seconds=settings.event_debounce_seconds,
            watchdog_heartbeats=settings.stream_watchdog_heartbeats,
            retry_after_refusal_seconds=settings.stream_retry_after_refusal_seconds,
            # Streams cap their own schedule lower; a start above that cap starts at the cap.
            backoff_initial=min(settings.backoff_initial_seconds, _STREAM_BACKOFF_MAX_SECONDS),
            backoff_max=min(settings.backoff_max_seconds, _STREAM_BACKOFF_MAX_SECONDS),
        )

    def scopes_changed(self, added: set[scope_mod.Scope], removed: set[scope_mod.Scope]) -> None:
        """A pass (or a deletion) bound or let go of scopes: forget what nobody reads, refresh streams."""
        for scope in removed:
            if self._scopes.get(scope) is None:
                self._fetcher.forget(scope)
                self._decided(scope)
        if not self._dirty:
            self._dirty = True  # one refresh for a burst of scope changes (start-up)
            self._background.spawn_side(self._refresh())

    async def _refresh(self) -> None:
        """Give each (identity, project) its current scope set; unchanged groups are left alone."""
        await asyncio.sleep(0)
        self._dirty = False
        groups = {k: frozenset(v) for k, v in self._scopes.streamed_by_project().items()}
        previous, self._groups = self._groups, groups
        for group in set(previous) | set(groups):
            new = groups.get(group, frozenset())
            if previous.get(group, frozenset()) != new:
                await self.manager.update(group[0], group[1], set(new))
            if not new:
                self._subscribed_at.pop(group, None)  # a stream still connecting falls back to "now"

    async def until_decided(self, scope: scope_mod.Scope) -> None:
        """Before a streamed scope's first list: wait until its stream has subscribed (or is
        known not to: the scope polls), at most ``_FIRST_LIST_WAIT_SECONDS``.

        Why: a list sent before the subscribe is made stale by the connect (``on_resync``) and
        sent again, so every scope that a start-up burst listed before its stream was up cost two
        lists (10 scopes: 11 lists). Sent after the subscribe, the first list sees everything the
        stream does not: one list per scope. The wait is the subscribe's round trip, once per
        new scope; a scope whose mode is known (its stream is up, or it polls) does not wait."""
        st = self._scopes.get(scope)
        if st is None or not st.streamed or st.mode:
            return
        event = self._undecided.setdefault(scope, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_FIRST_LIST_WAIT_SECONDS):
                await event.wait()

    def _decided(self, scope: scope_mod.Scope) -> None:
        event = self._undecided.pop(scope, None)
        if event is not None:
            event.set()

    @contextlib.asynccontextmanager
    async def _open_stream(
        self, identity_key: str, project_id: str, registrations: Sequence[service_events.EventRegistration]
    ) -> AsyncIterator[AsyncIterator[service_events.StreamMessage]]:
        """Open one stream with the identity's shared session (re-login on a rejected token)."""
        entries = self._identities.entries()
        entry = next((e for e in entries if ident_mod.key_str(e.key) == identity_key), None)
        if entry is None or entry.model is None:
            raise service_errors.AuthenticationError(f"identity {identity_key} is gone")
        try:
            session = await self._identities.session(entry)
            await session.token()  # log in here, so a credentials problem surfaces as an auth failure
        except problems.Problem as exc:
            raise service_errors.AuthenticationError(exc.message) from exc
        # Read before the request goes out, so never later than the moment the service starts
        # sending this stream's events; the group's latest (another stream's is later: stricter).
        self._subscribed_at[(identity_key, project_id)] = self._clock()
        async with session.subscribe(project_id, registrations) as it:
            metrics.OPEN_STREAMS.inc()
            try:
                yield _counting(it)
            finally:
                metrics.OPEN_STREAMS.dec()

    def on_resync(self, scopes: set[scope_mod.Scope], reason: str) -> None:
        """Mark ``scopes`` stale and queue their SecretSyncs.

        An event makes every list sent before it stale. A (re)connect makes stale only the lists
        sent before its subscribe went out: what changed before then was not streamed, and a
        list sent after it saw everything the stream did not. Before, a connect made every list
        stale, so each scope a start-up burst listed before its stream subscribed (binding a new
        scope opens or replans the stream) was listed twice, and with the fair queue's namespace
        turns a burst reaches a new scope with nearly every key. No grace beyond the subscribe:
        a change between a scope's first list and its stream's subscribe would otherwise wait
        for the next resync (an hour while streaming), and a change made right after a
        SecretSync's creation is the common case, not the rare one.
        """
        now = self._clock()
        if reason == streams_mod.RESYNC_RECONNECT:
            metrics.RESYNCS_AFTER_RECONNECT.inc(len(scopes))
        # An event is news for these scopes: live. A (re)connect resync is a safety net over every
        # scope of the stream: backlog, so it never delays a new SecretSync.
        live = reason != streams_mod.RESYNC_RECONNECT
        for scope in scopes:
            st = self._scopes.get(scope)
            if st is None:
                continue
            stale_before = now if live else self._connect_stale_before(scope, now)
            st.fresh_after = max(st.fresh_after, stale_before)
            for key in st.keys:
                self._queue.enqueue(key, live=live)

    def _connect_stale_before(self, scope: scope_mod.Scope, now: float) -> float:
        """For a (re)connect resync: lists sent before this are stale (see ``on_resync``)."""
        return min(now, self._subscribed_at.get((scope.identity_key, scope.project_id), now))

    def on_mode(self, scope: scope_mod.Scope, mode: str, reason: str) -> None:
        self._decided(scope)  # streaming (subscribed) or polling: its first list waits no longer
        st = self._scopes.get(scope)
        if st is None or (st.mode, st.mode_reason) == (mode, reason):
            return
        st.mode, st.mode_reason = mode, reason
        if mode != reasons.STREAMING:
            interval = self._scopes.interval(
                scope, streaming_seconds=self._settings.streaming_refresh_interval_seconds
            )
            st.next_due = min(st.next_due, self._clock() + interval)
        for key in st.keys:
            self._queue.enqueue(key, live=False)  # status.updateMode follows


async def _counting(
    it: AsyncIterator[service_events.StreamMessage],
) -> AsyncIterator[service_events.StreamMessage]:
    async for message in it:
        if isinstance(message, service_events.SecretEvent):
            metrics.STREAM_EVENTS.labels(type=message.event_type).inc()
            if not message.items:
                metrics.STREAM_UNKNOWN_SCOPE.inc()
        yield message

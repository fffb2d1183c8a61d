"""Event streams per (identity, project): keep them open, fan their events out as resync nudges.

A stream only nudges: ``on_resync(scopes, reason)`` asks the caller to fetch and reconcile those
scopes; it never carries data and never writes. Shape (kopf ``watching.py`` style): a small
single-connection coroutine (``_connect_once``) inside a forever loop (``_run``) that decides, by
error class, how long to wait before the next connection:

- every (re)connect → ``on_resync(all scopes of the stream, "reconnect")``: events are never
  replayed, so whatever changed while no stream was open is only seen by a fresh list — except
  the scopes a retiring stream of the group still serves at that moment (a replan, below);
- a changed plan (``update``) starts the new streams *before* it stops those they replace, when
  the identity has room for them (``max_streams`` over all its streams): the old one keeps
  streaming until the new one has connected (or failed once), so the scopes both serve saw no
  gap and are not listed again. Before, a replan stopped first, and every scope of the group was
  listed again at the connect (at start-up: the one scope a live SecretSync had bound before
  the backlog's scopes replanned its stream). Without room: stop first, as before;
- ANY message (heartbeats included) feeds the watchdog; ``watchdog_heartbeats`` silent heartbeat
  periods → the connection is dropped and replaced;
- events are routed to the scopes the stream serves (merged filters over-deliver); the first one is
  passed on at once as ``on_resync(scopes, "event")``, and what arrives in the next
  ``debounce_seconds`` is coalesced into one more (a lone change never waits; a burst costs two
  nudges, not one per event);
- a message that names no usable location (not understood, or no payload) is a change of unknown
  scope: every scope of the stream is nudged as ``on_resync(scopes, "unknown")``, at once for the
  first and then at most once per ``unknown_nudge_seconds`` (a server that speaks a shape we do not
  know costs one conditional list per scope per interval, and never loses a change);
- ``AuthenticationError`` / ``StreamError``: the opener re-logs in (``AuthSession.subscribe`` drops
  the token); the first one reconnects at once, repeated ones back off (no tight login loop);
- ``PlanNotSupported`` / ``PermissionDenied`` (and other refusals that retrying cannot fix): the
  scopes poll; the stream is retried after ``retry_after_refusal_seconds``;
- ``StreamLimitReached``, ``Unavailable``, anything else: exponential backoff with full jitter;
  ``retry_now(identity_keys)`` cuts short the wait of streams that failed because their host did
  not answer, when it answers again (the backoff keeps growing should it fail once more).

``on_mode(scope, "Streaming" | "Polling", reason)`` is called when a scope's mode or its reason
changes. A dropped stream that reconnects at once does not flap the mode; a failed connect does.

``summaries()`` says, per identity, what each (identity, project)'s stream is doing (Open,
Connecting, Reconnecting, Refused), since when, and when it last brought an event: kept in memory
as it happens (no call), read by the identity status writer at its own pace.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime

from secretferry import backoff, logfields
from secretferry.service import errors, events, scopes, streamplan

logger = logging.getLogger(__name__)

STREAMING = "Streaming"
POLLING = "Polling"
RESYNC_RECONNECT = "reconnect"
RESYNC_EVENT = "event"
RESYNC_UNKNOWN = "unknown"
# A stream's state, as the identity's status shows it (models.identity.StreamState).
OPEN = "Open"
CONNECTING = "Connecting"
RECONNECTING = "Reconnecting"
REFUSED = "Refused"
# Worst first: a project's state is its worst connection's.
_STATE_ORDER = (REFUSED, RECONNECTING, CONNECTING, OPEN)
# The longest a replan keeps a replaced stream open while its replacement connects: a connect
# that takes longer is stuck (or waiting out a backoff), and the old stream's slot is wanted.
_RETIRE_MAX_SECONDS = 30.0

OpenStream = Callable[
    [str, str, Sequence[events.EventRegistration]],
    AbstractAsyncContextManager[AsyncIterator[events.StreamMessage]],
]
OnResync = Callable[[set[scopes.Scope], str], Awaitable[None] | None]
OnMode = Callable[[scopes.Scope, str, str], None]


@dataclasses.dataclass
class StreamStats:
    """Counters for metrics (the lead's collector reads them)."""

    connects: int = 0
    reconnects: int = 0
    heartbeats: int = 0
    unknown_scope_events: int = 0
    watchdog_timeouts: int = 0
    resyncs_after_reconnect: int = 0
    events: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    failures: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    resyncs: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)


@dataclasses.dataclass(frozen=True)
class StreamSummary:
    """What one (identity, project)'s stream is doing, for the identity's status (no values)."""

    project_id: str
    state: str
    message: str
    since: datetime
    last_event_at: datetime | None
    scopes: int


@dataclasses.dataclass(eq=False)
class _Group:
    identity_key: str
    project_id: str
    scopes: frozenset[scopes.Scope] = frozenset()
    streams: dict[frozenset[events.EventRegistration], _Stream] = dataclasses.field(default_factory=dict)
    last_event_at: datetime | None = None
    retiring: list[_Stream] = dataclasses.field(default_factory=list)
    """Streams a replan replaced, still open until their replacements connected (``_retire``)."""


@dataclasses.dataclass(eq=False)
class _Stream:
    group: _Group
    registrations: tuple[events.EventRegistration, ...]
    members: set[scopes.Scope]
    connected: bool = False
    task: asyncio.Task[None] | None = None
    flush_task: asyncio.Task[None] | None = None
    pending: set[scopes.Scope] = dataclasses.field(default_factory=set)
    unknown_task: asyncio.Task[None] | None = None
    unknown_pending: bool = False
    last_unknown_nudge: float | None = None
    waiting_for_host: bool = False
    """Waiting to reconnect after the host did not answer (see ``StreamManager.retry_now``)."""
    wake: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    state: str = CONNECTING
    state_message: str = "connecting"
    state_since: datetime | None = None
    first_attempt: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    """Set once its first connect has succeeded or failed: what a retiring stream waits for."""


@dataclasses.dataclass
class _Attempt:
    connected: bool = False
    healthy: bool = False  # at least one message arrived
    watchdog: bool = False


class StreamManager:
    """All event streams of the operator (see the module docstring)."""

    def __init__(
        self,
        *,
        open_stream: OpenStream,
        on_resync: OnResync,
        on_mode: OnMode,
        heartbeat_seconds: float = 15.0,
        watchdog_heartbeats: float = 3.0,
        debounce_seconds: float = 0.05,
        unknown_nudge_seconds: float = 5.0,
        backoff_initial: float = 1.0,
        backoff_max: float = 300.0,
        retry_after_refusal_seconds: float = 3600.0,
        max_registrations: int = streamplan.MAX_REGISTRATIONS,
        max_streams: int = streamplan.MAX_STREAMS,
        event_kinds: Sequence[str] = streamplan.DEFAULT_EVENTS,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """``wall``: the time of day, for ``summaries`` (``clock`` paces, this one is shown)."""
        self._open_stream = open_stream
        self._on_resync = on_resync
        self._on_mode = on_mode
        self._watchdog_seconds = heartbeat_seconds * watchdog_heartbeats
        self._debounce = debounce_seconds
        self._unknown_interval = unknown_nudge_seconds
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._retry_after_refusal = retry_after_refusal_seconds
        self._max_registrations = max_registrations
        self._max_streams = max_streams
        self._event_kinds = tuple(event_kinds)
        self._clock = clock
        self._wall = wall
        self._groups: dict[tuple[str, str], _Group] = {}
        self._modes: dict[scopes.Scope, tuple[str, str]] = {}
        self._lock = asyncio.Lock()
        self._retirements: set[asyncio.Task[None]] = set()
        self.stats = StreamStats()

    # --- queries ----------------------------------------------------------------------------------------

    @property
    def open_streams(self) -> int:
        """Streams connected right now."""
        return sum(s.connected for g in self._groups.values() for s in g.streams.values())

    @property
    def running_streams(self) -> int:
        """Stream tasks (connected, connecting or waiting to retry)."""
        return sum(len(g.streams) for g in self._groups.values())

    def mode(self, scope: scopes.Scope) -> tuple[str, str] | None:
        """The last ``(mode, reason)`` reported for ``scope``."""
        return self._modes.get(scope)

    def summaries(self) -> dict[str, list[StreamSummary]]:
        """Per identity key, each project's stream: its worst connection's state (Refused, then
        Reconnecting, Connecting, Open) and since when, its latest event, how many scopes it serves."""
        found: dict[str, list[StreamSummary]] = {}
        for group in self._groups.values():
            if not group.streams:
                continue
            worst = min(group.streams.values(), key=lambda s: _STATE_ORDER.index(s.state))
            since = worst.state_since or self._wall()
            if worst.state == OPEN:  # all are: since the latest connection came up
                since = max(s.state_since or since for s in group.streams.values())
            found.setdefault(group.identity_key, []).append(
                StreamSummary(
                    project_id=group.project_id,
                    state=worst.state,
                    message=worst.state_message,
                    since=since,
                    last_event_at=group.last_event_at,
                    scopes=len(group.scopes),
                )
            )
        return found

    def retry_now(self, identity_keys: Collection[str]) -> int:
        """The host of these identities answers again: streams of theirs waiting because it did
        not reconnect now instead of sleeping out their backoff. Returns how many were woken."""
        woken = 0
        for group in self._groups.values():
            if group.identity_key not in identity_keys:
                continue
            for stream in group.streams.values():
                if stream.waiting_for_host:
                    stream.waiting_for_host = False
                    stream.wake.set()
                    woken += 1
        return woken

    def registrations(self, identity_key: str, project_id: str) -> list[tuple[events.EventRegistration, ...]]:
        group = self._groups.get((identity_key, project_id))
        return [s.registrations for s in group.streams.values()] if group else []

    # --- changes ----------------------------------------------------------------------------------------

    async def update(self, identity_key: str, project_id: str, scope_set: set[scopes.Scope]) -> None:
        """Make the streams of (identity, project) serve exactly ``scope_set``.

        Streams whose registrations are unchanged keep running (no reconnect); others are stopped
        before new ones start (the service counts open streams). An empty set stops them all.
        Call it when the set changes, ideally once per batch (each plan change may reconnect).
        """
        async with self._lock:
            key = (identity_key, project_id)
            group = self._groups.get(key) or _Group(identity_key, project_id)
            plan = streamplan.plan_registrations(
                scope_set,
                max_registrations=self._max_registrations,
                max_streams=self._max_streams,
                events=self._event_kinds,
            )
            wanted = {frozenset(regs): index for index, regs in enumerate(plan.streams)}
            replaced = [group.streams.pop(k) for k in list(group.streams) if k not in wanted]
            new_count = sum(1 for k in wanted if k not in group.streams)
            # Room for the new ones while the replaced ones still count (they are popped already).
            overlap = (
                bool(replaced) and new_count > 0 and self._room(identity_key) - len(replaced) >= new_count
            )
            if not overlap:
                for old in replaced:
                    await self._stop(old)
            for gone in group.scopes - scope_set:
                self._modes.pop(gone, None)
            group.scopes = frozenset(scope_set)
            started: list[_Stream] = []
            for regs_key, index in wanted.items():
                members = plan.scopes_of(index)
                stream = group.streams.get(regs_key)
                if stream is None:
                    stream = _Stream(group, tuple(plan.streams[index]), members, state_since=self._wall())
                    group.streams[regs_key] = stream
                    stream.task = asyncio.create_task(self._run(stream), name=f"event-stream {project_id}")
                    started.append(stream)
                    continue
                added, stream.members = members - stream.members, members
                if stream.connected:
                    self._set_modes(added, STREAMING, "event stream connected")
                else:  # joining a stream that waits out a failure: its members' mode is theirs too
                    known = next((self._modes[m] for m in members - added if m in self._modes), None)
                    if known is not None and known[0] == POLLING:
                        self._set_modes(added, *known)
            reason = (
                f"more than {self._max_streams} event streams would be needed for this identity and project"
            )
            self._set_modes(plan.uncovered, POLLING, reason)
            if overlap:
                group.retiring.extend(replaced)
                task = asyncio.create_task(self._retire(group, replaced, started))
                self._retirements.add(task)
                task.add_done_callback(self._retirements.discard)
            if group.streams or group.scopes or group.retiring:
                self._groups[key] = group
            else:
                self._groups.pop(key, None)

    def _room(self, identity_key: str) -> int:
        """How many more streams this identity may open now: ``max_streams`` over all its
        groups' streams (retiring ones included), so an overlap never meets the service's cap
        where stopping first would not."""
        held = sum(
            len(g.streams) + len(g.retiring) for g in self._groups.values() if g.identity_key == identity_key
        )
        return self._max_streams - held

    async def _retire(self, group: _Group, old: list[_Stream], new: list[_Stream]) -> None:
        """Stop ``old`` once every stream in ``new`` has connected or failed once (at most
        ``_RETIRE_MAX_SECONDS``): until then ``old`` streams, so no event is missed meanwhile."""
        waits = [asyncio.ensure_future(s.first_attempt.wait()) for s in new]
        try:
            await asyncio.wait(waits, timeout=_RETIRE_MAX_SECONDS)
        finally:
            for waiting in waits:
                waiting.cancel()
            async with self._lock:
                for stream in old:
                    if stream in group.retiring:
                        group.retiring.remove(stream)
                        await self._stop(stream)
                key = (group.identity_key, group.project_id)
                if not (group.streams or group.scopes or group.retiring) and self._groups.get(key) is group:
                    del self._groups[key]

    async def close(self) -> None:
        for task in list(self._retirements):
            task.cancel()
        await asyncio.gather(*self._retirements, return_exceptions=True)
        async with self._lock:
            for group in self._groups.values():
                for stream in (*group.streams.values(), *group.retiring):
                    await self._stop(stream)
                group.retiring.clear()
            self._groups.clear()

    async def _stop(self, stream: _Stream) -> None:
        for task in (stream.task, stream.flush_task, stream.unknown_task):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        stream.connected = False

    # --- one stream -------------------------------------------------------------------------------------

    async def _run(self, stream: _Stream) -> None:
        """Forever: connect, consume, and wait as the way the last attempt ended says."""
        retry = backoff.Backoff(self._backoff_initial, self._backoff_max, clock=self._clock)
        auth_failures = 0
        while True:
            attempt = _Attempt()
            failure: BaseException | None = None
            try:
                await self._connect_once(stream, attempt)
            except Exception as exc:
                failure = exc
            finally:
                stream.connected = False
                stream.first_attempt.set()
            if attempt.healthy:
                retry.reset()
                auth_failures = 0
            if isinstance(failure, errors.AuthenticationError):
                auth_failures += 1
            delay = self._after(stream, attempt, failure, retry, first_auth_failure=auth_failures == 1)
            self.stats.reconnects += 1
            await self._wait(stream, delay, host_down=_host_not_answering(failure))

    @staticmethod
    async def _wait(stream: _Stream, delay: float, *, host_down: bool) -> None:
        """Sleep ``delay`` seconds, or less when ``retry_now`` wakes a stream whose host was down."""
        stream.wake.clear()
        stream.waiting_for_host = host_down
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await stream.wake.wait()
        finally:
            stream.waiting_for_host = False

    async def _connect_once(self, stream: _Stream, attempt: _Attempt) -> None:
        """One connection: returns when the server ends it or the watchdog fires; raises otherwise."""
        group = stream.group
        async with self._open_stream(group.identity_key, group.project_id, stream.registrations) as messages:
            attempt.connected = stream.connected = True
            self._set_state(stream, OPEN, "event stream connected")
            self.stats.connects += 1
            self._set_modes(stream.members, STREAMING, "event stream connected")
            self.stats.resyncs_after_reconnect += 1
            # What a retiring stream of the group still serves, connected, saw no gap: a
            # list of it is as fresh as it was (``update``'s overlap).
            covered = {m for old in group.retiring if old.connected for m in old.members}
            await self._resync(set(stream.members) - covered, RESYNC_RECONNECT)
            stream.first_attempt.set()
            iterator = aiter(messages)
            while True:
                watchdog = asyncio.timeout(self._watchdog_seconds)
                try:
                    async with watchdog:
                        message = await anext(iterator)
                except StopAsyncIteration:
                    logger.info(
                        "the service closed the event stream of project %s",
                        group.project_id,
                        extra=_fields(group),
                    )
                    return
                except TimeoutError:
                    if not watchdog.expired():
                        raise
                    attempt.watchdog = True
                    self.stats.watchdog_timeouts += 1
                    logger.warning(
                        "event stream of project %s silent for %.0f s; reconnecting",
                        group.project_id,
                        self._watchdog_seconds,
                        extra=_fields(group),
                    )
                    return
                attempt.healthy = True
                if isinstance(message, events.SecretEvent):
                    self._on_event(stream, message)
                else:
                    self.stats.heartbeats += 1

    def _after(
        self,
        stream: _Stream,
        attempt: _Attempt,
        failure: BaseException | None,
        retry: backoff.Backoff,
        *,
        first_auth_failure: bool,
    ) -> float:
        """Seconds to wait before the next connect; reports Polling when connecting failed."""
        if failure is None:
            # A healthy stream the service closed reconnects at once: still Open, as its mode
            # stays Streaming (a server that ends streams every few minutes must not flap it).
            if attempt.watchdog or not attempt.healthy:
                why = "silent too long" if attempt.watchdog else "closed by the service before any message"
                self._set_state(stream, RECONNECTING, f"event stream {why}; reconnecting")
            return retry.next_delay()
        name = type(failure).__name__
        self.stats.failures[name] += 1
        project = stream.group.project_id
        fields = _fields(stream.group)
        if isinstance(failure, errors.PlanNotSupported):
            self._refused(stream, "the service plan does not include event subscriptions")
            return self._retry_after_refusal
        if isinstance(failure, errors.PermissionDenied):
            self._refused(stream, "the identity lacks the Secret Events permission for these paths")
            return self._retry_after_refusal
        if isinstance(failure, errors.RouteNotFound):  # a server older than the stream (2024-10)
            self._refused(stream, "the server has no event stream (subscribe: route not found)")
            return self._retry_after_refusal
        if isinstance(failure, errors.ValidationError | errors.NotFound):
            self._refused(stream, f"the service refused the event subscription ({name})")
            return self._retry_after_refusal
        if isinstance(failure, errors.StreamLimitReached):
            self._set_state(stream, RECONNECTING, "the service refused: too many open event streams")
            self._set_modes(stream.members, POLLING, "the service refused: too many open event streams")
            delay = retry.next_delay(failure.retry_after)
            logger.warning(
                "event stream of project %s refused (stream limit); retry in %.0f s",
                project,
                delay,
                extra=fields,
            )
            return delay
        if isinstance(failure, errors.AuthenticationError):
            if first_auth_failure:  # an expired token: logs in and reconnects at once, still Open
                logger.info("event stream of project %s: %s; logging in again", project, name, extra=fields)
                retry.reset()
                return 0.0
            self._set_state(stream, RECONNECTING, f"cannot authenticate the event stream ({name})")
            delay = retry.next_delay()
            if not attempt.connected:
                self._set_modes(stream.members, POLLING, f"cannot authenticate the event stream ({name})")
            logger.warning(
                "event stream of project %s: %s again; retry in %.1f s", project, name, delay, extra=fields
            )
            return delay
        retry_after = failure.retry_after if isinstance(failure, errors.Unavailable) else None
        delay = retry.next_delay(retry_after)
        self._set_state(stream, RECONNECTING, f"event stream unavailable ({name})")
        if not attempt.connected:
            self._set_modes(stream.members, POLLING, f"event stream unavailable ({name})")
        if isinstance(failure, errors.ServiceError):
            logger.warning(
                "event stream of project %s failed: %s; retry in %.1f s",
                project,
                failure,
                delay,
                extra=fields,
            )
        else:
            logger.error(
                "event stream of project %s failed unexpectedly", project, exc_info=failure, extra=fields
            )
        return delay

    def _refused(self, stream: _Stream, reason: str) -> None:
        self._set_state(stream, REFUSED, reason)
        self._set_modes(stream.members, POLLING, reason)
        logger.warning(
            "event stream of project %s refused: %s; retrying in %.0f s",
            stream.group.project_id,
            reason,
            self._retry_after_refusal,
            extra=_fields(stream.group),
        )

    # --- events and resyncs -----------------------------------------------------------------------------

    def _set_state(self, stream: _Stream, state: str, message: str) -> None:
        """Record what the stream is doing; ``state_since`` moves only when the state does."""
        if stream.state != state or stream.state_since is None:
            stream.state_since = self._wall()
        stream.state, stream.state_message = state, message

    def _on_event(self, stream: _Stream, event: events.SecretEvent) -> None:
        self.stats.events[event.event_type] += 1
        stream.group.last_event_at = self._wall()
        if not event.items:
            self._unknown_scope(stream)
            return
        affected = streamplan.route(event, stream.members)
        if not affected:
            return
        stream.pending |= affected
        if stream.flush_task is None or stream.flush_task.done():
            stream.flush_task = asyncio.create_task(self._flush(stream))

    async def _flush(self, stream: _Stream) -> None:
        """Nudge at once (leading edge), then coalesce what a burst brings during the window.

        Why leading edge: waiting out the window first added its whole length to the latency of
        every single change, which is the common case."""
        while stream.pending:
            batch, stream.pending = stream.pending, set()
            await self._resync(batch, RESYNC_EVENT)
            await asyncio.sleep(self._debounce)

    def _unknown_scope(self, stream: _Stream) -> None:
        self.stats.unknown_scope_events += 1
        stream.unknown_pending = True
        if stream.unknown_task is None or stream.unknown_task.done():
            stream.unknown_task = asyncio.create_task(self._flush_unknown(stream))

    async def _flush_unknown(self, stream: _Stream) -> None:
        """Nudge every scope of the stream: at once, then at most once per interval."""
        loop = asyncio.get_running_loop()
        while stream.unknown_pending:
            if stream.last_unknown_nudge is not None:
                wait = stream.last_unknown_nudge + self._unknown_interval - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
            stream.unknown_pending = False
            stream.last_unknown_nudge = loop.time()
            await self._resync(set(stream.members), RESYNC_UNKNOWN)

    async def _resync(self, scope_set: set[scopes.Scope], reason: str) -> None:
        if not scope_set:
            return
        self.stats.resyncs[reason] += 1
        try:
            result = self._on_resync(scope_set, reason)
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.exception("on_resync failed (%s)", reason)

    def _set_modes(self, scope_set: set[scopes.Scope], mode: str, reason: str) -> None:
        for scope in scope_set:
            if self._modes.get(scope) == (mode, reason):
                continue
            self._modes[scope] = (mode, reason)
            try:
                self._on_mode(scope, mode, reason)
            except Exception:
                logger.exception("on_mode failed")


def _host_not_answering(failure: BaseException | None) -> bool:
    """Unavailable, but not a refusal with a ``retry-after`` (429) that must be honoured."""
    return isinstance(failure, errors.Unavailable) and not isinstance(failure, errors.RateLimited)


def _fields(group: _Group) -> dict[str, str]:
    """Structured log fields of a stream's lines: its identity, and its project as the scope (a
    stream serves every scope of one project; logfields)."""
    return {logfields.IDENTITY: group.identity_key, logfields.SCOPE: group.project_id}

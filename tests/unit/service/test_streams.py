"""StreamManager against fake streams (async queues), on virtual loop time (``looptime``).

Every wait (watchdog, debounce, backoff, refusal) costs no wall time, and the fakes record the loop
time of each connect, close and resync, so delays are asserted exactly; only jittered backoff is
asserted against its ceiling.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence

import pytest

from secretferry import logfields
from secretferry.service import errors, events, scopes, streams

pytestmark = pytest.mark.looptime

Message = events.StreamMessage | BaseException | None


def S(env: str, path: str = "/", recursive: bool = False, imports: bool = True) -> scopes.Scope:
    return scopes.Scope("id", "p-1", env, path, recursive=recursive, include_imports=imports)


class Conn:
    def __init__(self, registrations: Sequence[events.EventRegistration]) -> None:
        self.registrations = tuple(registrations)
        self.queue: asyncio.Queue[Message] = asyncio.Queue()
        self.closed = False
        self.opened_at = asyncio.get_running_loop().time()
        self.closed_at: float | None = None

    async def messages(self) -> AsyncIterator[events.StreamMessage]:
        while True:
            item = await self.queue.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def send(self, message: Message) -> None:
        self.queue.put_nowait(message)


class FakeService:
    def __init__(self) -> None:
        self.attempts = 0
        self.attempted_at: list[float] = []  # loop time of each connect attempt
        self.refusals: list[BaseException] = []
        self.conns: list[Conn] = []

    @property
    def open(self) -> list[Conn]:
        return [c for c in self.conns if not c.closed]

    @contextlib.asynccontextmanager
    async def open_stream(
        self, identity: str, project: str, registrations: Sequence[events.EventRegistration]
    ) -> AsyncIterator[AsyncIterator[events.StreamMessage]]:
        self.attempts += 1
        self.attempted_at.append(asyncio.get_running_loop().time())
        if self.refusals:
            raise self.refusals.pop(0)
        conn = Conn(registrations)
        self.conns.append(conn)
        try:
            yield conn.messages()
        finally:
            conn.closed = True
            conn.closed_at = asyncio.get_running_loop().time()


class Recorder:
    def __init__(self) -> None:
        self.resyncs: list[tuple[frozenset[scopes.Scope], str]] = []
        self.resynced_at: list[tuple[str, float]] = []  # (reason, loop time) of each resync
        self.modes: list[tuple[scopes.Scope, str, str]] = []

    async def on_resync(self, scope_set: set[scopes.Scope], reason: str) -> None:
        self.resyncs.append((frozenset(scope_set), reason))
        self.resynced_at.append((reason, asyncio.get_running_loop().time()))

    def on_mode(self, scope: scopes.Scope, mode: str, reason: str) -> None:
        self.modes.append((scope, mode, reason))

    def reasons(self, reason: str) -> list[frozenset[scopes.Scope]]:
        return [s for s, r in self.resyncs if r == reason]

    def times(self, reason: str) -> list[float]:
        return [t for r, t in self.resynced_at if r == reason]

    def mode_of(self, scope: scopes.Scope) -> str | None:
        found = [m for s, m, _ in self.modes if s == scope]
        return found[-1] if found else None


async def until(condition: Callable[[], bool], within: float = 2.0) -> None:
    """Poll a condition on fake-service state (nothing to wait on: the fakes have no events).

    Loop time: ``within`` bounds the behaviour, not the machine; the polling step costs no wall time.
    """
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


@pytest.fixture
def service() -> FakeService:
    return FakeService()


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
async def manager(service: FakeService, rec: Recorder) -> AsyncIterator[streams.StreamManager]:
    """Watchdog 0.15 s (3 heartbeats of 0.05 s), debounce 0.05 s, backoff 0.01 s up to 0.05 s."""
    m = streams.StreamManager(
        open_stream=service.open_stream,
        on_resync=rec.on_resync,
        on_mode=rec.on_mode,
        heartbeat_seconds=0.05,
        watchdog_heartbeats=3,
        debounce_seconds=0.05,
        backoff_initial=0.01,
        backoff_max=0.05,
        retry_after_refusal_seconds=60.0,
        clock=asyncio.get_running_loop().time,
    )
    yield m
    await m.close()


A, B = S("dev", "/a"), S("dev", "/b", recursive=True)


async def test_resync_on_connect_and_reconnect(
    manager: streams.StreamManager, service: FakeService, rec: Recorder
) -> None:
    await manager.update("id", "p-1", {A, B})
    await until(lambda: len(rec.reasons("reconnect")) == 1)
    assert rec.reasons("reconnect") == [frozenset({A, B})]
    assert rec.mode_of(A) == rec.mode_of(B) == "Streaming"
    assert manager.open_streams == 1
    service.open[0].send(None)  # the server closes the stream
    await until(lambda: len(rec.reasons("reconnect")) == 2)
    assert service.attempts == 2 and manager.stats.connects == 2
    assert [m for _, m, _ in rec.modes] == ["Streaming", "Streaming"]  # no flapping


async def test_watchdog_replaces_a_silent_stream(
    manager: streams.StreamManager, service: FakeService, caplog: pytest.LogCaptureFixture
) -> None:
    await manager.update("id", "p-1", {A})
    await until(lambda: service.attempts == 2)
    silent = [r for r in caplog.records if "silent" in r.getMessage()]
    assert silent and all(
        (getattr(r, logfields.IDENTITY), getattr(r, logfields.SCOPE)) == ("id", "p-1") for r in silent
    )
    first = service.conns[0]
    assert first.closed_at is not None and first.closed_at - first.opened_at == pytest.approx(0.15)
    assert manager.stats.watchdog_timeouts == 1
    assert 0 <= service.attempted_at[1] - first.closed_at <= 0.01  # the backoff's first ceiling


async def test_heartbeats_keep_a_stream_alive(manager: streams.StreamManager, service: FakeService) -> None:
    await manager.update("id", "p-1", {A})
    await until(lambda: len(service.open) == 1)
    for _ in range(15):  # 0.3 s: twice the 0.15 s watchdog
        service.open[0].send(events.Heartbeat())
        await asyncio.sleep(0.02)
    assert service.attempts == 1 and manager.stats.watchdog_timeouts == 0
    assert manager.stats.heartbeats == 15


async def test_event_burst_is_one_resync(
    manager: streams.StreamManager, service: FakeService, rec: Recorder
) -> None:
    other = S("dev", "/c")
    await manager.update("id", "p-1", {A, B, other})
    await until(lambda: len(service.open) == 1)
    conn = service.open[0]
    for i in range(50):
        path = "/a" if i % 2 else f"/b/x{i}"
        conn.send(events.SecretEvent(events.SECRET_UPDATE, (events.EventItem("dev", path, f"K{i}"),)))
    conn.send(events.SecretEvent(events.SECRET_UPDATE, (events.EventItem("dev", "/unrelated", "K"),)))
    await until(lambda: manager.stats.events[events.SECRET_UPDATE] == 51)
    await asyncio.sleep(0.14)  # ~three debounce windows, inside the watchdog: nothing more may come
    assert rec.reasons("event") == [frozenset({A, B})]  # one nudge, never the unrelated scope


async def test_a_lone_event_does_not_wait_for_the_debounce_window(
    service: FakeService, rec: Recorder
) -> None:
    loop = asyncio.get_running_loop()
    manager = streams.StreamManager(
        open_stream=service.open_stream, on_resync=rec.on_resync, on_mode=rec.on_mode, debounce_seconds=3.0
    )
    change = events.SecretEvent(events.SECRET_UPDATE, (events.EventItem("dev", "/a", "K"),))
    try:
        await manager.update("id", "p-1", {A})
        await until(lambda: len(service.open) == 1)
        sent = loop.time()
        service.open[0].send(change)
        await until(lambda: len(rec.reasons("event")) == 1)
        assert rec.reasons("event") == [frozenset({A})]
        assert rec.times("event") == [sent]  # at once, not at the end of the window
        # A second event inside the window waits for its end (coalesced), and is not lost:
        await asyncio.sleep(0.1)
        service.open[0].send(change)
        await asyncio.sleep(2.8)
        assert len(rec.reasons("event")) == 1
        await asyncio.sleep(0.2)
        assert rec.times("event") == [sent, pytest.approx(sent + 3.0)]
    finally:
        await manager.close()


@pytest.mark.parametrize(
    "refusal",
    [
        errors.PlanNotSupported("plan", status_code=400),
        errors.PermissionDenied("no Secret Events", details=[{"x": 1}]),
        # A server older than the stream (self-hosted 2024-10): the subscribe route is Fastify's 404.
        errors.RouteNotFound("Route POST:/api/v1/events/subscribe/project-events not found", status_code=404),
    ],
)
async def test_refusal_switches_to_polling_and_waits(
    manager: streams.StreamManager, service: FakeService, rec: Recorder, refusal: errors.ServiceError
) -> None:
    service.refusals = [refusal]
    await manager.update("id", "p-1", {A})
    await until(lambda: rec.mode_of(A) == "Polling")
    if isinstance(refusal, errors.RouteNotFound):
        assert rec.modes[-1][2] == "the server has no event stream (subscribe: route not found)"
    await asyncio.sleep(59.9)
    assert service.attempts == 1  # retried only after retry_after_refusal_seconds
    assert rec.resyncs == []
    await asyncio.sleep(0.2)
    assert service.attempted_at[1] - service.attempted_at[0] == pytest.approx(60.0)
    assert rec.mode_of(A) == "Streaming"


async def test_stream_limit_backs_off_then_streams(
    manager: streams.StreamManager, service: FakeService, rec: Recorder
) -> None:
    service.refusals = [errors.StreamLimitReached("too many", retry_after=0.05)]
    await manager.update("id", "p-1", {A})
    await until(lambda: rec.mode_of(A) == "Streaming")
    assert [m for _, m, _ in rec.modes] == ["Polling", "Streaming"]
    assert service.attempts == 2
    # the retry-after (0.05 s) is longer than the backoff's first ceiling (0.01 s): it wins
    assert service.attempted_at[1] - service.attempted_at[0] == pytest.approx(0.05)


async def test_unavailable_backs_off_and_recovers(
    manager: streams.StreamManager, service: FakeService, rec: Recorder
) -> None:
    service.refusals = [errors.Unavailable("down"), errors.Unavailable("down"), OSError("boom")]
    await manager.update("id", "p-1", {A})
    await until(lambda: rec.mode_of(A) == "Streaming")
    assert service.attempts == 4
    assert manager.stats.failures == {"Unavailable": 2, "OSError": 1}
    waits = [b - a for a, b in zip(service.attempted_at, service.attempted_at[1:], strict=False)]
    assert all(0 <= w <= ceiling for w, ceiling in zip(waits, [0.01, 0.02, 0.04], strict=True))  # jittered


async def test_auth_failure_reconnects_at_once_then_backs_off(service: FakeService, rec: Recorder) -> None:
    loop = asyncio.get_running_loop()
    manager = streams.StreamManager(
        open_stream=service.open_stream,
        on_resync=rec.on_resync,
        on_mode=rec.on_mode,
        backoff_initial=0.8,
        backoff_max=0.8,
        clock=loop.time,
    )
    try:
        await manager.update("id", "p-1", {A})
        await until(lambda: len(service.open) == 1)
        failed = loop.time()
        service.open[0].send(errors.StreamError("token re-check failed"))
        await until(lambda: service.attempts == 2)
        assert service.attempted_at[1] == failed  # at once, despite the backoff
        assert rec.mode_of(A) == "Streaming"
        service.refusals = [errors.AuthenticationError("bad"), errors.AuthenticationError("bad")]
        service.open[0].send(events.Heartbeat())  # healthy again: the next auth failure is a first one
        await asyncio.sleep(0.01)
        failed = loop.time()
        service.open[0].send(errors.StreamError("again"))
        await until(lambda: service.attempts == 4)
        assert service.attempted_at[2] == failed  # a first failure again: at once
        assert 0 <= service.attempted_at[3] - failed <= 0.8  # a repeated one backs off (jittered)
        assert rec.mode_of(A) == "Polling"
    finally:
        await manager.close()


async def test_never_more_than_five_streams(
    manager: streams.StreamManager, service: FakeService, rec: Recorder
) -> None:
    envs = ["dev", "prod", "stg", "qa", "e5", "e6", "e7", "e8", "e9", "e10", "e11"]
    scope_set = {S(envs[i % len(envs)], f"/svc{i}") for i in range(20)}
    await manager.update("id", "p-1", scope_set)
    await until(lambda: len(service.open) == 5)
    await asyncio.sleep(0.05)
    assert manager.running_streams == 5 and len(service.open) == 5 and service.attempts == 5
    assert all(len(c.registrations) <= 10 for c in service.open)
    # Environments that do not get a stream of their own share a project-wide catch-all: none polls.
    assert all(rec.mode_of(s) == "Streaming" for s in scope_set)
    catch_all = [c for c in service.open if all(r.environment_slug is None for r in c.registrations)]
    assert len(catch_all) == 1


async def test_unchanged_plan_does_not_reconnect(
    manager: streams.StreamManager, service: FakeService, rec: Recorder
) -> None:
    root = S("dev", "/", recursive=True)
    await manager.update("id", "p-1", {root})
    await until(lambda: len(service.open) == 1)
    await manager.update("id", "p-1", {root})
    inside = S("dev", "/deep/x")  # served by the same "/**" registrations
    await manager.update("id", "p-1", {root, inside})
    await asyncio.sleep(0.05)
    assert service.attempts == 1 and len(service.open) == 1
    assert rec.mode_of(inside) == "Streaming"


async def test_changed_plan_restarts_only_what_changed(
    manager: streams.StreamManager, service: FakeService
) -> None:
    dev, prod, stg = S("dev", "/a"), S("prod", "/a"), S("stg", "/a")
    await manager.update("id", "p-1", {dev, prod, stg})
    await until(lambda: len(service.open) == 2)
    keep = [c for c in service.open if {r.environment_slug for r in c.registrations} == {"dev", "prod"}]
    await manager.update("id", "p-1", {dev, prod, S("stg", "/b")})  # only the stg stream changes
    await until(lambda: service.attempts == 3)
    await asyncio.sleep(0.02)
    assert len(service.open) == 2 and keep[0] in service.open and service.attempts == 3


async def test_empty_update_stops_streams(manager: streams.StreamManager, service: FakeService) -> None:
    await manager.update("id", "p-1", {A})
    await until(lambda: len(service.open) == 1)
    await manager.update("id", "p-1", set())
    assert service.open == [] and manager.running_streams == 0 and manager.open_streams == 0
    assert manager.mode(A) is None


async def test_close_stops_everything(manager: streams.StreamManager, service: FakeService) -> None:
    await manager.update("id", "p-1", {A})
    await manager.update("id", "p-2", {S("dev")})
    await until(lambda: len(service.open) == 2)
    await manager.close()
    assert service.open == [] and manager.running_streams == 0


async def test_failing_callbacks_do_not_kill_the_stream(service: FakeService) -> None:
    calls: list[str] = []

    def on_resync(scope_set: set[scopes.Scope], reason: str) -> None:
        calls.append(reason)
        raise RuntimeError("callback bug")

    manager = streams.StreamManager(
        open_stream=service.open_stream, on_resync=on_resync, on_mode=lambda *a: None, debounce_seconds=0.01
    )
    try:
        await manager.update("id", "p-1", {A})
        await until(lambda: len(service.open) == 1)
        service.open[0].send(events.SecretEvent(events.SECRET_CREATE, (events.EventItem("dev", "/a", "K"),)))
        await until(lambda: calls == ["reconnect", "event"])
        assert len(service.open) == 1
    finally:
        await manager.close()


async def test_retry_now_wakes_streams_waiting_for_their_host(service: FakeService, rec: Recorder) -> None:
    manager = streams.StreamManager(
        open_stream=service.open_stream,
        on_resync=rec.on_resync,
        on_mode=rec.on_mode,
        backoff_initial=3600.0,  # without retry_now the test would wait an hour
        backoff_max=3600.0,
    )
    try:
        service.refusals = [errors.Unavailable("down")]
        await manager.update("id", "p-1", {A})
        await until(lambda: rec.mode_of(A) == "Polling")
        assert manager.retry_now({"other-identity"}) == 0
        assert manager.retry_now({"id"}) == 1
        await until(lambda: rec.mode_of(A) == "Streaming")
        assert service.attempts == 2
    finally:
        await manager.close()


async def test_retry_now_leaves_a_stream_limit_alone(service: FakeService, rec: Recorder) -> None:
    manager = streams.StreamManager(
        open_stream=service.open_stream, on_resync=rec.on_resync, on_mode=rec.on_mode
    )
    try:
        service.refusals = [errors.StreamLimitReached("too many", retry_after=3600)]
        await manager.update("id", "p-1", {A})
        await until(lambda: rec.mode_of(A) == "Polling")
        assert manager.retry_now({"id"}) == 0  # its retry-after holds
    finally:
        await manager.close()


UNKNOWN = events.SecretEvent(events.UNKNOWN_CHANGE)


@pytest.mark.looptime
async def test_a_message_not_understood_nudges_every_scope_at_once_then_at_most_once_per_interval(
    manager: streams.StreamManager, service: FakeService, rec: Recorder
) -> None:
    loop = asyncio.get_running_loop()
    await manager.update("id", "p-1", {A, B})
    await until(lambda: len(service.open) == 1)
    start = loop.time()
    service.open[0].send(UNKNOWN)
    await until(lambda: len(rec.reasons("unknown")) == 1)
    assert rec.reasons("unknown") == [frozenset({A, B})]
    assert rec.times("unknown") == [start]  # the first one is not delayed
    for _ in range(3):  # a burst: one more nudge, after the interval, not three
        service.open[0].send(UNKNOWN)
    await asyncio.sleep(4.0)
    assert len(rec.reasons("unknown")) == 1
    await asyncio.sleep(1.5)
    assert len(rec.reasons("unknown")) == 2
    await asyncio.sleep(30)
    assert len(rec.reasons("unknown")) == 2
    assert manager.stats.unknown_scope_events == 4
    assert manager.stats.events[events.UNKNOWN_CHANGE] == 4


@pytest.mark.looptime
async def test_a_known_event_without_a_location_is_an_unknown_scope_too(
    manager: streams.StreamManager, service: FakeService, rec: Recorder
) -> None:
    await manager.update("id", "p-1", {A, B})
    await until(lambda: len(service.open) == 1)
    service.open[0].send(events.SecretEvent(events.SECRET_UPDATE))
    await until(lambda: len(rec.reasons("unknown")) == 1)
    assert rec.reasons("unknown") == [frozenset({A, B})] and not rec.reasons("event")


@pytest.mark.looptime
async def test_an_event_nudges_only_the_scopes_of_its_own_stream(
    manager: streams.StreamManager, service: FakeService, rec: Recorder
) -> None:
    # Eleven environments: four streams of their own and a catch-all that sees every change. A
    # change in a covered environment arrives on both; only its own stream nudges.
    envs = [f"e{i:02d}" for i in range(11)]
    scope_set = {S(env, f"/svc{i}") for env in envs for i in range(3)}
    await manager.update("id", "p-1", scope_set)
    await until(lambda: len(service.open) == 5)
    await until(lambda: len(rec.reasons("reconnect")) == 5)
    change = events.SecretEvent(events.SECRET_UPDATE, (events.EventItem("e00", "/svc1", "K"),))
    for conn in service.open:
        conn.send(change)
    await asyncio.sleep(1)
    assert rec.reasons("event") == [frozenset({S("e00", "/svc1")})]


async def test_a_scope_joining_a_refused_stream_is_polling_too(
    manager: streams.StreamManager, service: FakeService, rec: Recorder
) -> None:
    """Issue 21: on a server without the event route, a SecretSync whose scope joined the stream
    after it was refused (same registrations: only a filter differs) never showed updateMode."""
    service.refusals = [errors.RouteNotFound("Route POST:/x not found", status_code=404)]
    await manager.update("id", "p-1", {A})
    await until(lambda: rec.mode_of(A) == "Polling")
    filtered = dataclasses.replace(A, tag_slugs=("db",))
    await manager.update("id", "p-1", {A, filtered})
    assert service.attempts == 1  # same registrations: the waiting stream serves it, no reconnect
    assert rec.mode_of(filtered) == "Polling"
    assert rec.modes[-1][1:] == ("Polling", "the server has no event stream (subscribe: route not found)")


async def test_a_replan_opens_the_new_stream_before_it_stops_the_old(
    manager: streams.StreamManager, service: FakeService, rec: Recorder
) -> None:
    """No gap: the scopes the old stream served are not resynced at the new one's connect; only
    the scope it did not serve (before: every scope of the group, a list each)."""
    await manager.update("id", "p-1", {A})
    await until(lambda: len(service.open) == 1)
    old = service.conns[0]
    rec.resyncs.clear()
    C = S("dev", "/c")
    await manager.update("id", "p-1", {A, C})  # new registrations: a new stream replaces the old
    await until(lambda: service.attempts == 2 and old.closed)
    new = service.conns[1]
    assert old.closed_at is not None and new.opened_at <= old.closed_at  # overlapping, not a gap
    assert service.open == [new] and manager.running_streams == 1
    assert rec.reasons("reconnect") == [frozenset({C})]
    assert rec.mode_of(A) == "Streaming" and rec.mode_of(C) == "Streaming"


async def test_a_replan_without_room_stops_first_and_resyncs_everything(
    service: FakeService, rec: Recorder
) -> None:
    """An identity at its stream cap gets no second stream for the overlap: stop, then start."""
    manager = streams.StreamManager(
        open_stream=service.open_stream,
        on_resync=rec.on_resync,
        on_mode=rec.on_mode,
        max_streams=1,
        clock=asyncio.get_running_loop().time,
    )
    try:
        await manager.update("id", "p-1", {A})
        await until(lambda: len(service.open) == 1)
        old = service.conns[0]
        rec.resyncs.clear()
        C = S("dev", "/c")
        await manager.update("id", "p-1", {A, C})
        assert old.closed  # stopped before the new one started
        await until(lambda: service.attempts == 2 and len(service.open) == 1)
        assert rec.reasons("reconnect") == [frozenset({A, C})]
    finally:
        await manager.close()

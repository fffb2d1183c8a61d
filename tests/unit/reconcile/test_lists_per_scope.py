"""One list call per scope per cycle, with the fair queue, the scope index, the fetcher and the
event streams wired as the controller wires them, on virtual loop time (``looptime``).

What broke it (streaming.py, ``on_resync``): a pass binds a new scope (which opens or replans its
stream) and lists it at once; the stream's connect then made every list stale, also those sent
after its subscribe, so scopes were listed twice. Now only a list sent before the subscribe is
stale (what changed before the stream was open was not streamed): listed once more, and only
those. The work below does what a reconcile
does with its scope (sync.py): bind, report the change, fetch no older than ``fresh_after``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import pytest
from reconcile_fakes import FakeKube

from secretferry import settings as settings_mod
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import scheduler, state, streaming, tasks
from secretferry.service import events, fetcher, models, scopes

pytestmark = pytest.mark.looptime

T = TypeVar("T")

WORKERS = 8
NAMESPACES = 5
SYNCS = 200  # SecretSync i is in namespace i % NAMESPACES and reads scope i % SCOPES
SCOPES = 20
LIST_SECONDS = 0.05  # one list call's round trip
CONNECT_SECONDS = 0.1  # a stream's subscribe round trip


class FakeService:
    """The identity's session: list calls that take a while, and streams that stay open (with a
    heartbeat) until ``drop`` ends those open; counts list calls."""

    api_root = "http://127.0.0.1:9/api"

    def __init__(self) -> None:
        self.lists = 0
        self.list_times: list[float] = []  # when each list call went out (loop time)
        self.subscribe_times: list[float] = []
        self.generation = 0  # streams opened in an earlier generation end
        self.login_seconds = 0.0  # what the stream opener's login takes (list calls skip it here)

    async def token(self) -> str:
        await asyncio.sleep(self.login_seconds)
        return "t"

    async def call(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        del fn  # answered here: an empty folder
        self.lists += 1
        self.list_times.append(asyncio.get_running_loop().time())
        await asyncio.sleep(LIST_SECONDS)
        return models.SecretList(secrets=[])  # type: ignore[return-value]

    @contextlib.asynccontextmanager
    async def subscribe(
        self, project_id: str, register: Sequence[events.EventRegistration]
    ) -> AsyncIterator[AsyncIterator[events.StreamMessage]]:
        del project_id, register
        self.subscribe_times.append(asyncio.get_running_loop().time())
        await asyncio.sleep(CONNECT_SECONDS)
        yield self._messages()

    def drop(self) -> None:
        self.generation += 1

    async def _messages(self) -> AsyncIterator[events.StreamMessage]:
        generation = self.generation
        while True:
            await asyncio.sleep(1.0)  # a heartbeat period
            if self.generation != generation:
                return
            yield events.Heartbeat()


def _identity() -> dict[str, Any]:
    return {
        "metadata": {"name": "id", "namespace": "ns-0", "uid": "uid-id", "generation": 1},
        "spec": {"auth": {"accessToken": {"secretRef": {"name": "tok", "key": "token"}}}},
    }


class Operator:
    """The queue, the scope index, the fetcher and the streams; ``start`` queues every SecretSync
    as the start-up list does (namespace by namespace) and waits until all were reconciled."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.clock = loop.time
        cfg = settings_mod.Settings()
        registry = ident_mod.IdentityRegistry(kube=FakeKube().port(), settings=cfg)
        entry = registry.upsert(ident_mod.MACHINE, _identity())
        self.service = FakeService()
        entry.session = self.service  # type: ignore[assignment]
        self.index = state.ScopeIndex(jitter_fraction=0)
        self.fetcher = fetcher.ScopeFetcher(clock=self.clock)
        self.queue: scheduler.Scheduler[state.SyncKey] = scheduler.Scheduler(
            self._work, workers=WORKERS, tenant=lambda key: key[0], clock=self.clock
        )
        self.streaming = streaming.Streaming(
            settings=cfg,
            identities=registry,
            scopes=self.index,
            fetcher=self.fetcher,
            queue=self.queue,
            background=tasks.Tasks(),
            clock=self.clock,
        )
        identity_key = ident_mod.key_str(entry.key)
        self.scope_of = {
            (f"ns-{i % NAMESPACES}", f"sync-{i:04d}"): scopes.Scope(
                identity_key, "p", "dev", f"/app/s{i % SCOPES:02d}"
            )
            for i in range(SYNCS)
        }

    async def _work(self, key: state.SyncKey) -> None:
        scope = self.scope_of[key]
        added, removed = self.index.bind(key, [scope], instant=True, refresh_seconds=300, now=self.clock())
        if added or removed:
            self.streaming.scopes_changed(added, removed)
        await self.streaming.until_decided(scope)  # as sync.py: a new scope's list after its subscribe
        scope_state = self.index.get(scope)
        assert scope_state is not None
        await self.fetcher.fetch(scope, self.service, not_older_than=scope_state.fresh_after)  # type: ignore[arg-type]
        await asyncio.sleep(0.01)  # the Secret write

    async def start(self) -> None:
        self.queue.start()
        for key in sorted(self.scope_of):  # the start-up list's order: namespace, then name
            self.queue.enqueue(key, live=False, first=True)
        await self.settle()

    async def settle(self) -> None:
        await asyncio.sleep(1.0)  # the streams connect and their resyncs are queued
        await self.queue.idle()

    async def stop(self) -> None:
        await self.streaming.manager.close()
        await self.queue.stop()


@pytest.fixture
async def operator() -> AsyncIterator[Operator]:
    op = Operator()
    yield op
    await op.stop()


def _first_lists_before_the_subscribe(service: FakeService) -> int:
    """First lists (one per scope) that went out before the stream's first subscribe: only those
    may have missed a change, so only those are listed again at the connect."""
    subscribed = service.subscribe_times[0]
    return sum(1 for t in service.list_times[:SCOPES] if t < subscribed)


async def test_a_start_up_lists_again_only_what_was_listed_before_the_stream_subscribed(
    operator: Operator,
) -> None:
    await operator.start()

    assert operator.streaming.manager.open_streams == 1
    early = _first_lists_before_the_subscribe(operator.service)  # here none: the fake subscribes at once
    # Before the fix every list was stale at the connect: scopes listed after the subscribe twice.
    assert operator.service.lists == SCOPES + early


async def test_a_start_up_lists_each_scope_once_when_the_subscribe_takes_a_moment(
    operator: Operator,
) -> None:
    """The real stream's opener takes a moment (its login, its task) while the first pass's list
    is already on the wire: that list was sent before the subscribe, made stale by the connect
    and sent again (10 scopes: 11 lists at start-up). Now a new scope's first list waits for its
    stream's subscribe (``Streaming.until_decided``): one list per scope."""
    operator.service.login_seconds = 0.01
    await operator.start()

    assert operator.streaming.manager.open_streams == 1
    assert _first_lists_before_the_subscribe(operator.service) == 0
    assert operator.service.lists == SCOPES  # before: SCOPES + the scopes listed before the subscribe


async def test_a_live_secretsync_before_the_backlog_costs_no_second_list(operator: Operator) -> None:
    """bench_operator_scale's start-up: a SecretSync created right after start is live work, so
    it binds scope 0 and its stream first; the backlog's scopes then replan that stream. The
    replacement connects before the old stream stops (service.streams), so scope 0 saw no gap
    and is not listed again: one list per scope (before: 11 for 10)."""
    operator.service.login_seconds = 0.01
    operator.queue.start()
    first = next(k for k in sorted(operator.scope_of) if operator.scope_of[k].path.endswith("s00"))
    operator.queue.enqueue(first, live=True)
    await operator.settle()
    assert operator.service.lists == 1
    for key in sorted(operator.scope_of):
        operator.queue.enqueue(key, live=False, first=True)
    await operator.settle()

    assert len(operator.service.subscribe_times) >= 2  # the replan reconnected
    assert operator.streaming.manager.open_streams == 1
    assert operator.service.lists == SCOPES


async def test_a_reconnect_later_still_makes_every_scope_of_the_stream_stale(operator: Operator) -> None:
    await operator.start()
    first = operator.service.lists

    operator.service.drop()  # the service ends the stream; it reconnects (after a backoff)
    await asyncio.sleep(settings_mod.Settings().backoff_initial_seconds + 1.0)
    await operator.settle()

    # What changed while no stream was open is seen: every scope listed once more, once.
    assert operator.service.lists == first + SCOPES


async def test_a_stream_that_subscribes_long_after_its_scopes_were_listed_has_them_listed_again(
    operator: Operator,
) -> None:
    """A stream slower than a first list waits (3 s against 2 s): the scopes listed before its
    subscribe are listed again at its connect, and only those (the later ones waited for it)."""
    operator.service.login_seconds = 3.0
    await operator.start()
    await asyncio.sleep(operator.service.login_seconds)  # the stream connects
    await operator.settle()

    assert operator.streaming.manager.open_streams == 1
    subscribed = operator.service.subscribe_times[0]
    early = sum(1 for t in operator.service.list_times if t < subscribed)
    assert 0 < early < SCOPES  # the first workers' scopes gave up waiting; the rest waited
    assert operator.service.lists == SCOPES + early

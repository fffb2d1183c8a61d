"""Our own work queue for SecretSync reconciles.

Why not kopf's per-object handlers: at 10,000 objects they cost a finalizer patch, several tasks
and a timer per object, and a new object waits behind the whole start-up storm (docs/architecture.md,
"Scale decisions"). This queue is one set of keys with two priorities:

* ``live`` — a user created/edited a SecretSync, a managed Secret drifted, an event arrived;
* ``backlog`` — the start-up list and periodic resyncs; within it, ``first`` keys (start-up
  objects never synced, or changed since) run before the rest and are not held back by
  ``start(backlog=False)``: nothing of theirs is in any cache worth waiting for.

A key is queued at most once (a live request promotes a queued backlog key), a bounded pool of
workers drains live work first, and delayed retries sit in a heap until due. A key is never
reconciled by two workers at once: a request that arrives while it runs marks it dirty and it
runs again right after.

:meth:`Scheduler.step_aside` lets a running job wait until the live work around it is done,
handing its worker slot to a stand-in meanwhile. Reconciles use it for the status patch that
follows a routine Secret write: one event nudging 50 SecretSyncs then costs 50 writes first and
50 status patches after, instead of the two interleaved (measured: median change → Secret 93 →
80 ms; without the stand-in the waiting jobs would starve the live work they wait for).

Fair slots (fairness.py): each key belongs to a tenant (its namespace). Within each priority the
tenants take turns, and no tenant starts more jobs than its share of the workers while others
have work queued; a capped tenant's keys stay queued and the workers serve the others.

:meth:`Scheduler.off_slot` lets a running job wait for something slow that is not ours to hurry
— a template worker, which one namespace's bombs can keep busy for minutes — without holding a
worker: a stand-in takes the slot, and the job takes a slot back (ahead of queued keys: it is
half done) before it goes on. Measured with 40 bomb SecretSyncs re-applied every 6 s: before,
they held all 32 slots waiting for their namespace's template worker, and a template-free
change in another namespace took p50 9.5 s; with both, 11 ms, p99 47 ms
(bench/bench_template_bomb.py --reapply-bombs 40).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Generic, TypeVar

from secretferry import metrics
from secretferry.reconcile.rendering import fairness

K = TypeVar("K", bound=Hashable)
log = logging.getLogger(__name__)


_DUE_TOLERANCE_SECONDS = 1e-6


@dataclass
class _Run:
    """The job a worker task is running (visible to the job through a context variable)."""

    live: bool
    tenant: str
    aside: bool = False
    off_slot: bool = False


ASIDE_PER_WORKER = 4
"""A burst of one event is often a few times the worker count (50 SecretSyncs on a scope, 32
workers): all of it should be able to step aside."""

_RUN: ContextVar[_Run | None] = ContextVar("secretferry_scheduler_run", default=None)


class Scheduler(Generic[K]):
    def __init__(
        self,
        work: Callable[[K], Awaitable[None]],
        *,
        workers: int,
        tenant: Callable[[K], str] = lambda _key: "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._work = work
        self._workers = workers
        self._tenant = tenant
        self._clock = clock
        self._live: fairness.RoundRobin[K] = fairness.RoundRobin()
        self._backlog: fairness.RoundRobin[K] = fairness.RoundRobin()
        self._first: fairness.RoundRobin[K] = fairness.RoundRobin()
        self._shares = fairness.Shares(workers)
        self._slot_wanted: deque[asyncio.Future[None]] = deque()  # jobs back from off_slot
        self._idle_workers = 0
        self._queued: dict[K, bool] = {}  # key -> is live
        self._live_queued = 0  # how many values of _queued are True
        self._live_active = 0  # live jobs running that have not stepped aside
        self._live_done = asyncio.Event()  # set while both counts are 0
        self._live_done.set()
        self._aside = 0  # jobs that stepped aside and are still running
        self._running: set[K] = set()
        self._dirty: dict[K, bool] = {}  # requested while running -> live?
        self._delayed: list[tuple[float, int, K]] = []
        self._delayed_due: dict[K, float] = {}
        self._seq = 0
        self._stopped = False
        self._wakeup = asyncio.Event()
        self._timer_wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._backlog_open = True
        self.completed = 0

    # --- requests ---------------------------------------------------------------------------
    def enqueue(self, key: K, *, live: bool = True, first: bool = False) -> None:
        """Ask for ``key`` to be reconciled soon; a duplicate request is free. ``first``: backlog
        work that goes ahead of the rest of the backlog (see the module docstring)."""
        self._delayed_due.pop(key, None)  # an explicit request supersedes a pending retry
        if key in self._running:
            self._dirty[key] = self._dirty.get(key, False) or live
            return
        queued_live = self._queued.get(key)
        tenant = self._tenant(key)
        if queued_live is None:
            self._queued[key] = live
            self._live_queued += live
            self._shares.queued(tenant, live=live)
            (self._live if live else self._first if first else self._backlog).append(tenant, key)
        elif live and not queued_live:
            self._queued[key] = True
            self._live_queued += 1
            self._shares.promoted(tenant)
            self._live.append(tenant, key)  # the stale backlog entry is skipped when popped
        self._live_changed()
        self._wakeup.set()

    def enqueue_after(self, key: K, delay_seconds: float) -> None:
        """Retry ``key`` after a delay (backoff); an earlier pending retry wins."""
        due = self._clock() + max(0.0, delay_seconds)
        current = self._delayed_due.get(key)
        if current is not None and current <= due:
            return
        self._delayed_due[key] = due
        self._seq += 1
        heapq.heappush(self._delayed, (due, self._seq, key))
        self._timer_wakeup.set()

    def forget(self, key: K) -> None:
        """The object is gone: drop queued and delayed work for it."""
        queued_live = self._queued.pop(key, None)
        if queued_live is not None:
            self._live_queued -= queued_live
            self._shares.dequeued(self._tenant(key), live=queued_live)
        self._live_changed()
        self._dirty.pop(key, None)
        self._delayed_due.pop(key, None)

    @property
    def pending(self) -> int:
        return len(self._queued) + len(self._running)

    def depth(self, live: bool) -> int:
        """Keys waiting for a worker as live work, or as backlog (``first`` included); neither
        running nor delayed keys count. Read by the metrics server's thread at each scrape."""
        return self._live_queued if live else len(self._queued) - self._live_queued

    # --- lifecycle -------------------------------------------------------------------------
    def start(self, *, backlog: bool = True) -> None:
        """Start the workers; with ``backlog=False`` they take only live work until
        :meth:`open_backlog` (start-up: new objects need no cache, the mass of old ones does)."""
        if self._stopped:
            return  # see stop
        self._backlog_open = backlog
        self._tasks = [asyncio.create_task(self._timer(), name="sync-retry-timer")]
        for _ in range(self._workers):
            self._spawn_worker()
        metrics.watch_queue_depth(self.depth)  # the process runs one started queue: this one

    def _spawn_worker(self) -> None:
        if self._stopped:
            return
        self._tasks = [t for t in self._tasks if not t.done()]  # stand-ins' predecessors end
        self._seq += 1
        self._tasks.append(asyncio.create_task(self._worker(), name=f"sync-worker-{self._seq}"))

    def _live_changed(self) -> None:
        """Keep ``_live_done`` (what a job standing aside waits for) in step: set while no live
        work runs on a slot and none is queued that a worker could start."""
        if self._live_active or (self._live_queued and self._shares.runnable_live()):
            self._live_done.clear()
        else:
            self._live_done.set()

    def open_backlog(self) -> None:
        self._backlog_open = True
        self._wakeup.set()

    async def stop(self) -> None:
        """Cancel the workers and the timer, for good: a start (the start-up task may not have
        reached it yet) or a stand-in worker after this starts nothing, so no pass runs once the
        controller stops."""
        self._stopped = True
        metrics.watch_queue_depth(None)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def step_aside(self, *, max_wait_seconds: float) -> None:
        """Called by a running job: wait (at most ``max_wait_seconds``) until no other live work is
        queued or running, while a stand-in worker takes this job's slot. The key stays running
        (never two jobs for one key). Returns at once when there is nothing to wait for, outside
        a job, or when ``ASIDE_PER_WORKER`` times ``workers`` jobs stand aside already (bounded: at most that
        many status patches go out at once when the live work ends)."""
        run = _RUN.get()
        if run is None or run.aside or run.off_slot or self._aside >= ASIDE_PER_WORKER * self._workers:
            return
        # Aside, a job no longer counts in its tenant's share: what is left is a status patch, and
        # the stand-in should be free to start the live work it waits for, its tenant's too.
        self._shares.finished(run.tenant)
        others_active = self._live_active - (1 if run.live else 0)
        if others_active <= 0 and not self._shares.runnable_live():
            self._shares.started(run.tenant)
            return
        run.aside = True
        self._aside += 1
        if run.live:
            self._live_active -= 1
        self._live_changed()
        self._spawn_worker()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._live_done.wait(), max_wait_seconds)

    @contextlib.asynccontextmanager
    async def off_slot(self) -> AsyncIterator[None]:
        """Called by a running job around a wait that needs no worker (a template render): a
        stand-in worker takes this job's slot meanwhile, and on leaving the job waits for a slot
        again — ahead of queued keys, it is half done — so what follows runs with bounded
        concurrency. The key stays running and counts against its tenant's share throughout
        (the share is what bounds how many jobs wait off their slot). A no-op outside a job or
        for a job standing aside (it holds no slot). Not taken back if the job is cancelled: the
        queue is stopping."""
        run = _RUN.get()
        if run is None or run.aside or run.off_slot or self._stopped:
            yield
            return
        run.off_slot = True
        if run.live:
            self._live_active -= 1
            self._live_changed()
        self._spawn_worker()
        try:
            yield
        except asyncio.CancelledError:
            raise
        except BaseException:
            await self._slot_back(run)
            raise
        await self._slot_back(run)

    async def _slot_back(self, run: _Run) -> None:
        """Wait until a worker hands over its slot (``_hand_over``), then run as that worker."""
        wanted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._slot_wanted.append(wanted)
        self._wakeup.set()  # an idle worker hands over at once
        try:
            await wanted
        except asyncio.CancelledError:
            if wanted.done() and not wanted.cancelled():
                self._spawn_worker()  # granted, but this job is gone: the slot is not lost
            raise
        run.off_slot = False
        if run.live:
            self._live_active += 1
            self._live_changed()

    def _hand_over(self) -> bool:
        """Give this worker's slot to a job back from ``off_slot``, if one waits; the worker ends."""
        while self._slot_wanted:
            wanted = self._slot_wanted.popleft()
            if not wanted.done():
                wanted.set_result(None)
                return True
        return False

    async def idle(self, *, poll_seconds: float = 0.01) -> None:
        """Wait until nothing is queued or running (tests and benchmarks)."""
        while self._queued or self._running:  # noqa: ASYNC110 - a test helper; polling is simplest
            await asyncio.sleep(poll_seconds)

    # --- internals -------------------------------------------------------------------------
    def _pop(self) -> tuple[K, bool] | None:
        """The next key and whether it is live work; a live key counts as active from here on.
        Priorities first; within one, tenants in turn, skipping those at their share."""
        for q, is_live in ((self._live, True), (self._first, False), (self._backlog, False)):
            if q is self._backlog and not self._backlog_open:
                break
            # Stale entries (forgotten, or promoted to live: the live entry is elsewhere) are skipped.
            key = q.pop(
                may_take=self._may_start_live if is_live else self._may_start_backlog,
                current=self._is_queued_live if is_live else self._is_queued_backlog,
            )
            if key is None:
                continue
            del self._queued[key]
            tenant = self._tenant(key)
            self._shares.dequeued(tenant, live=is_live)
            self._shares.started(tenant)
            if is_live:
                self._live_queued -= 1
                self._live_active += 1
            return key, is_live
        return None

    def _may_start_live(self, tenant: str) -> bool:
        return self._shares.may_start(tenant, live=True)

    def _may_start_backlog(self, tenant: str) -> bool:
        return self._shares.may_start(tenant, live=False)

    def _is_queued_live(self, key: K) -> bool:
        return self._queued.get(key) is True

    def _is_queued_backlog(self, key: K) -> bool:
        return self._queued.get(key) is False

    async def _worker(self) -> None:
        while True:
            if self._hand_over():
                return  # a job back from off_slot runs on as this worker
            popped = self._pop()
            if popped is None:
                self._wakeup.clear()
                self._idle_workers += 1
                try:
                    await self._wakeup.wait()
                finally:
                    self._idle_workers -= 1
                continue
            key, live = popped
            run = _Run(live=live, tenant=self._tenant(key))
            self._running.add(key)
            token = _RUN.set(run)
            try:
                await self._work(key)
            except asyncio.CancelledError:
                raise
            except Exception:  # the work function reports its own errors; this is a last resort
                log.exception("reconcile of %s crashed; retrying in 5 s", key)
                self.enqueue_after(key, 5.0)  # a crash is a bug: retry slowly, never hot-loop
            finally:
                _RUN.reset(token)
                self._running.discard(key)
                if not run.aside:
                    self._shares.finished(run.tenant)
                self.completed += 1
                if run.aside:
                    self._aside -= 1
                elif live and not run.off_slot:  # off its slot only when cancelled there
                    self._live_active -= 1
                self._live_changed()
            again = self._dirty.pop(key, None)
            if again is not None:
                self.enqueue(key, live=again)
            elif self._queued and self._idle_workers:
                self._wakeup.set()  # a tenant under its share again: idle workers look again
            if run.aside:
                return  # a stand-in took this worker's place

    async def _timer(self) -> None:
        while True:
            # A due time a rounding error ahead counts as due: waiting a timeout that rounds to
            # zero would otherwise spin (a virtual clock never moves on by itself).
            now = self._clock()
            while self._delayed and self._delayed[0][0] <= now + _DUE_TOLERANCE_SECONDS:
                due, _, key = heapq.heappop(self._delayed)
                if self._delayed_due.get(key) == due:
                    del self._delayed_due[key]
                    self.enqueue(key, live=False)
            timeout = self._delayed[0][0] - now if self._delayed else None
            self._timer_wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._timer_wakeup.wait(), timeout)


def running_live() -> bool:
    """Whether the job running in this task is live work (True outside a job): the service
    layer's pacer serves live calls before routine ones (``service/pacing.py``)."""
    run = _RUN.get()
    return run is None or run.live

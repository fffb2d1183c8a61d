"""Our own work queue for SecretSync reconciles.

Why not kopf's per-object handlers: at 10,000 objects they cost a finalizer patch, several tasks
and a timer per object, and a new object waits behind the whole start-up storm (design.md,
"Scale decisions"). This queue is one set of keys with two priorities:

* ``live`` — a user created/edited a SecretSync, a managed Secret drifted, an event arrived;
* ``backlog`` — the start-up list and periodic resyncs.

A key is queued at most once (a live request promotes a queued backlog key), a bounded pool of
workers drains live work first, and delayed retries sit in a heap until due. A key is never
reconciled by two workers at once: a request that arrives while it runs marks it dirty and it
runs again right after.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
log = logging.getLogger(__name__)


class Scheduler(Generic[K]):
    def __init__(
        self,
        work: Callable[[K], Awaitable[None]],
        *,
        workers: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._work = work
        self._workers = workers
        self._clock = clock
        self._live: deque[K] = deque()
        self._backlog: deque[K] = deque()
        self._queued: dict[K, bool] = {}  # key -> is live
        self._running: set[K] = set()
        self._dirty: dict[K, bool] = {}  # requested while running -> live?
        self._delayed: list[tuple[float, int, K]] = []
        self._delayed_due: dict[K, float] = {}
        self._seq = 0
        self._wakeup = asyncio.Event()
        self._timer_wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._backlog_open = True
        self.completed = 0

    # --- requests ---------------------------------------------------------------------------
    def enqueue(self, key: K, *, live: bool = True) -> None:
        """Ask for ``key`` to be reconciled soon; a duplicate request is free."""
        self._delayed_due.pop(key, None)  # an explicit request supersedes a pending retry
        if key in self._running:
            self._dirty[key] = self._dirty.get(key, False) or live
            return
        queued_live = self._queued.get(key)
        if queued_live is None:
            self._queued[key] = live
            (self._live if live else self._backlog).append(key)
        elif live and not queued_live:
            self._queued[key] = True
            self._live.append(key)  # the stale backlog entry is skipped when popped
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
        self._queued.pop(key, None)
        self._dirty.pop(key, None)
        self._delayed_due.pop(key, None)

    @property
    def pending(self) -> int:
        return len(self._queued) + len(self._running)

    # --- lifecycle -------------------------------------------------------------------------
    def start(self, *, backlog: bool = True) -> None:
        """Start the workers; with ``backlog=False`` they take only live work until
        :meth:`open_backlog` (start-up: new objects need no cache, the mass of old ones does)."""
        self._backlog_open = backlog
        self._tasks = [
            asyncio.create_task(self._worker(i), name=f"sync-worker-{i}") for i in range(self._workers)
        ]
        self._tasks.append(asyncio.create_task(self._timer(), name="sync-retry-timer"))

    def open_backlog(self) -> None:
        self._backlog_open = True
        self._wakeup.set()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def idle(self, *, poll_seconds: float = 0.01) -> None:
        """Wait until nothing is queued or running (tests and benchmarks)."""
        while self._queued or self._running:  # noqa: ASYNC110 - a test helper; polling is simplest
            await asyncio.sleep(poll_seconds)

    # --- internals -------------------------------------------------------------------------
    def _pop(self) -> K | None:
        for q, is_live in ((self._live, True), (self._backlog, False)):
            if not is_live and not self._backlog_open:
                break
            while q:
                key = q.popleft()
                queued_live = self._queued.get(key)
                if queued_live is None or queued_live != is_live:
                    continue  # forgotten, or promoted to live (its live entry is elsewhere)
                del self._queued[key]
                return key
        return None

    async def _worker(self, index: int) -> None:
        while True:
            key = self._pop()
            if key is None:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            self._running.add(key)
            try:
                await self._work(key)
            except asyncio.CancelledError:
                raise
            except Exception:  # the work function reports its own errors; this is a last resort
                log.exception("reconcile of %s crashed; retrying in 5 s", key)
                self.enqueue_after(key, 5.0)  # a crash is a bug: retry slowly, never hot-loop
            finally:
                self._running.discard(key)
                self.completed += 1
            again = self._dirty.pop(key, None)
            if again is not None:
                self.enqueue(key, live=again)

    async def _timer(self) -> None:
        while True:
            now = self._clock()
            while self._delayed and self._delayed[0][0] <= now:
                due, _, key = heapq.heappop(self._delayed)
                if self._delayed_due.get(key) == due:
                    del self._delayed_due[key]
                    self.enqueue(key, live=False)
            timeout = self._delayed[0][0] - now if self._delayed else None
            self._timer_wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._timer_wakeup.wait(), timeout)

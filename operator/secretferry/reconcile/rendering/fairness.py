"""Slots and queues shared fairly between tenants (namespaces).

``FairSlots``, for the template workers (pool.py), follows two rules:

- **No tenant holds every slot** (with two or more): at most ``size - 1`` each, so a namespace
  whose templates all run into their limits leaves a worker free for everyone else, who then
  wait for no bomb at all — only for other namespaces' renders.
- **A freed slot goes to the waiting tenant served least recently**, not first come, first
  served: a namespace that queues a hundred renders makes another with one render wait for at
  most one of them per slot, not for all hundred.

``Shares`` and ``RoundRobin``, for the reconcile queue (scheduler.py), follow the same two ideas:

- **No namespace starts more than its share of the in-flight reconciles**: the worker count
  divided by the namespaces that have work of that priority queued (live work: those with live
  work; the backlog: all with work), rounded up, at least one. Why this and not a fixed fraction:
  one namespace alone — the usual namespaced install, and every start-up storm — still uses every
  worker, and the moment a second namespace queues work it is owed half of them. Rounded up so
  that the shares cover every worker: none idles while a namespace under its share has work
  queued. Counted per priority so that a thousand namespaces' resync backlog does not shrink the
  share of the one namespace whose live burst goes ahead of it anyway. A namespace over its share
  (it started more while it had less competition) starts nothing until it is under again; what
  it started finishes (nothing is preempted).
- **Within a priority, namespaces take turns** (FIFO within one namespace): the one key of a
  quiet namespace waits for one key of each other namespace, not for a busy one's thousands.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Hashable
from typing import Final, Generic, TypeVar

K = TypeVar("K", bound=Hashable)

# Tenants whose last turn is remembered; one forgotten counts as never served (goes first).
_REMEMBERED_TENANTS: Final = 4096


class FairSlots:
    """``size`` slots; ``await acquire(tenant)`` … ``release(tenant)``."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("at least one slot")
        self._free = size
        self.per_tenant = max(1, size - 1)
        self._held: collections.Counter[str] = collections.Counter()
        self._waiting: dict[str, collections.deque[asyncio.Future[None]]] = {}
        self._served: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._turn = 0

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    async def acquire(self, tenant: str) -> None:
        # Anyone waiting now is at their tenant's cap (else a release would have served them).
        if self._free and self._held[tenant] < self.per_tenant:
            self._grant(tenant)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant, collections.deque()).append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(tenant)  # granted, but the waiter is gone: pass the slot on
            else:
                self._forget(tenant, future)
            raise

    def release(self, tenant: str) -> None:
        self._held[tenant] -= 1
        if self._held[tenant] <= 0:
            del self._held[tenant]
        self._free += 1
        while self._free:
            eligible = [t for t in self._waiting if self._held[t] < self.per_tenant]
            if not eligible:
                return
            chosen = min(eligible, key=lambda t: self._served.get(t, -1))
            queue = self._waiting[chosen]
            future = queue.popleft()
            if not queue:
                del self._waiting[chosen]
            if not future.done():
                self._grant(chosen)
                future.set_result(None)

    def _grant(self, tenant: str) -> None:
        self._free -= 1
        self._held[tenant] += 1
        self._turn += 1
        self._served[tenant] = self._turn
        self._served.move_to_end(tenant)
        while len(self._served) > _REMEMBERED_TENANTS:
            self._served.popitem(last=False)

    def _forget(self, tenant: str, future: asyncio.Future[None]) -> None:
        queue = self._waiting.get(tenant)
        if queue is None:
            return
        try:
            queue.remove(future)
        except ValueError:
            return
        if not queue:
            del self._waiting[tenant]


class Shares:
    """Queued and in-flight reconciles per namespace, and whether one may start another."""

    def __init__(self, workers: int) -> None:
        # Zero is allowed: a scheduler without workers starts nothing whatever the shares say
        # (tests that only watch its queue use one).
        if workers < 0:
            raise ValueError("a negative number of workers")
        self.workers = workers
        # Per namespace; a count that reaches zero is dropped, so ``len`` counts namespaces.
        self._queued: collections.Counter[str] = collections.Counter()
        self._live_queued: collections.Counter[str] = collections.Counter()
        self.in_flight: collections.Counter[str] = collections.Counter()
        """Jobs started and not finished: running, or off their slot waiting (scheduler.py)."""

    def share(self, *, live: bool) -> int:
        """The most jobs one namespace may have in flight to start one of this priority (see the
        module docstring)."""
        contending = max(1, len(self._live_queued if live else self._queued))
        return max(1, -(-self.workers // contending))  # ceil: the shares cover every worker

    def may_start(self, tenant: str, *, live: bool) -> bool:
        return self.in_flight[tenant] < self.share(live=live)

    def queued(self, tenant: str, *, live: bool) -> None:
        _add(self._queued, tenant, 1)
        if live:
            _add(self._live_queued, tenant, 1)

    def promoted(self, tenant: str) -> None:
        """A queued backlog key became live work."""
        _add(self._live_queued, tenant, 1)

    def dequeued(self, tenant: str, *, live: bool) -> None:
        """A key left the queue: forgotten, or about to be started."""
        _add(self._queued, tenant, -1)
        if live:
            _add(self._live_queued, tenant, -1)

    def started(self, tenant: str) -> None:
        _add(self.in_flight, tenant, 1)

    def finished(self, tenant: str) -> None:
        """A job ended, or no longer counts (it stepped aside: scheduler.py)."""
        _add(self.in_flight, tenant, -1)

    def runnable_live(self) -> bool:
        """Whether a free worker could start queued live work now: a namespace under its share has
        some (a capped namespace's live keys wait whatever anyone does, so nobody waits for them).
        Stops at the first such namespace: usually the first one."""
        share = self.share(live=True)
        return any(self.in_flight[tenant] < share for tenant in self._live_queued)


def _add(counter: collections.Counter[str], tenant: str, n: int) -> None:
    counter[tenant] += n
    if counter[tenant] <= 0:
        del counter[tenant]


class RoundRobin(Generic[K]):
    """Keys queued per tenant; ``pop`` serves the tenants in turn, skipping those that may not
    take one now, so a capped namespace's keys wait without holding up anyone else's.

    Entries may go stale (the queue owner forgot or moved the key); ``pop`` drops them as it
    meets them, through the ``current`` predicate it is given.
    """

    def __init__(self) -> None:
        self._queues: collections.OrderedDict[str, collections.deque[K]] = collections.OrderedDict()

    def append(self, tenant: str, key: K) -> None:
        queue = self._queues.get(tenant)
        if queue is None:
            queue = self._queues[tenant] = collections.deque()
        queue.append(key)

    def pop(self, *, may_take: Callable[[str], bool], current: Callable[[K], bool]) -> K | None:
        """The next current key of the first tenant in turn that ``may_take``; that tenant's turn
        then goes to the back. Costs one step per capped tenant ahead of it, not one per key."""
        empty: list[str] = []
        chosen: str | None = None
        for tenant, queue in self._queues.items():
            while queue and not current(queue[0]):
                queue.popleft()
            if not queue:
                empty.append(tenant)
            elif may_take(tenant):
                chosen = tenant
                break
        for tenant in empty:
            del self._queues[tenant]
        if chosen is None:
            return None
        queue = self._queues[chosen]
        key = queue.popleft()
        if queue:
            self._queues.move_to_end(chosen)
        else:
            del self._queues[chosen]
        return key

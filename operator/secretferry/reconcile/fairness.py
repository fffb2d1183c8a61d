"""Slots shared fairly between tenants (namespaces), for the template workers.

Two rules:

- **No tenant holds every slot** (with two or more): at most ``size - 1`` each, so a namespace
  whose templates all run into their limits leaves a worker free for everyone else, who then
  wait for no bomb at all — only for other namespaces' renders.
- **A freed slot goes to the waiting tenant served least recently**, not first come, first
  served: a namespace that queues a hundred renders makes another with one render wait for at
  most one of them per slot, not for all hundred.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Final

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

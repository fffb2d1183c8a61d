"""Pacing: spend a host's rate-limit budget without running into a wall of 429s.

Why: self-hosted servers limit every route per client IP and minute (docs/service-contract.md,
"Rate limits": 40 secret reads, 60 other reads, 200 writes and logins), and one operator pod is
one IP. Left alone, a cold start over 100 scopes sends 100 list calls at once: 40 are answered,
60 get a 429 and each backs off on its own, so the next windows are lost to retries. Here calls
wait for budget instead:

- **one bucket per route of a host**, as the server counts (``@fastify/rate-limit`` keys its
  counters by method, route and IP): the list route, the slug look-up, logins, renewals and the
  event stream each have their own budget, so a login never waits behind 100 list calls;
- **learned from the answers**, not configured: the first call of a route goes alone; its
  ``x-ratelimit-limit``/``-remaining``/``-reset`` say the budget and when the window ends. A
  route answered without those headers (the hosted service, the dev server's ``newest``
  profile) is unlimited here and never waits. Each answer corrects the budget (other clients
  behind the same IP count too); a 429 empties it until its ``retry-after``;
- **fixed windows**: when the budget is spent, calls wait until the window's reset, then the
  next window's budget is handed out (``x-ratelimit-reset`` is rounded up by the server and read
  on arrival, so the local reset is never earlier than the server's);
- **live work first**: waiting calls are served by priority (``priority()``: ``LIVE`` for a new
  or changed SecretSync, an event, a retry; ``ROUTINE`` for the start-up backlog and periodic
  resyncs) and routine calls leave a reserve of each window (``RESERVE_FRACTION``) to live work,
  so a SecretSync created during a resync wave of 100 scopes is served within the window.

A pacer belongs to one connection pool (one host). It never refuses: a caller waits, and its
own deadline (none for list calls; the scheduler's for a pass) decides how long.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Final

from secretferry import metrics

LIVE: Final = 0
ROUTINE: Final = 1

# Routine work leaves this share of each window (at least one call) to live work: 4 of the 40
# list calls a minute, enough for a few SecretSyncs created during a resync wave.
RESERVE_FRACTION: Final = 0.1
# The window when an answer did not say (``@fastify/rate-limit``'s usual minute), and the margin
# a window is believed to last longer than that after a local refill, until an answer tells.
DEFAULT_WINDOW_SECONDS: Final = 60.0
_PROVISIONAL_MARGIN_SECONDS: Final = 2.0
# A 429 without retry-after or reset: the service contract's default wait.
DEFAULT_RETRY_AFTER_SECONDS: Final = 60.0

_PRIORITY: ContextVar[int] = ContextVar("secretferry_pacing_priority", default=LIVE)


@contextlib.contextmanager
def priority(level: int) -> Iterator[None]:
    """Calls made in this block (and in tasks it starts) wait at ``level``."""
    token = _PRIORITY.set(level)
    try:
        yield
    finally:
        _PRIORITY.reset(token)


def current_priority() -> int:
    return _PRIORITY.get()


_ON_SEND: ContextVar[Callable[[], None] | None] = ContextVar("secretferry_pacing_on_send", default=None)


@contextlib.contextmanager
def on_send(callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback`` when a call made in this block leaves (after any wait for budget): a
    caller that dates its answer (the fetcher's freshness) must date it by the send, not by
    the start of a wait that may last minutes."""
    token = _ON_SEND.set(callback)
    try:
        yield
    finally:
        _ON_SEND.reset(token)


def sending() -> None:
    """The connection sends a call now (``on_send``)."""
    callback = _ON_SEND.get()
    if callback is not None:
        callback()


def _int_header(headers: Mapping[str, str], name: str) -> int | None:
    value = headers.get(name)
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return int(number) if math.isfinite(number) and number >= 0 else None


@dataclass
class Bucket:
    """The budget of one route of one host (see the module docstring)."""

    limit: int | None = None
    """Calls per window, from ``x-ratelimit-limit``; None until an answer said."""
    remaining: int = 0
    """Calls that may still go out in this window (granted calls already deducted)."""
    reset_at: float | None = None
    """Clock time the current window ends; None: no window known."""
    confirmed: bool = False
    """Whether ``reset_at`` came from an answer of this window (not a local refill)."""
    window: float = DEFAULT_WINDOW_SECONDS
    unlimited: bool = False
    """Answered without rate-limit headers: never wait."""
    probing: bool = False
    in_flight: int = 0
    refused: int = 0
    """429s received on this route."""
    waited: int = 0
    """Calls that had to wait for budget."""
    waiters: list[tuple[int, int, asyncio.Future[None]]] = field(default_factory=list)
    timer: asyncio.Task[None] | None = None

    @property
    def reserve(self) -> int:
        limit = self.limit or 0
        return max(0, min(limit - 1, math.ceil(limit * RESERVE_FRACTION)))


class HostPacer:
    """Buckets per route (``"GET /api/v3/secrets/raw"``) of one host; see the module docstring."""

    def __init__(
        self,
        host: str,
        *,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.host = host
        # The event loop's clock (monotonic; virtual under looptime in tests): only read in the loop.
        self._clock = clock or (lambda: asyncio.get_running_loop().time())
        self._sleep = sleep
        self._seq = itertools.count()
        self.buckets: dict[str, Bucket] = {}
        _PACERS.add(self)
        _BY_HOST[host] = self

    def wait_estimate(self, route: str, *, level: int = ROUTINE) -> float:
        """Seconds a call of ``route`` at ``level`` would wait for budget now (0: it would go).

        Lets a caller that holds something scarce (a scheduler worker) give it back and come
        back later instead of waiting here."""
        bucket = self.buckets.get(route)
        if bucket is None or bucket.unlimited:
            return 0.0
        now = self._clock()
        until_reset = max(0.0, bucket.reset_at - now) if bucket.reset_at is not None else 0.0
        if bucket.reset_at is not None and now >= bucket.reset_at and not bucket.waiters:
            return 0.0
        if any(waiting <= level for waiting, _, _ in bucket.waiters):
            return until_reset or 1.0
        if bucket.limit is None:
            busy = bucket.probing or bucket.in_flight or until_reset > 0
            return (until_reset or 1.0) if busy else 0.0
        floor = bucket.reserve if level > LIVE else 0
        return 0.0 if bucket.remaining > floor else (until_reset or 1.0)

    def budgets(self) -> dict[str, tuple[int | None, int]]:
        """Route → (limit, remaining) for routes with a known limit (the metric reads it)."""
        return {
            route: (b.limit, b.remaining)
            for route, b in list(self.buckets.items())
            if b.limit is not None and not b.unlimited
        }

    async def acquire(self, route: str, *, level: int | None = None) -> None:
        """Wait until a call of ``route`` may go out; pair with ``answered`` or ``failed``."""
        bucket = self.buckets.setdefault(route, Bucket())
        level = current_priority() if level is None else level
        if not bucket.waiters and self._take(bucket, level):
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (level, next(self._seq), future)
        heapq.heappush(bucket.waiters, entry)
        self._dispatch(bucket)  # a live call may pass routine waiters held back by the reserve
        if future.done():
            return
        bucket.waited += 1
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.failed(route)  # granted, but the caller went away: give the call back
            else:
                bucket.waiters.remove(entry)
                heapq.heapify(bucket.waiters)
            raise

    def answered(self, route: str, *, status: int, headers: Mapping[str, str]) -> None:
        """The call of ``route`` got an answer: learn the budget from its headers."""
        bucket = self.buckets.setdefault(route, Bucket())
        now = self._clock()
        bucket.in_flight = max(0, bucket.in_flight - 1)
        bucket.probing = False
        limit = _int_header(headers, "x-ratelimit-limit")
        remaining = _int_header(headers, "x-ratelimit-remaining")
        reset = _int_header(headers, "x-ratelimit-reset")
        if status == 429:
            bucket.refused += 1
            if limit is not None:
                # A rate-limit refusal (it names its limit): nothing more until its retry-after.
                # A bare 429 (a stream cap, a proxy) is left to the caller's backoff.
                wait = _int_header(headers, "retry-after")
                wait = wait if wait is not None else reset
                bucket.unlimited, bucket.limit, bucket.remaining = False, limit, 0
                seconds = float(wait) if wait is not None else DEFAULT_RETRY_AFTER_SECONDS
                bucket.reset_at = max(bucket.reset_at or now, now + seconds)
                bucket.confirmed = True
        elif limit is None or remaining is None:
            if bucket.limit is None:
                bucket.unlimited = True  # this route is not limited here
        else:
            bucket.unlimited = False
            bucket.limit = limit
            left = max(0, remaining - bucket.in_flight)  # calls still out may count here too
            candidate = now + (reset if reset is not None else bucket.window)
            if reset is not None:
                bucket.window = max(bucket.window, float(reset))
            known = bucket.reset_at
            if known is None or now >= known or candidate > known + bucket.window / 2:
                bucket.reset_at, bucket.remaining = candidate, left  # a new window began
            elif not bucket.confirmed:
                # The first answer after a local refill says when this window really ends.
                bucket.reset_at, bucket.remaining = candidate, min(bucket.remaining, left)
            else:
                # Every answer's reset is at or after the server's: the earliest is the closest.
                bucket.reset_at, bucket.remaining = min(known, candidate), min(bucket.remaining, left)
            bucket.confirmed = True
        self._dispatch(bucket)

    def failed(self, route: str) -> None:
        """The call of ``route`` got no answer (it may or may not have counted at the server)."""
        bucket = self.buckets.setdefault(route, Bucket())
        bucket.in_flight = max(0, bucket.in_flight - 1)
        bucket.probing = False
        self._dispatch(bucket)

    # --- granting -------------------------------------------------------------------------------------

    def _take(self, bucket: Bucket, level: int) -> bool:
        """Grant one call now if the budget allows it (deducting it)."""
        if bucket.unlimited:
            bucket.in_flight += 1
            return True
        now = self._clock()
        if bucket.reset_at is not None and now >= bucket.reset_at:
            self._refill(bucket, now)
        if bucket.limit is None:
            # Unknown budget: one call at a time (and none before a 429's retry-after) until an
            # answer tells.
            if bucket.probing or bucket.in_flight or (bucket.reset_at is not None and now < bucket.reset_at):
                return False
            bucket.probing = True
            bucket.in_flight += 1
            return True
        floor = bucket.reserve if level > LIVE else 0
        if bucket.remaining <= floor:
            return False
        bucket.remaining -= 1
        bucket.in_flight += 1
        return True

    def _refill(self, bucket: Bucket, now: float) -> None:
        """The window is over: the next one's budget, minus calls still out (they may count in it)."""
        if bucket.limit is None:
            bucket.reset_at = None
            return
        bucket.remaining = max(0, bucket.limit - bucket.in_flight)
        # The server's next window starts with the first call it counts, after now: believe it
        # ends a little later than a window from now until an answer says when.
        bucket.reset_at = now + bucket.window + _PROVISIONAL_MARGIN_SECONDS
        bucket.confirmed = False

    def _dispatch(self, bucket: Bucket) -> None:
        while bucket.waiters:
            level, _, future = bucket.waiters[0]
            if future.done():
                heapq.heappop(bucket.waiters)
                continue
            if not self._take(bucket, level):
                break
            heapq.heappop(bucket.waiters)
            future.set_result(None)
        self._arm(bucket)

    def _arm(self, bucket: Bucket) -> None:
        """Wake the waiters when the window resets (an answer wakes them earlier if it can)."""
        if not bucket.waiters or bucket.reset_at is None:
            return
        if bucket.timer is not None and not bucket.timer.done():
            return
        bucket.timer = asyncio.get_running_loop().create_task(self._wake(bucket))

    async def _wake(self, bucket: Bucket) -> None:
        while bucket.waiters and bucket.reset_at is not None:
            delay = bucket.reset_at - self._clock()
            if delay > 0:
                await self._sleep(delay)
                continue
            bucket.timer = None
            self._dispatch(bucket)
            return
        bucket.timer = None

    async def aclose(self) -> None:
        for bucket in self.buckets.values():
            if bucket.timer is not None:
                bucket.timer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await bucket.timer


_PACERS: weakref.WeakSet[HostPacer] = weakref.WeakSet()
# The pacer of each host (one per connection pool; pools to one host with different CA bundles
# share the server's budget but not a pacer: the last one made answers here).
_BY_HOST: weakref.WeakValueDictionary[str, HostPacer] = weakref.WeakValueDictionary()


def wait_estimate(host: str, route: str, *, level: int = ROUTINE) -> float:
    """``HostPacer.wait_estimate`` of ``host``'s pacer (0 for a host without one)."""
    pacer = _BY_HOST.get(host)
    return 0.0 if pacer is None else pacer.wait_estimate(route, level=level)


def budgets() -> list[tuple[str, str, int, int]]:
    """(host, route, limit, remaining) of every live pacer's limited routes, for the metric."""
    out = []
    for pacer in list(_PACERS):
        for route, (limit, remaining) in pacer.budgets().items():
            out.append((pacer.host, route, limit or 0, remaining))
    return out


metrics.read_rate_budgets_from(budgets)

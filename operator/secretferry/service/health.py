"""Whether a service host answers, shared by every call made through one connection pool.

Why per host: when the service goes away, every scope, stream and login on it fails together and
each backs off on its own (full jitter, doubling up to minutes). Left alone, they notice the
service back one by one over a whole backoff period (measured: 47-58 s after a 60 s outage). One
object per host sees every answer and every failure, and tells its listeners the moment the host
answers again, so that whatever waits retries at once instead of sleeping out its own delay.

States::

    UP --host-level failure--> SUSPECT --another one--> DOWN
    ^                             |                       |
    +-------- any answer ---------+                       |
    +-------- any answer (listeners told "recovered") ----+

A host-level failure means nothing answered: no connection, a timeout, or a gateway's 502/503/504.
Everything else is an answer, errors included: a 401, 404 or 500 is one endpoint's trouble, not the
host's. One failure alone only makes the host SUSPECT: a probe goes out at once, and when the host
answers it nobody is woken (one scope failing on its own must not make every scope retry). While
the host is not UP, one probe task asks ``GET /api/status`` (Infisical's own operator probes it;
a server without it answers 404, which is an answer too) with backoff, so a recovered host is
noticed within seconds even when every scope's own retry is minutes away.

A 429 is an answer, but its ``retry-after`` holds for the whole host (the hosted service limits per
client IP, docs/service-contract.md): ``not_before`` keeps the latest, and nothing woken here retries
before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable

from secretferry import backoff
from secretferry.service import errors

logger = logging.getLogger(__name__)

UP = "up"
SUSPECT = "suspect"
DOWN = "down"

# Gateway answers that mean "the service behind me is not there"; a 500 comes from the service.
HOST_DOWN_STATUSES = frozenset({502, 503, 504})
PROBE_PATH = "/api/status"
# The first probe goes out at once; then 0.5 s doubling to 5 s: a host that is back is noticed
# within 5 s, for about 24 unauthenticated calls a minute while it is down.
PROBE_BACKOFF_INITIAL_SECONDS = 0.5
PROBE_BACKOFF_MAX_SECONDS = 5.0
# Stop probing a host no real call has needed for this long (say, its identity was removed while
# it was down); the next real call that fails starts probing again. Far above the longest
# per-scope backoff (300 s by default), so a host with waiting scopes is always probed.
PROBE_IDLE_SECONDS = 900.0

Listener = Callable[["HostHealth"], None]


class HostHealth:
    """Answer/failure bookkeeping and the recovery probe of one host (see the module docstring)."""

    def __init__(
        self,
        name: str,
        *,
        probe: Callable[[], Awaitable[object]],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        rng: random.Random | None = None,
        probe_initial: float = PROBE_BACKOFF_INITIAL_SECONDS,
        probe_max: float = PROBE_BACKOFF_MAX_SECONDS,
    ) -> None:
        self.name = name
        self._probe = probe
        self._clock = clock
        self._sleep = sleep
        self._rng = rng
        self._probe_initial = probe_initial
        self._probe_max = probe_max
        self._state = UP
        self._listeners: list[Listener] = []
        self._prober: asyncio.Task[None] | None = None
        self._demand_at = 0.0
        self.failing_since: float | None = None
        """When the current SUSPECT/DOWN period began (monotonic); None while UP."""
        self.not_before: float | None = None
        """Monotonic time before which nothing should be retried (the latest 429 ``retry-after``)."""
        self.recoveries = 0
        """DOWN → UP transitions so far: compare two readings to learn "recovered since"."""
        self.probes = 0

    def __repr__(self) -> str:
        return f"HostHealth({self.name!r}, {self._state})"

    @property
    def state(self) -> str:
        return self._state

    @property
    def is_down(self) -> bool:
        return self._state == DOWN

    @property
    def probing(self) -> bool:
        return self._prober is not None and not self._prober.done()

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(self)`` each time the host answers again after being DOWN."""
        self._listeners.append(listener)

    def retry_allowed(self) -> bool:
        """Whether a host-wide ``retry-after`` is over (or none was given)."""
        return self.not_before is None or self._clock() >= self.not_before

    # --- what the connection reports ------------------------------------------------------------------

    def failed(self, *, probe: bool = False) -> None:
        """A call found nobody answering (connection refused or reset, timeout, 502/503/504)."""
        now = self._clock()
        if self._state == UP:
            self._state, self.failing_since = SUSPECT, now
        elif self._state == SUSPECT:
            self._state = DOWN
            logger.warning("the service at %s does not answer; probing it until it does", self.name)
        if not probe:
            self._demand_at = now
            self._start_probing()  # no-op while the prober runs; restarts one that went idle

    def answered(self, *, retry_after: float | None = None) -> None:
        """A call got an answer (any status but the gateway ones); ``retry_after`` from a 429."""
        now = self._clock()
        if retry_after is not None and retry_after > 0:
            self.not_before = max(self.not_before or now, now + retry_after)
        if self._state == UP:
            return
        was_down, since = self._state == DOWN, self.failing_since
        self._state, self.failing_since = UP, None
        if not was_down:
            return
        self.recoveries += 1
        logger.info(
            "the service at %s answers again (down for %.1f s)", self.name, now - (since if since else now)
        )
        for listener in list(self._listeners):
            try:
                listener(self)
            except Exception:
                logger.exception("a recovery listener of %s failed", self.name)

    async def aclose(self) -> None:
        prober, self._prober = self._prober, None
        if prober is not None and not prober.done():
            prober.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await prober

    # --- the probe ---------------------------------------------------------------------------------

    def _start_probing(self) -> None:
        if self._prober is not None and not self._prober.done():
            return
        try:
            self._prober = asyncio.get_running_loop().create_task(
                self._probe_loop(), name=f"probe {self.name}"
            )
        except RuntimeError:  # no event loop (a synchronous caller): the next async failure starts it
            self._prober = None

    async def _probe_loop(self) -> None:
        retry = backoff.Backoff(self._probe_initial, self._probe_max, clock=self._clock, rng=self._rng)
        while self._state != UP:
            if self._clock() - self._demand_at > PROBE_IDLE_SECONDS:
                logger.info("no longer probing %s: nothing has needed it for a while", self.name)
                return
            self.probes += 1
            try:
                await self._probe()  # the connection reports the outcome to us
            except errors.ServiceError:
                pass
            except Exception:  # a bug, not an outage: stop probing; real calls still report
                logger.exception("probing %s failed unexpectedly; no longer probing", self.name)
                return
            if self._state == UP:
                return
            delay = retry.next_delay()
            if self.not_before is not None:
                delay = max(delay, self.not_before - self._clock())
            await self._sleep(delay)

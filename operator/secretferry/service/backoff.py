"""Exponential backoff with full jitter, capped, honouring a server's ``retry-after``.

Why full jitter: many scopes and streams fail together when the service goes away; drawing each
delay uniformly from ``[0, ceiling]`` spreads their retries instead of sending them back in
lock-step (the "thundering herd" that a fixed or equal-jitter schedule produces). The ceiling
doubles per consecutive failure, up to ``maximum``, so a recovered service is seen soon.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

# Each consecutive failure doubles the ceiling: the classic exponential schedule.
_MULTIPLIER = 2.0
# Beyond this exponent the ceiling is capped anyway; stops 2**n overflowing after long outages.
_MAX_EXPONENT = 64


class Backoff:
    """Delays for one retrying thing (a scope, a stream, a login); not shared between them."""

    def __init__(
        self,
        initial: float,
        maximum: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError("backoff needs 0 < initial <= maximum")
        self.initial = initial
        self.maximum = maximum
        self._clock = clock
        self._rng = rng or random.Random()
        self._failures = 0
        self.retry_at: float | None = None

    @property
    def failures(self) -> int:
        """Consecutive failures since the last ``reset``."""
        return self._failures

    def ceiling(self) -> float:
        """Upper bound of the next delay (before ``retry_after``)."""
        exponent = min(self._failures, _MAX_EXPONENT)
        return float(min(self.maximum, self.initial * _MULTIPLIER**exponent))

    def next_delay(self, retry_after: float | None = None) -> float:
        """Record one more failure and return seconds to wait; a larger ``retry_after`` wins."""
        delay = self._rng.uniform(0.0, self.ceiling())
        self._failures += 1
        if retry_after is not None and retry_after > delay:
            delay = retry_after
        self.retry_at = self._clock() + delay
        return delay

    def ready(self) -> bool:
        """Whether the wait after the last failure is over (always true after ``reset``)."""
        return self.retry_at is None or self._clock() >= self.retry_at

    def expedite(self, not_before: float | None = None) -> None:
        """Allow the next attempt now (or at ``not_before``), keeping the failure count.

        For "the host answers again": the waiting thing retries at once instead of sleeping out
        its delay, and should that attempt fail too, its next delay is as long as it would have
        been — a service that flaps does not turn the retries into a tight loop.
        """
        if self.retry_at is None:
            return
        now = self._clock()
        self.retry_at = min(self.retry_at, max(now, not_before or now))

    def reset(self) -> None:
        """A success: the next failure starts again from ``initial``."""
        self._failures = 0
        self.retry_at = None

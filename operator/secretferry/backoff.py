"""The one backoff: exponential, capped, jittered, honouring a server's ``retry-after``.

Every retrying thing in the operator draws its delays here — a scope's list call, a stream, a
login, the recovery probe of a host, a Kubernetes watch, a SecretSync pass, a quarantined
template — so "how long until the next try" has one answer and one set of tests. It sits beside
``settings``/``origins``, outside the layers, because both sides of the ``service | kube`` layer
use it.

Why jitter: many scopes and streams fail together when the service goes away; drawing each delay
at random spreads their retries instead of sending them back in lock-step (the "thundering herd"
a fixed schedule produces). ``jitter`` is the fraction of the ceiling left to chance: 1.0 (full
jitter, uniform in ``[0, ceiling]``) for crowds that fail together; 0.5 ("equal jitter", at least
half the ceiling) where a near-zero delay would hammer a struggling server, such as watches that
re-LIST; 0 where one thing is being spaced out, not a crowd spread. The ceiling doubles per
consecutive failure, up to ``maximum``, so a recovered service is seen soon.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

# Each consecutive failure doubles the ceiling: the classic exponential schedule.
_MULTIPLIER = 2.0
# Beyond this exponent the ceiling is capped anyway; stops 2**n overflowing after long outages.
_MAX_EXPONENT = 64

# The longest a server's ``retry-after`` is believed. Real rate limiters and maintenance windows
# ask for seconds to minutes; a service or proxy that asks for years (broken or hostile) would
# otherwise park a scope, a stream or a whole host until the process restarts. Past this, the
# retry comes early and at worst meets one more 429/503, which asks again.
RETRY_AFTER_MAX_SECONDS = 600.0

FULL_JITTER = 1.0
EQUAL_JITTER = 0.5
NO_JITTER = 0.0


class Backoff:
    """Delays for one retrying thing (a scope, a stream, a login, a watch); never shared."""

    __slots__ = ("_clock", "_failures", "_rng", "initial", "jitter", "maximum", "retry_at")

    def __init__(
        self,
        initial: float,
        maximum: float,
        *,
        jitter: float = FULL_JITTER,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError("backoff needs 0 < initial <= maximum")
        if not 0.0 <= jitter <= 1.0:
            raise ValueError("backoff jitter is a fraction of the delay, 0 to 1")
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
        self._clock = clock
        self._rng = rng or _SHARED_RNG
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
        """Record one more failure and return seconds to wait; a larger ``retry_after`` wins, up to
        ``RETRY_AFTER_MAX_SECONDS``."""
        ceiling = self.ceiling()
        delay = ceiling if self.jitter == 0 else self._rng.uniform(ceiling * (1.0 - self.jitter), ceiling)
        self._failures += 1
        if retry_after is not None and retry_after > delay:
            delay = max(delay, min(retry_after, RETRY_AFTER_MAX_SECONDS))
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


# One generator for every Backoff without its own (tests pass a seeded one): a Random per
# instance would cost ~2.5 KB each, and there is one Backoff per failing SecretSync.
_SHARED_RNG = random.Random()

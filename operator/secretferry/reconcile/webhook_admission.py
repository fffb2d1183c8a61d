"""Which webhook requests get their signature checked: a bucket per source, and a shared spare budget.

Why two limits: the per-source token bucket (``webhook_rate_per_second``/``webhook_burst``) stops one
address from making us hash without end. But a flood from the *same* address as the service's
webhooks (behind an Ingress without ``webhook_trusted_proxies``, a NAT, or a trusted proxy's own
address) empties that bucket for the service too, and a webhook refused 429 is not retried: the
change would wait for the scope's resync. No cheap test tells a genuine request from a forged one
before the HMAC (that is the point of a signature), so the only way a genuine one survives a flood
from its own address is to keep checking signatures past the bucket.

So a request over its source's rate is still verified, from one budget shared by all sources
(``webhook_over_rate_verify_per_second``, one second of it as burst), when its body is at most
``OVER_RATE_MAX_BODY_BYTES``; otherwise it is refused 429 without any HMAC, as before. What that
costs, measured on the 2-core development machine (``bench/bench_webhook.py --flood-limits
default``, 10,000 forged requests from one address): the receiver spends 82-86 µs of CPU on a
request it refuses 429 (accept, read, parse, answer: what a flood costs us whatever we do with it)
and 101-108 µs on one it verifies and refuses 401 (HMAC-SHA256 over a 300-byte body is ~5 µs, over
4 KiB ~9 µs; the rest is the key file's stat and the header's parsing). So checking every small
request costs a flood ~20 % more CPU than refusing it unread, and one core receives at most
~10,000 such requests a second. The default budget (20,000/s) is above that on purpose: no flood
the receiver can read at all outruns it, so every small request is verified, the service's among
them, and its webhook is accepted while the forgeries around it are refused 401 (measured: the
real change arrives in 50-62 ms during the flood, and in none of the runs without the budget).
The budget caps what verification can add in absolute terms on a faster machine. A lower budget
trades starvation for CPU: a flood faster than the budget is refused 429 past it (``rate_limited``
climbs), and a genuine webhook in it gets through only with the budget's share of the flood.

Why large bodies get no spare verification: the service's payload is a few hundred bytes (a
``secrets.modified`` body names a project, an environment and a path); 4 KiB leaves room for long
names. A flood of 64 KiB bodies over rate costs no HMAC at all and cannot use up the budget the
small, genuine ones need. ``0`` turns the budget off (the behaviour before it existed: every
request over rate is refused 429).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable

# A request over its source's rate with a body larger than this is refused without an HMAC (the
# service's payload is a few hundred bytes; see the module docstring).
OVER_RATE_MAX_BODY_BYTES = 4096
# Source addresses remembered by the rate limiter; the oldest is forgotten beyond this (bounded
# memory under a flood from many addresses).
_MAX_SOURCES = 10_000


class Admit(enum.Enum):
    """What to do with a request before its signature is checked."""

    VERIFY = "verify"  # within its source's rate
    VERIFY_OVER_RATE = "verify_over_rate"  # over its source's rate, verified from the shared budget
    REFUSE = "refuse"  # 429 without HMAC


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` held; starts full."""

    def __init__(self, *, rate: float, burst: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._burst = burst
        self._clock = clock
        self._tokens = burst
        self._last = clock()

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True


class RateLimiter:
    """A token bucket per source address."""

    def __init__(self, *, rate: float, burst: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._burst = burst
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}

    def allow(self, source: str) -> bool:
        now = self._clock()
        tokens, last = self._buckets.pop(source, (self._burst, now))
        tokens = min(self._burst, tokens + (now - last) * self._rate)
        allowed = tokens >= 1.0
        self._buckets[source] = (tokens - 1.0 if allowed else tokens, now)  # re-inserted: newest
        if len(self._buckets) > _MAX_SOURCES:
            del self._buckets[next(iter(self._buckets))]
        return allowed


class Admission:
    """The per-source limit, then the shared over-rate budget (module docstring)."""

    def __init__(
        self,
        *,
        rate: float,
        burst: float,
        over_rate_per_second: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limiter = RateLimiter(rate=rate, burst=burst, clock=clock)
        self._budget = (
            TokenBucket(rate=over_rate_per_second, burst=max(1.0, over_rate_per_second), clock=clock)
            if over_rate_per_second > 0
            else None
        )

    def admit(self, source: str, body_bytes: int | None) -> Admit:
        """``body_bytes`` None: over the size cap, not read (refused 413 if within rate)."""
        if self._limiter.allow(source):
            return Admit.VERIFY
        if (
            self._budget is not None
            and body_bytes is not None
            and body_bytes <= OVER_RATE_MAX_BODY_BYTES
            and self._budget.take()
        ):
            return Admit.VERIFY_OVER_RATE
        return Admit.REFUSE

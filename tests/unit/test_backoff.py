"""Backoff: full jitter under a doubling, capped ceiling; ``retry_after`` wins when larger."""

from __future__ import annotations

import random

import pytest
from clock_fakes import Clock, Top

from secretferry import backoff


@pytest.mark.parametrize(
    ("failures", "expected"),
    [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (4, 10.0), (50, 10.0), (500, 10.0)],
)
def test_ceiling_doubles_and_is_capped(failures: int, expected: float) -> None:
    b = backoff.Backoff(1.0, 10.0, rng=Top())
    for _ in range(failures):
        b.next_delay()
    assert b.ceiling() == expected
    assert b.next_delay() == expected


def test_full_jitter_stays_within_ceiling() -> None:
    b = backoff.Backoff(1.0, 30.0, rng=random.Random(7))
    delays = [b.next_delay() for _ in range(200)]
    assert all(0.0 <= d <= 30.0 for d in delays)
    assert len(set(delays)) > 150  # jittered, not lock-step


@pytest.mark.parametrize(
    ("retry_after", "expected"),
    [(None, 1.0), (0.5, 1.0), (60.0, 60.0), (600.0, 600.0), (1e9, backoff.RETRY_AFTER_MAX_SECONDS)],
)
def test_retry_after_wins_when_larger(retry_after: float | None, expected: float) -> None:
    b = backoff.Backoff(1.0, 10.0, rng=Top())
    assert b.next_delay(retry_after) == expected


def test_retry_at_ready_and_reset() -> None:
    clock = Clock(100.0)
    b = backoff.Backoff(2.0, 10.0, clock=clock, rng=Top())
    assert b.ready() and b.retry_at is None
    b.next_delay()
    assert b.retry_at == 102.0 and not b.ready()
    clock.now = 102.0
    assert b.ready()
    b.next_delay()
    assert b.failures == 2 and b.ceiling() == 8.0
    b.reset()
    assert b.failures == 0 and b.ready() and b.ceiling() == 2.0


@pytest.mark.parametrize(("initial", "maximum"), [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0)])
def test_rejects_nonsense(initial: float, maximum: float) -> None:
    with pytest.raises(ValueError):
        backoff.Backoff(initial, maximum)


def test_expedite_allows_a_retry_now_but_keeps_the_failure_count() -> None:
    clock = Clock()
    b = backoff.Backoff(1.0, 60.0, clock=clock, rng=Top())
    for _ in range(5):
        b.next_delay()
    assert not b.ready()
    b.expedite(not_before=clock.now + 3.0)  # a host-wide retry-after still holds
    assert b.retry_at == clock.now + 3.0
    b.expedite()
    assert b.ready() and b.failures == 5
    assert b.next_delay() == 32.0  # failing again waits as long as it would have


def test_expedite_never_delays() -> None:
    clock = Clock()
    b = backoff.Backoff(1.0, 60.0, clock=clock, rng=Top())
    b.expedite()
    assert b.retry_at is None
    b.next_delay()
    b.expedite(not_before=clock.now + 500.0)
    assert b.retry_at == clock.now + 1.0


class Bottom(random.Random):
    """Always draws the bottom of the range: the shortest delay the jitter allows."""

    def uniform(self, a: float, b: float) -> float:
        return a


@pytest.mark.parametrize(
    ("jitter", "failures", "low", "high"),
    [
        # Equal jitter (watches): at least half the ceiling, 0.5 s doubling to 30 s.
        (backoff.EQUAL_JITTER, 1, 0.25, 0.5),
        (backoff.EQUAL_JITTER, 2, 0.5, 1.0),
        (backoff.EQUAL_JITTER, 3, 1.0, 2.0),
        (backoff.EQUAL_JITTER, 10, 15.0, 30.0),
        (backoff.EQUAL_JITTER, 100, 15.0, 30.0),
        # Full jitter (scopes, streams, logins, passes): anything up to the ceiling.
        (backoff.FULL_JITTER, 3, 0.0, 2.0),
        # No jitter (a quarantined template): exactly the ceiling.
        (backoff.NO_JITTER, 3, 2.0, 2.0),
    ],
)
def test_jitter_bounds_the_delay_from_below(jitter: float, failures: int, low: float, high: float) -> None:
    for rng, expected in ((Bottom(), low), (Top(), high)):
        b = backoff.Backoff(0.5, 30.0, jitter=jitter, rng=rng)
        for _ in range(failures - 1):
            b.next_delay()
        assert b.next_delay() == pytest.approx(expected)


@pytest.mark.parametrize("jitter", [-0.1, 1.5])
def test_jitter_outside_zero_to_one_is_refused(jitter: float) -> None:
    with pytest.raises(ValueError, match="jitter"):
        backoff.Backoff(1.0, 2.0, jitter=jitter)

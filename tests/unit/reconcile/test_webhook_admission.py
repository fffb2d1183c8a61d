"""Admission before the HMAC: a bucket per source, then a shared budget for small requests (virtual time)."""

from __future__ import annotations

from secretferry.reconcile import webhook_admission as wa

V, OVER, NO = wa.Admit.VERIFY, wa.Admit.VERIFY_OVER_RATE, wa.Admit.REFUSE


def _admission(now: list[float], *, budget: float = 3) -> wa.Admission:
    return wa.Admission(rate=1, burst=2, over_rate_per_second=budget, clock=lambda: now[0])


def test_over_its_rate_a_source_is_still_verified_within_the_shared_budget() -> None:
    now = [0.0]
    admit = _admission(now)
    # two from the bucket, three from the budget (its burst: one second of it), then 429
    assert [admit.admit("a", 300) for _ in range(6)] == [V, V, OVER, OVER, OVER, NO]
    assert admit.admit("b", 300) is V  # another source's bucket is its own
    now[0] = 1.0  # a second: one token back in a's bucket, three in the budget
    assert [admit.admit("a", 300) for _ in range(5)] == [V, OVER, OVER, OVER, NO]


def test_the_budget_is_shared_by_every_source() -> None:
    now = [0.0]
    admit = _admission(now)
    for source in ("a", "b"):
        admit.admit(source, 300)
        admit.admit(source, 300)
    assert [admit.admit("a", 300), admit.admit("b", 300), admit.admit("a", 300), admit.admit("b", 300)] == [
        OVER,
        OVER,
        OVER,
        NO,
    ]


def test_a_large_body_over_rate_gets_no_hmac_and_leaves_the_budget_alone() -> None:
    now = [0.0]
    admit = _admission(now)
    assert [admit.admit("a", 65536) for _ in range(2)] == [V, V]  # within rate: any size up to the cap
    assert [admit.admit("a", wa.OVER_RATE_MAX_BODY_BYTES + 1) for _ in range(10)] == [NO] * 10
    assert admit.admit("a", None) is NO  # over the size cap, not read: no token, no budget
    assert [admit.admit("a", wa.OVER_RATE_MAX_BODY_BYTES) for _ in range(3)] == [OVER] * 3


def test_a_budget_of_zero_is_the_old_behaviour() -> None:
    now = [0.0]
    admit = _admission(now, budget=0)
    assert [admit.admit("a", 300) for _ in range(3)] == [V, V, NO]


def test_rate_limit_per_source_refills_with_time() -> None:
    now = [0.0]
    limiter = wa.RateLimiter(rate=2, burst=3, clock=lambda: now[0])
    assert [limiter.allow("a") for _ in range(4)] == [True, True, True, False]
    assert limiter.allow("b")  # another source has its own bucket
    now[0] = 0.5
    assert limiter.allow("a") and not limiter.allow("a")

"""secretferry.reconcile.rendering.fairness: who gets a freed slot (the order is the test, no timing)."""

from __future__ import annotations

import asyncio

import pytest

from secretferry.reconcile.rendering import fairness


async def order_served(slots: int, arrivals: list[str]) -> list[str]:
    """Everyone in ``arrivals`` asks at once; each holds its slot until the test lets it go."""
    fair = fairness.FairSlots(slots)
    served: list[str] = []
    held: dict[str, int] = {}
    peak: dict[str, int] = {}
    gates: list[asyncio.Event] = []

    async def one(tenant: str) -> None:
        await fair.acquire(tenant)
        served.append(tenant)
        held[tenant] = held.get(tenant, 0) + 1
        peak[tenant] = max(peak.get(tenant, 0), held[tenant])
        gate = asyncio.Event()
        gates.append(gate)
        await gate.wait()
        held[tenant] -= 1
        fair.release(tenant)

    tasks = [asyncio.create_task(one(t)) for t in arrivals]
    while len(served) < len(arrivals):
        await asyncio.sleep(0)
        for gate in gates:
            gate.set()
    await asyncio.gather(*tasks)
    assert max(peak.values()) <= max(1, slots - 1), "a tenant held every slot"
    return served


@pytest.mark.parametrize(
    ("slots", "arrivals", "served"),
    [
        (1, ["a", "a", "a", "b"], ["a", "b", "a", "a"]),
        (1, ["a", "a", "a", "b", "c", "b"], ["a", "b", "c", "a", "b", "a"]),
        (1, ["a", "b", "c"], ["a", "b", "c"]),
        # Two slots: a tenant holds one at most, the other stays for everyone else.
        (2, ["a", "a", "a", "a", "b"], ["a", "b", "a", "a", "a"]),
        (3, ["a", "a", "a", "b", "b", "c"], ["a", "a", "b", "c", "a", "b"]),
    ],
)
async def test_a_freed_slot_goes_to_the_tenant_served_least_recently(
    slots: int, arrivals: list[str], served: list[str]
) -> None:
    assert await order_served(slots, arrivals) == served


async def test_a_cancelled_waiter_gives_up_its_place() -> None:
    fair = fairness.FairSlots(1)
    await fair.acquire("a")
    waiter = asyncio.create_task(fair.acquire("b"))
    await asyncio.sleep(0)
    assert fair.waiting == 1
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert fair.waiting == 0
    fair.release("a")
    await asyncio.wait_for(fair.acquire("c"), 1)  # the slot came back


async def test_a_slot_granted_to_a_cancelled_waiter_is_passed_on() -> None:
    fair = fairness.FairSlots(1)
    await fair.acquire("a")
    first = asyncio.create_task(fair.acquire("b"))
    second = asyncio.create_task(fair.acquire("c"))
    await asyncio.sleep(0)
    fair.release("a")  # granted to b ...
    first.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second, 1)


def test_at_least_one_slot() -> None:
    with pytest.raises(ValueError):
        fairness.FairSlots(0)


async def test_with_two_slots_one_tenant_leaves_one_free() -> None:
    fair = fairness.FairSlots(2)
    await fair.acquire("nasty")
    blocked = asyncio.create_task(fair.acquire("nasty"))
    await asyncio.sleep(0)
    assert not blocked.done(), "a tenant may not hold both slots"
    await asyncio.wait_for(fair.acquire("canary"), 1)  # at once: the second slot was kept
    fair.release("canary")
    assert not blocked.done()
    fair.release("nasty")
    await asyncio.wait_for(blocked, 1)


# --- the reconcile queue's shares and turns (scheduler.py) ---------------------------------------


@pytest.mark.parametrize(
    ("workers", "contending", "share"),
    [(32, 0, 32), (32, 1, 32), (32, 2, 16), (32, 3, 11), (32, 32, 1), (32, 1000, 1), (1, 5, 1)],
)
def test_a_share_is_the_workers_over_the_namespaces_with_work_queued_rounded_up(
    workers: int, contending: int, share: int
) -> None:
    shares = fairness.Shares(workers)
    for n in range(contending):
        shares.queued(f"ns{n}", live=False)
    assert shares.share(live=False) == share
    assert shares.share(live=True) == workers  # none of them has live work queued


def test_the_live_share_counts_only_namespaces_with_live_work_queued() -> None:
    shares = fairness.Shares(32)
    for n in range(1000):  # a resync backlog over a thousand namespaces
        shares.queued(f"ns{n}", live=False)
    shares.queued("ns0", live=True)
    assert shares.share(live=False) == 1
    assert shares.share(live=True) == 32  # ns0's live burst may use every worker, as before
    shares.queued("ns1", live=True)
    assert shares.share(live=True) == 16


def test_namespaces_with_only_work_in_flight_do_not_shrink_the_share() -> None:
    shares = fairness.Shares(8)
    shares.queued("a", live=True)
    shares.queued("b", live=True)
    assert shares.share(live=True) == 4
    shares.dequeued("b", live=True)
    shares.started("b")
    assert shares.share(live=True) == 8  # b asks for nothing more
    for _ in range(7):
        shares.started("a")
    assert shares.may_start("a", live=True)
    shares.started("a")
    assert not shares.may_start("a", live=True)
    assert not shares.runnable_live()  # a's queued live key waits whatever a free worker does
    shares.finished("a")
    assert shares.runnable_live()


def test_round_robin_takes_turns_skips_capped_tenants_and_drops_stale_keys() -> None:
    rr: fairness.RoundRobin[str] = fairness.RoundRobin()
    for key in ["a1", "a2", "a3", "b1", "b2", "c1"]:
        rr.append(key[0], key)
    stale = {"a2"}
    capped = {"c"}

    def pop() -> str | None:
        return rr.pop(may_take=lambda t: t not in capped, current=lambda k: k not in stale)

    assert [pop(), pop(), pop(), pop()] == ["a1", "b1", "a3", "b2"]
    assert pop() is None  # only c's key is left, and c is capped
    capped.clear()
    assert pop() == "c1"
    assert pop() is None

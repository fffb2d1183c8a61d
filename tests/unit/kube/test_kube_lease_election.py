"""Leader election judged on observed time (kube/leases.py), on virtual loop time (``looptime``).

Candidates elect with an in-memory Lease store that enforces resourceVersion (lease_fakes.py);
timings are the defaults: lease 15 s, renew deadline 10 s, retry period 2 s. Named apart from
tests/integration/kube/test_kube_leases.py: test modules share one namespace.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta

import pytest
from lease_fakes import T0, TIMINGS, Candidate, LeaseStore

pytestmark = pytest.mark.looptime

LEASE = TIMINGS.lease_duration_seconds
RETRY = TIMINGS.retry_period_seconds
HOUR = 3600.0


@pytest.fixture
async def store() -> LeaseStore:
    return LeaseStore()


@pytest.fixture
async def candidates(store: LeaseStore) -> AsyncIterator[Callable[..., Candidate]]:
    made: list[Candidate] = []

    def make(identity: str, *, skew_seconds: float = 0.0) -> Candidate:
        made.append(Candidate(store, identity, skew_seconds=skew_seconds))
        return made[-1].run()

    yield make
    for candidate in made:
        await candidate.crash()


async def _leader_and_standby(
    candidates: Callable[..., Candidate], *, skew_seconds: float = 0.0, then_seconds: float = 30.0
) -> tuple[Candidate, Candidate]:
    """``a`` starts alone and leads; a second later ``b`` (clock off by ``skew_seconds``) starts as
    its standby; both run for ``then_seconds`` more."""
    a = candidates("a")
    await asyncio.sleep(1)
    b = candidates("b", skew_seconds=skew_seconds)
    await asyncio.sleep(then_seconds)
    return a, b


async def test_the_first_candidate_creates_the_lease_and_renews_it_without_reading(
    store: LeaseStore, candidates: Callable[..., Candidate]
) -> None:
    a = candidates("a")
    await asyncio.sleep(30)
    assert a.started_at is not None and a.started_at < 1
    assert store.spec["holderIdentity"] == "a"
    assert store.spec["leaseDurationSeconds"] == LEASE
    assert store.spec["leaseTransitions"] == 0
    reads = [c for c in store.calls if c.method == "GET" and c.at > 1]
    writes = [c for c in store.calls if c.method == "PUT"]
    assert not reads  # it renews the Lease it last wrote: one request per renewal
    assert 13 <= len(writes) <= 15  # every 2 s


@pytest.mark.parametrize("skew_seconds", [HOUR, -HOUR])
async def test_a_standby_with_a_skewed_clock_does_not_take_over_a_renewing_leader(
    store: LeaseStore, candidates: Callable[..., Candidate], skew_seconds: float
) -> None:
    # b's clock is an hour off: judged by wall time, a's renewTime would look an hour old (or new)
    a, b = await _leader_and_standby(candidates, skew_seconds=skew_seconds, then_seconds=300)
    assert b.started_at is None
    assert a.stopped_at is None
    assert store.spec["holderIdentity"] == "a"
    assert store.spec["leaseTransitions"] == 0
    assert not any(c.who == "b" and c.method in ("POST", "PUT") for c in store.calls)


@pytest.mark.parametrize("skew_seconds", [HOUR, 0.0, -HOUR])
async def test_a_standby_takes_over_a_lease_duration_after_the_last_renewal_on_its_own_clock(
    store: LeaseStore, candidates: Callable[..., Candidate], skew_seconds: float
) -> None:
    a, b = await _leader_and_standby(candidates, skew_seconds=skew_seconds)
    await a.crash()
    last_renewal = store.last_write("a")
    await asyncio.sleep(60)
    assert b.started_at is not None
    waited = b.started_at - last_renewal
    # never before the lease ran out; at most one poll to see the last renewal and one to act
    assert LEASE <= waited <= LEASE + 2 * RETRY + 0.1
    assert store.spec["holderIdentity"] == "b"
    assert store.spec["leaseTransitions"] == 1
    # what it wrote is its own wall clock, for people; no decision read it
    acquired = datetime.fromisoformat(store.spec["acquireTime"].replace("Z", "+00:00"))
    expected = T0 + timedelta(seconds=b.started_at + skew_seconds)
    assert abs((acquired - expected).total_seconds()) < 0.1


async def test_two_standbys_racing_for_an_expired_lease_one_wins(
    store: LeaseStore, candidates: Callable[..., Candidate]
) -> None:
    a = candidates("a")
    await asyncio.sleep(1)
    b, c = candidates("b"), candidates("c")  # in step: they read and write at the same instants
    await asyncio.sleep(30)
    await a.crash()
    await asyncio.sleep(60)
    leaders = [x for x in (b, c) if x.started_at is not None]
    assert len(leaders) == 1
    winner = leaders[0].identity
    loser = "c" if winner == "b" else "b"
    assert store.spec["holderIdentity"] == winner
    assert store.spec["leaseTransitions"] == 1
    assert [x.status for x in store.calls if x.who == loser and x.method == "PUT"] == [409]


async def test_two_candidates_creating_the_lease_one_wins(
    store: LeaseStore, candidates: Callable[..., Candidate]
) -> None:
    a, b = candidates("a"), candidates("b")
    await asyncio.sleep(60)
    assert [x.started_at is not None for x in (a, b)].count(True) == 1
    assert sorted(x.status for x in store.calls if x.method == "POST") == [200, 409]


@pytest.mark.parametrize("failure", ["refused", "hangs"])
async def test_a_leader_that_cannot_renew_steps_down_before_a_standby_may_take_over(
    store: LeaseStore, candidates: Callable[..., Candidate], failure: str
) -> None:
    a, b = await _leader_and_standby(candidates)
    a.line.mode = failure  # a is cut off from the apiserver; b still reaches it
    await asyncio.sleep(60)
    last_renewal = store.last_write("a")
    assert a.stopped_at is not None and b.started_at is not None
    # a's deadline counts from the start of its last good renewal, which is before the write
    assert a.stopped_at <= last_renewal + TIMINGS.renew_deadline_seconds
    assert b.started_at >= last_renewal + LEASE
    assert b.started_at - a.stopped_at >= LEASE - TIMINGS.renew_deadline_seconds - 0.1
    assert a.task is not None and a.task.done() and not a.elector.leading


async def test_a_leader_that_sees_another_holder_steps_down_at_once(
    store: LeaseStore, candidates: Callable[..., Candidate]
) -> None:
    a = candidates("a")
    await asyncio.sleep(10)
    assert store.lease is not None  # someone (an admin) hands the Lease to another holder
    store.lease["spec"]["holderIdentity"] = "z"
    store.lease["metadata"]["resourceVersion"] = "999"
    taken = asyncio.get_running_loop().time()
    await asyncio.sleep(10)
    assert a.stopped_at is not None and a.stopped_at - taken <= RETRY + 0.1
    assert store.spec["holderIdentity"] == "z"


async def test_a_leader_whose_lease_is_deleted_creates_it_again_and_keeps_leading(
    store: LeaseStore, candidates: Callable[..., Candidate]
) -> None:
    a = candidates("a")
    await asyncio.sleep(10)
    store.lease = None  # someone deletes the Lease (kubectl delete lease)
    await asyncio.sleep(30)
    assert a.stopped_at is None and a.elector.leading
    assert store.spec["holderIdentity"] == "a"
    recreated = [c for c in store.calls if c.method == "POST" and c.at > 10 and c.status == 200]
    assert len(recreated) == 1 and recreated[0].at <= 10 + RETRY + 0.1


async def test_a_released_lease_is_taken_at_once(
    store: LeaseStore, candidates: Callable[..., Candidate]
) -> None:
    a, b = await _leader_and_standby(candidates)
    await a.crash()  # its work stopped (the shutdown), then:
    assert await a.elector.release()
    released = asyncio.get_running_loop().time()
    assert "holderIdentity" not in store.spec
    assert store.spec["leaseDurationSeconds"] == 1
    await asyncio.sleep(10)
    assert b.started_at is not None and b.started_at - released <= RETRY + 0.1
    assert store.spec["holderIdentity"] == "b"
    assert store.spec["leaseTransitions"] == 1


async def test_only_the_holder_releases(store: LeaseStore, candidates: Callable[..., Candidate]) -> None:
    a, b = await _leader_and_standby(candidates, then_seconds=5)
    assert not await b.elector.release()
    assert store.spec["holderIdentity"] == "a"
    assert a.stopped_at is None


async def test_a_release_that_gets_no_answer_gives_up_in_time(
    store: LeaseStore, candidates: Callable[..., Candidate]
) -> None:
    a = candidates("a")
    await asyncio.sleep(5)
    await a.crash()
    a.line.mode = "hangs"
    before = asyncio.get_running_loop().time()
    assert not await a.elector.release()
    assert asyncio.get_running_loop().time() - before <= TIMINGS.renew_deadline_seconds + 0.1


async def test_a_leader_whose_start_fails_steps_down(store: LeaseStore) -> None:
    a = Candidate(store, "a")
    stopped: list[float] = []

    async def start() -> None:
        raise RuntimeError("the controller did not start")

    async def stop() -> None:
        stopped.append(asyncio.get_running_loop().time())

    # nothing would renew the Lease while the controller's tasks might run on: step down at once
    await a.elector.run(on_started_leading=start, on_stopped_leading=stop)
    assert stopped and stopped[0] < 1
    assert not a.elector.leading


ADDRESS = "secretferry.io/webhook-address"


async def test_what_the_holder_advertises_is_seen_by_standbys_and_goes_with_the_lease(
    store: LeaseStore,
) -> None:
    """The webhook receiver's address rides on the Lease: a standby reads the holder's (never its
    own), a release removes it, and a new holder's replaces the old one's."""
    a = Candidate(store, "a", annotations={ADDRESS: "10.0.0.1:8082"}).run()
    await asyncio.sleep(1)
    b = Candidate(store, "b", annotations={ADDRESS: "10.0.0.2:8082"}).run()
    await asyncio.sleep(5)
    assert store.lease is not None and store.lease["metadata"]["annotations"] == {ADDRESS: "10.0.0.1:8082"}
    assert b.elector.holder_annotation(ADDRESS) == "10.0.0.1:8082"
    assert a.elector.holder_annotation(ADDRESS) is None  # the leader relays to nobody, itself least
    await a.crash()
    assert await a.elector.release()
    assert ADDRESS not in (store.lease["metadata"].get("annotations") or {})
    await asyncio.sleep(3 * RETRY)  # b takes the released Lease
    assert b.started_at is not None
    assert store.lease["metadata"]["annotations"] == {ADDRESS: "10.0.0.2:8082"}
    assert b.elector.holder_annotation(ADDRESS) is None
    await b.crash()

"""The reconcile work queue, on virtual loop time (``looptime``): waits cost no wall time and the
scheduler's clock is the loop's, so delays are asserted exactly."""

from __future__ import annotations

import asyncio

import pytest

from secretferry.reconcile import scheduler
from secretferry.reconcile.scheduler import Scheduler

pytestmark = pytest.mark.looptime


async def test_live_work_runs_before_the_backlog() -> None:
    order: list[str] = []

    async def work(key: str) -> None:
        order.append(key)

    s: Scheduler[str] = Scheduler(work, workers=1)
    for i in range(5):
        s.enqueue(f"b{i}", live=False)
    s.enqueue("live", live=True)
    s.start()
    await s.idle()
    await s.stop()
    assert order[0] == "live"
    assert sorted(order) == ["b0", "b1", "b2", "b3", "b4", "live"]


async def test_duplicates_are_coalesced_and_backlog_is_promoted() -> None:
    order: list[str] = []

    async def work(key: str) -> None:
        order.append(key)

    s: Scheduler[str] = Scheduler(work, workers=1)
    s.enqueue("a", live=False)
    s.enqueue("b", live=False)
    s.enqueue("b", live=True)  # promoted
    s.enqueue("a", live=False)  # duplicate
    s.start()
    await s.idle()
    await s.stop()
    assert order == ["b", "a"]


async def test_a_key_never_runs_twice_at_once_and_reruns_when_dirty() -> None:
    running = 0
    peak = 0
    runs = 0
    gate = asyncio.Event()

    async def work(key: str) -> None:
        nonlocal running, peak, runs
        running += 1
        peak = max(peak, running)
        runs += 1
        if runs == 1:
            await gate.wait()
        running -= 1

    s: Scheduler[str] = Scheduler(work, workers=4)
    s.start()
    s.enqueue("k")
    await asyncio.sleep(0.01)
    s.enqueue("k")  # arrives while running: marks dirty
    s.enqueue("k")
    gate.set()
    await s.idle()
    await s.stop()
    assert peak == 1
    assert runs == 2


async def test_delayed_retry_runs_when_due_and_forget_drops_it() -> None:
    loop = asyncio.get_running_loop()
    done: list[tuple[str, float]] = []

    async def work(key: str) -> None:
        done.append((key, loop.time()))

    s: Scheduler[str] = Scheduler(work, workers=2, clock=loop.time)
    s.start()
    start = loop.time()
    s.enqueue_after("later", 0.05)
    s.enqueue_after("dropped", 0.05)
    s.forget("dropped")
    await asyncio.sleep(0.049)
    assert done == []
    await asyncio.sleep(1)
    await s.stop()
    assert done == [("later", pytest.approx(start + 0.05))]


async def test_a_crashing_work_item_is_retried_later_not_lost() -> None:
    loop = asyncio.get_running_loop()
    calls: list[float] = []

    async def work(key: str) -> None:
        calls.append(loop.time())
        raise RuntimeError("boom")

    s: Scheduler[str] = Scheduler(work, workers=1, clock=loop.time)
    s.start()
    start = loop.time()
    s.enqueue("k")
    await asyncio.sleep(4.9)
    assert calls == [start]  # not hot-looping
    await asyncio.sleep(0.2)
    await s.stop()
    assert calls == [start, pytest.approx(start + 5.0)]  # retried slowly, not lost


async def test_backlog_waits_until_opened_while_live_work_runs() -> None:
    order: list[str] = []

    async def work(key: str) -> None:
        order.append(key)

    s: Scheduler[str] = Scheduler(work, workers=2)
    s.enqueue("old-1", live=False)
    s.enqueue("old-2", live=False)
    s.start(backlog=False)
    s.enqueue("new", live=True)
    await asyncio.sleep(0.05)
    assert order == ["new"]  # the backlog stays queued, not lost
    assert s.pending == 2
    s.enqueue("old-1", live=True)  # promoted to live: runs now
    await asyncio.sleep(0.05)
    assert order == ["new", "old-1"]
    s.open_backlog()
    await s.idle()
    await s.stop()
    assert order == ["new", "old-1", "old-2"]


async def test_jobs_that_step_aside_let_the_other_live_work_finish_first() -> None:
    order: list[str] = []
    s: Scheduler[str] = Scheduler(lambda key: _write_then_status(s, order, key), workers=3)
    for key in "abcd":
        s.enqueue(key, live=True)
    s.start()
    await s.idle()
    await s.stop()
    writes = [x for x in order if x.startswith("w:")]
    assert sorted(writes) == ["w:a", "w:b", "w:c", "w:d"]
    assert order[:4] == writes  # every write before any status
    assert sorted(order[4:]) == ["s:a", "s:b", "s:c", "s:d"]


async def _write_then_status(s: Scheduler[str], order: list[str], key: str) -> None:
    order.append(f"w:{key}")
    await asyncio.sleep(0.01)
    await s.step_aside(max_wait_seconds=5.0)
    order.append(f"s:{key}")


async def test_at_most_a_bounded_number_of_jobs_step_aside() -> None:
    order: list[str] = []
    s: Scheduler[str] = Scheduler(lambda key: _write_then_status(s, order, key), workers=1)
    keys = [f"k{i}" for i in range(scheduler.ASIDE_PER_WORKER + 2)]
    for key in keys:
        s.enqueue(key, live=True)
    s.start()
    await s.idle()
    await s.stop()
    # k0..k3 wait; the stand-in's k4 cannot step aside too (bound reached) and finishes at once
    bound = scheduler.ASIDE_PER_WORKER
    assert order.index(f"s:{keys[bound]}") < order.index("s:k0")
    assert order.index(f"w:{keys[bound + 1]}") > order.index(f"s:{keys[bound]}")
    assert len(order) == 2 * len(keys)


async def test_stepping_aside_waits_at_most_the_limit() -> None:
    order: list[str] = []
    gate = asyncio.Event()

    async def work(key: str) -> None:
        if key == "slow":
            order.append("w:slow")
            await gate.wait()  # live work that does not end by itself
            return
        order.append(f"w:{key}")
        await s.step_aside(max_wait_seconds=0.1)
        order.append(f"s:{key}")

    loop = asyncio.get_running_loop()
    s: Scheduler[str] = Scheduler(work, workers=2)
    s.enqueue("slow", live=True)
    s.enqueue("a", live=True)
    start = loop.time()
    s.start()
    await asyncio.sleep(0.099)
    assert "s:a" not in order  # still waiting for the slow live work
    await asyncio.sleep(0.002)
    assert "s:a" in order and not gate.is_set()  # the limit, not the slow work, ended the wait
    assert loop.time() - start == pytest.approx(0.101)
    gate.set()
    await s.idle()
    await s.stop()


async def test_stepping_aside_outside_a_job_or_alone_returns_at_once() -> None:
    loop = asyncio.get_running_loop()
    s: Scheduler[str] = Scheduler(lambda key: asyncio.sleep(0), workers=1)
    start = loop.time()
    await s.step_aside(max_wait_seconds=30.0)
    assert loop.time() == start
    order: list[str] = []
    s2: Scheduler[str] = Scheduler(lambda key: _write_then_status(s2, order, key), workers=2)
    s2.enqueue("only", live=True)
    s2.start()
    await s2.idle()
    await s2.stop()
    assert order == ["w:only", "s:only"]
    assert loop.time() - start < 1.0  # no other live work: no waiting for the 30 s limit


async def test_first_backlog_work_runs_after_live_before_the_rest_and_is_not_held_back() -> None:
    order: list[str] = []

    async def work(key: str) -> None:
        order.append(key)

    s: Scheduler[str] = Scheduler(work, workers=1)
    s.enqueue("synced-1", live=False)
    s.enqueue("unsynced-1", live=False, first=True)
    s.enqueue("synced-2", live=False)
    s.enqueue("unsynced-2", live=False, first=True)
    s.enqueue("changed", live=True)
    s.start(backlog=False)
    await asyncio.sleep(0.05)
    assert order == ["changed", "unsynced-1", "unsynced-2"]
    s.open_backlog()
    await s.idle()
    await s.stop()
    assert order[3:] == ["synced-1", "synced-2"]


async def test_a_stopped_queue_starts_no_worker_again() -> None:
    """The start-up task may reach ``start`` after the controller stopped the queue: nothing runs."""
    ran: list[str] = []

    async def job(key: str) -> None:
        ran.append(key)

    s: scheduler.Scheduler[str] = scheduler.Scheduler(job, workers=2)
    await s.stop()
    s.start()
    s.enqueue("a", live=True)
    for _ in range(20):
        await asyncio.sleep(0)
    assert ran == []
    await s.stop()

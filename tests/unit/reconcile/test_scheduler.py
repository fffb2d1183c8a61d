from __future__ import annotations

import asyncio

from secretferry.reconcile.scheduler import Scheduler


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


async def test_delayed_retry_and_forget() -> None:
    done: list[str] = []

    async def work(key: str) -> None:
        done.append(key)

    s: Scheduler[str] = Scheduler(work, workers=2)
    s.start()
    s.enqueue_after("later", 0.05)
    s.enqueue_after("dropped", 0.05)
    s.forget("dropped")
    await asyncio.sleep(0.02)
    assert done == []
    await asyncio.sleep(0.1)
    await s.idle()
    await s.stop()
    assert done == ["later"]


async def test_a_crashing_work_item_is_retried_later_not_lost() -> None:
    calls = 0

    async def work(key: str) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("boom")

    s: Scheduler[str] = Scheduler(work, workers=1)
    s.start()
    s.enqueue("k")
    await asyncio.sleep(0.05)
    await s.stop()
    assert calls == 1
    assert "k" in s._delayed_due  # queued for a slow retry


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

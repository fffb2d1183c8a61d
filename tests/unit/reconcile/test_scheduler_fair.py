"""Fair slots in the reconcile queue (scheduler.py with fairness.py), on virtual loop time
(``looptime``): a render that takes a second costs no wall time, and start times are exact.

Keys are ``"namespace/name"``; the tenant is the namespace, as the controller's is.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from secretferry.reconcile.rendering import fairness
from secretferry.reconcile.scheduler import Scheduler

pytestmark = pytest.mark.looptime

RENDER_SECONDS = 1.0  # a bomb's CPU limit: what each render costs its namespace's template worker


def namespace(key: str) -> str:
    return key.split("/", 1)[0]


class Bombs:
    """Work that, for ``bombs/*`` keys, waits for one template worker (FairSlots of one, as a
    namespace's share of the render pool) and renders for a second; other keys are instant.
    Records when each key started and finished, and how many jobs held a slot at once."""

    def __init__(self, *, off_slot: bool = True) -> None:
        self.renderer = fairness.FairSlots(1)
        self.off_slot = off_slot
        self.started: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        self.on_slot = 0
        self.peak_on_slot = 0
        self.s: Scheduler[str] | None = None

    async def work(self, key: str) -> None:
        assert self.s is not None
        loop = asyncio.get_running_loop()
        self.started[key] = loop.time()
        self._slot(+1)
        if namespace(key) == "bombs":
            if self.off_slot:
                self._slot(-1)
                async with self.s.off_slot():
                    await self._render(key)
                self._slot(+1)
            else:
                await self._render(key)
        await asyncio.sleep(0.001)  # the write and status patch after the render
        self._slot(-1)
        self.finished[key] = loop.time()

    async def _render(self, key: str) -> None:
        await self.renderer.acquire(namespace(key))
        try:
            await asyncio.sleep(RENDER_SECONDS)
        finally:
            self.renderer.release(namespace(key))

    def _slot(self, n: int) -> None:
        self.on_slot += n
        self.peak_on_slot = max(self.peak_on_slot, self.on_slot)


@pytest.mark.parametrize("bombs", [40, 200])
async def test_a_canary_in_another_namespace_starts_at_once_while_bombs_wait_for_a_render(bombs: int) -> None:
    loop = asyncio.get_running_loop()
    w = Bombs()
    s = w.s = Scheduler(w.work, workers=32, tenant=namespace)
    for n in range(bombs):
        s.enqueue(f"bombs/b{n}", live=True)
    s.start()
    await asyncio.sleep(5.5)  # five renders done; the rest wait for the namespace's one worker
    assert len(w.finished) == 5
    asked = loop.time()
    s.enqueue("canary/plain", live=True)
    await asyncio.sleep(0.01)
    assert w.started["canary/plain"] == asked  # no wait for a slot at all
    assert w.finished["canary/plain"] == pytest.approx(asked + 0.001)
    assert len(w.finished) == 6  # the bombs still wait for their renders
    assert w.peak_on_slot <= 32
    await s.stop()


async def test_without_off_slot_the_same_bombs_hold_every_slot_and_the_canary_waits() -> None:
    """The control: what the test above guards against (the issue's measurement, in miniature)."""
    loop = asyncio.get_running_loop()
    w = Bombs(off_slot=False)
    s = w.s = Scheduler(w.work, workers=32, tenant=namespace)
    for n in range(40):
        s.enqueue(f"bombs/b{n}", live=True)
    s.start()
    await asyncio.sleep(5.5)
    asked = loop.time()
    s.enqueue("canary/plain", live=True)
    await asyncio.sleep(2.0)
    # Every slot holds a bomb waiting for a render: the canary waits for one to end.
    assert w.started["canary/plain"] == pytest.approx(asked + 0.5 + 0.001)
    await s.stop()


async def test_a_job_back_from_off_slot_takes_a_slot_before_queued_keys_and_the_pool_stays_bounded() -> None:
    w = Bombs()
    s = w.s = Scheduler(w.work, workers=2, tenant=namespace)
    for n in range(6):
        s.enqueue(f"bombs/b{n}", live=True)
    for n in range(50):
        s.enqueue(f"quiet/q{n}", live=False)  # backlog, each 1 ms on its slot
    s.start()
    await s.idle()
    await s.stop()
    assert len(w.finished) == 56
    assert w.peak_on_slot <= 2  # never more than the workers ran on a slot at once
    # Renders one after another (the namespace's one template worker), each pass ends 1 ms after
    # its render: the job got its slot back at once though 50 backlog keys were queued.
    ends = sorted(w.finished[f"bombs/b{n}"] for n in range(6))
    assert ends == pytest.approx([RENDER_SECONDS * (i + 1) + 0.001 for i in range(6)])
    assert max(w.finished[f"quiet/q{n}"] for n in range(50)) < RENDER_SECONDS  # not behind the renders


async def test_no_namespace_starts_more_than_its_share_while_others_have_work() -> None:
    """Jobs waiting off their slot (for renders) count in their namespace's share: the share is
    what bounds them, as the workers bound jobs on a slot."""
    in_flight: Counter[str] = Counter()
    gates = {"busy": asyncio.Event(), "quiet": asyncio.Event()}

    async def work(key: str) -> None:
        ns = namespace(key)
        in_flight[ns] += 1
        async with s.off_slot():
            await gates[ns].wait()
        in_flight[ns] -= 1

    s: Scheduler[str] = Scheduler(work, workers=8, tenant=namespace)
    for n in range(40):
        s.enqueue(f"busy/k{n}", live=True)
    s.start()
    await asyncio.sleep(0.1)
    assert in_flight["busy"] == 8  # alone, its share is every worker; not all 40 of its keys
    for n in range(20):
        s.enqueue(f"quiet/k{n}", live=True)
    await asyncio.sleep(0.1)
    assert in_flight == {"busy": 8, "quiet": 4}  # two with work queued: 4 each; busy is over
    gates["busy"].set()
    await asyncio.sleep(0.1)
    # busy's keys all ran through; quiet, alone with work queued now, may use every worker
    assert in_flight == {"busy": 0, "quiet": 8}
    gates["quiet"].set()
    await s.idle()
    await s.stop()


@pytest.mark.parametrize(
    ("workers", "namespaces", "share"),
    [(8, 1, 8), (8, 2, 4), (8, 3, 3), (32, 40, 1), (32, 2, 16)],
)
async def test_the_share_is_the_workers_over_the_namespaces_with_work_rounded_up(
    workers: int, namespaces: int, share: int
) -> None:
    in_flight: Counter[str] = Counter()
    gate = asyncio.Event()

    async def work(key: str) -> None:
        in_flight[namespace(key)] += 1
        async with s.off_slot():
            await gate.wait()

    s: Scheduler[str] = Scheduler(work, workers=workers, tenant=namespace)
    for n in range(workers * 2):
        for ns in range(namespaces):
            s.enqueue(f"ns{ns}/k{n}", live=True)
    s.start()
    await asyncio.sleep(0.1)
    assert set(in_flight.values()) == {share}
    assert len(in_flight) == namespaces
    gate.set()  # from here, a namespace whose queue empties leaves its share to the others
    await s.idle()
    await s.stop()


async def test_namespaces_take_turns_within_a_priority_and_keep_their_own_order() -> None:
    order: list[str] = []

    async def work(key: str) -> None:
        order.append(key)

    s: Scheduler[str] = Scheduler(work, workers=1, tenant=namespace)
    for n in range(3):
        s.enqueue(f"a/{n}", live=False)
    s.enqueue("b/0", live=False)
    s.enqueue("a/live", live=True)
    s.enqueue("b/1", live=False)
    s.start()
    await s.idle()
    await s.stop()
    assert order == ["a/live", "a/0", "b/0", "a/1", "b/1", "a/2"]


async def test_a_capped_namespaces_queued_live_work_does_not_hold_a_status_patch_aside() -> None:
    loop = asyncio.get_running_loop()
    gate = asyncio.Event()
    patched: dict[str, float] = {}

    async def work(key: str) -> None:
        if namespace(key) == "busy":
            async with s.off_slot():  # waiting for renders: in flight, on no slot
                await gate.wait()
            return
        await s.step_aside(max_wait_seconds=1.0)
        patched[key] = loop.time()

    s: Scheduler[str] = Scheduler(work, workers=4, tenant=namespace)
    for n in range(10):
        s.enqueue(f"busy/k{n}", live=True)
    s.start()
    await asyncio.sleep(0.1)
    asked = loop.time()
    s.enqueue("canary/c", live=True)  # busy: 4 in flight, over its share of 2; 6 live queued
    await asyncio.sleep(0.01)
    assert patched["canary/c"] == asked  # nothing a free worker could start: no waiting
    gate.set()
    await s.idle()
    await s.stop()


async def test_stopping_while_jobs_wait_off_their_slot_ends_them() -> None:
    w = Bombs()
    s = w.s = Scheduler(w.work, workers=2, tenant=namespace)
    for n in range(10):
        s.enqueue(f"bombs/b{n}", live=True)
    s.start()
    await asyncio.sleep(0.5)
    await asyncio.wait_for(s.stop(), timeout=1.0)
    assert w.finished == {}


async def test_a_live_burst_is_not_held_to_a_share_by_other_namespaces_backlog() -> None:
    """Live work goes ahead of the backlog (the scheduler's first rule): a thousand namespaces'
    resync backlog does not cut one namespace's live burst down to one worker."""
    in_flight: Counter[str] = Counter()
    gate = asyncio.Event()

    async def work(key: str) -> None:
        in_flight[namespace(key)] += 1
        async with s.off_slot():
            await gate.wait()

    s: Scheduler[str] = Scheduler(work, workers=4, tenant=namespace)
    for n in range(1000):
        s.enqueue(f"ns{n}/resync", live=False)
    s.start(backlog=False)
    for n in range(8):
        s.enqueue(f"hot/k{n}", live=True)
    await asyncio.sleep(0.1)
    assert in_flight == {"hot": 4}  # every worker's worth, not 1 of 1001 shares
    gate.set()
    await s.stop()

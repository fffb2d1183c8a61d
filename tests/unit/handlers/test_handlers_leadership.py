"""The leadership wiring in handlers/operator.py: the controller runs only while leading, stops
before the process exits on a step-down, stops once however many ask, and the Lease is released
on shutdown only after the controller stopped. The election itself: tests/unit/kube/."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import kopf
import pydantic
import pytest

from secretferry import settings as settings_mod
from secretferry.handlers import operator
from secretferry.kube import leases

pytestmark = pytest.mark.looptime

STOP_SECONDS = 0.5  # the controller takes a while to stop: long enough for a second caller to arrive


class FakeController:
    def __init__(self, journal: list[str]) -> None:
        self.journal = journal

    async def start(self) -> None:
        self.journal.append("start")

    async def stop(self) -> None:
        self.journal.append("stop begins")
        await asyncio.sleep(STOP_SECONDS)
        self.journal.append("stop ends")

    async def close_receiver(self) -> None:
        """The webhook receiver serves apart from the controller's work (leading or not): closed
        at shutdown, not at a step-down."""
        self.receiver_closed = True


class FakeElector:
    """Leads at once; loses the Lease when ``lose`` is set."""

    def __init__(self, journal: list[str]) -> None:
        self.journal = journal
        self.lose = asyncio.Event()

    async def run(self, *, on_started_leading: Any, on_stopped_leading: Any) -> None:
        await on_started_leading()
        await self.lose.wait()
        await on_stopped_leading()

    async def release(self) -> bool:
        self.journal.append("release")
        return True


class FakeKube:
    def __init__(self, journal: list[str]) -> None:
        self.journal = journal

    async def close(self) -> None:
        self.journal.append("close")


def _memo(journal: list[str], *, release: bool = True) -> tuple[kopf.Memo, FakeElector]:
    memo = kopf.Memo(settings=settings_mod.Settings(leader_release_on_shutdown=release))
    elector = FakeElector(journal)
    memo.controller, memo.elector, memo.kube = FakeController(journal), elector, FakeKube(journal)
    memo.election = asyncio.create_task(
        operator.lead(
            cast(leases.Elector, elector),
            start=memo.controller.start,
            stop=lambda: operator._stop_controller(memo),
            exit_process=lambda: journal.append("exit"),
        )
    )
    return memo, elector


async def _cleanup(memo: kopf.Memo) -> None:
    """kopf's decorator types the handler as kopf calls it, with every keyword; ours uses one."""
    await cast(Any, operator.cleanup)(memo=memo)


async def test_a_step_down_stops_the_controller_then_exits_and_the_shutdown_stops_it_no_more() -> None:
    journal: list[str] = []
    memo, elector = _memo(journal)
    await asyncio.sleep(1)
    assert journal == ["start"]
    elector.lose.set()
    await asyncio.sleep(STOP_SECONDS * 2)
    assert journal == ["start", "stop begins", "stop ends", "exit"]
    await _cleanup(memo)  # what the exit (SIGTERM) leads to
    # the Lease still names us: handed over now that nothing of ours writes any more
    assert journal == ["start", "stop begins", "stop ends", "exit", "release", "close"]


async def test_a_shutdown_during_a_step_down_waits_for_the_same_stop() -> None:
    journal: list[str] = []
    memo, elector = _memo(journal)
    await asyncio.sleep(1)
    elector.lose.set()
    await asyncio.sleep(STOP_SECONDS / 2)
    await _cleanup(memo)  # a SIGTERM from elsewhere, mid-stop
    assert journal == ["start", "stop begins", "stop ends", "release", "close"]


async def test_a_shutdown_while_leading_stops_the_controller_before_releasing_the_lease() -> None:
    journal: list[str] = []
    memo, _ = _memo(journal)
    await asyncio.sleep(1)
    await _cleanup(memo)
    assert journal == ["start", "stop begins", "stop ends", "release", "close"]
    assert memo.election.cancelled()


async def test_an_election_that_fails_while_waiting_exits_the_process() -> None:
    class Broken(FakeElector):
        async def run(self, *, on_started_leading: Any, on_stopped_leading: Any) -> None:
            raise ValueError("a Lease that does not parse")

    journal: list[str] = []
    await operator.lead(
        cast(leases.Elector, Broken(journal)),
        start=FakeController(journal).start,
        stop=FakeController(journal).stop,
        exit_process=lambda: journal.append("exit"),
    )
    assert journal == ["exit"]  # restarted, it is a fresh candidate; never a replica stuck as standby


async def test_by_default_a_shutdown_leaves_the_lease_to_run_out() -> None:
    journal: list[str] = []
    memo, _ = _memo(journal, release=False)
    await asyncio.sleep(1)
    await _cleanup(memo)
    assert journal == ["start", "stop begins", "stop ends", "close"]


def test_the_timings_come_from_the_settings() -> None:
    cfg = settings_mod.Settings(
        leader_lease_duration_seconds=30, leader_renew_deadline_seconds=20, leader_retry_period_seconds=4
    )
    assert operator.leader_timings(cfg) == leases.Timings(
        lease_duration_seconds=30, renew_deadline_seconds=20.0, retry_period_seconds=4.0
    )
    defaults = operator.leader_timings(settings_mod.Settings())
    assert defaults == leases.Timings(
        lease_duration_seconds=15, renew_deadline_seconds=10.0, retry_period_seconds=2.0
    )


@pytest.mark.parametrize(
    ("lease", "renew", "retry"),
    [
        (15, 15, 2),  # the leader would stop only when a standby may already lead
        (15, 20, 2),
        (15, 10, 10),  # no renewal before the deadline
        (15, 10, 12),
    ],
)
def test_misordered_timings_stop_start_up(lease: int, renew: float, retry: float) -> None:
    with pytest.raises(pydantic.ValidationError, match="SECRETFERRY_LEADER_RETRY_PERIOD_SECONDS <"):
        settings_mod.Settings(
            leader_lease_duration_seconds=lease,
            leader_renew_deadline_seconds=renew,
            leader_retry_period_seconds=retry,
        )

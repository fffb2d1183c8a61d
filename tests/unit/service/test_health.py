"""HostHealth: UP → SUSPECT → DOWN, the probe, recovery listeners, host-wide retry-after; and what
the connection reports to it. Injected clock and sleep: no real waiting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from clock_fakes import Clock, Top

from secretferry.service import client, errors, health


class Host:
    """A probe whose outcome the test decides, and a sleep that advances the fake clock."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.answering = False
        self.probes = 0
        self.slept: list[float] = []
        self.health = health.HostHealth(
            "https://s.test/api", probe=self.probe, clock=clock, sleep=self.sleep, rng=Top()
        )
        self.recovered: list[health.HostHealth] = []
        self.health.subscribe(self.recovered.append)

    async def probe(self) -> None:
        self.probes += 1
        if self.answering:
            self.health.answered()
        else:
            self.health.failed(probe=True)
            raise errors.Unavailable("GET /api/status: connection failed")

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.clock.now += seconds
        await asyncio.sleep(0)


async def settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


@pytest.fixture
async def host() -> AsyncIterator[Host]:
    h = Host(Clock())
    yield h
    await h.health.aclose()


async def test_one_failure_is_only_suspect_when_the_probe_gets_an_answer(host: Host) -> None:
    host.answering = True
    host.health.failed()
    assert host.health.state == health.SUSPECT
    await settle()
    assert host.health.state == health.UP and host.probes == 1
    assert host.recovered == [] and host.health.recoveries == 0  # nobody is woken


async def test_down_until_a_probe_answers_then_listeners_hear_once(host: Host) -> None:
    host.health.failed()
    await settle()  # the immediate probe fails too
    assert host.health.is_down
    while host.probes < 6:
        await settle()
    # 0.5 s doubling, capped at 5 s: a host that comes back is noticed within 5 s
    assert host.slept[:5] == [0.5, 1.0, 2.0, 4.0, 5.0]
    host.answering = True
    while host.health.is_down:
        await settle()
    assert host.health.state == health.UP
    assert host.recovered == [host.health] and host.health.recoveries == 1
    probes = host.probes
    await settle()
    assert host.probes == probes  # the prober ended with the outage


async def test_any_answer_ends_an_outage(host: Host) -> None:
    host.health.failed()
    host.health.failed()
    assert host.health.is_down
    host.health.answered()  # a real call got through before the next probe
    assert host.recovered == [host.health]


async def test_retry_after_holds_for_the_host_and_delays_probes(host: Host) -> None:
    host.health.answered(retry_after=30)
    assert not host.health.retry_allowed()
    assert host.health.state == health.UP  # a 429 is an answer, not an outage
    host.health.failed()
    await settle()
    await settle()
    assert host.slept[0] == pytest.approx(30.0)  # no probe before the retry-after is over
    assert host.health.retry_allowed()


async def test_probing_stops_when_nothing_needs_the_host(host: Host) -> None:
    host.health.failed()
    while host.health.probing and host.clock.now < 1000 + health.PROBE_IDLE_SECONDS + 10:
        await settle()
    assert not host.health.probing
    assert host.health.is_down  # still down; the next real failure starts probing again
    host.health.failed()
    assert host.health.probing


class Gateway:
    """``statuses`` answered in order (then 200); ``None`` means the connection is refused."""

    def __init__(self) -> None:
        self.statuses: list[int | None] = []
        self.paths: list[str] = []

    async def handler(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        status = self.statuses.pop(0) if self.statuses else 200
        if status is None:
            raise httpx.ConnectError("refused", request=request)
        if status == 200:
            return httpx.Response(200, json={"id": "p-1", "slug": "shop"})
        headers = {"retry-after": "7"} if status == 429 else {}
        return httpx.Response(status, json={"message": "x", "error": "E"}, headers=headers)


@pytest.mark.parametrize(
    ("status", "state"),
    [
        *[(status, health.SUSPECT) for status in (None, 502, 503, 504)],  # nobody answered
        *[(status, health.UP) for status in (500, 401, 404, 429)],  # an answer, if an unhappy one
    ],
)
async def test_what_the_connection_reports(status: int | None, state: str) -> None:
    gateway = Gateway()
    gateway.statuses = [status, status]  # the call, and the immediate probe
    async with client.ServiceClient(
        "https://s.test", access_token="t", transport=httpx.MockTransport(gateway.handler)
    ) as api:
        with pytest.raises(errors.ServiceError):
            await api.get_project_by_slug("shop")
        assert api.host_health.state == state
        assert api.host_health.retry_allowed() == (status != 429)
        if state == health.SUSPECT:
            await settle()
            assert api.host_health.is_down  # the probe found the same
            assert gateway.paths[-1] == health.PROBE_PATH
            assert (await api.get_project_by_slug("shop")).id == "p-1"
            assert api.host_health.state == health.UP and api.host_health.recoveries == 1

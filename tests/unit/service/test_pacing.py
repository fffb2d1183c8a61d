"""The pacer on virtual time: budgets learned from x-ratelimit-* headers, calls held until the
window resets, live work before routine work, a reserve for live work, and a 429's retry-after.
The last tests run a cold start against the in-process dev server with its self-hosted limits."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from secretferry.devserver.app import create_app
from secretferry.devserver.config import DevServerConfig
from secretferry.service import auth, client, fetcher, pacing, scopes

# Virtual time; a test that would wait forever fails at 1,000 virtual seconds instead.
pytestmark = pytest.mark.looptime(end=1000)

LIST = "GET /api/v3/secrets/raw"


def _headers(limit: int, remaining: int, reset: int) -> dict[str, str]:
    return {
        "x-ratelimit-limit": str(limit),
        "x-ratelimit-remaining": str(remaining),
        "x-ratelimit-reset": str(reset),
    }


async def _granted(pacer: pacing.HostPacer, n: int, *, level: int = pacing.LIVE) -> list[float]:
    """Acquire ``n`` calls concurrently; the loop time each was granted at, in grant order."""
    loop = asyncio.get_running_loop()
    times: list[float] = []

    async def one() -> None:
        await pacer.acquire(LIST, level=level)
        times.append(loop.time())
        pacer.failed(LIST)  # no answer: the call is not out any more, the budget stays spent

    await asyncio.gather(*(one() for _ in range(n)))
    return times


async def test_a_route_answered_without_headers_is_never_held() -> None:
    pacer = pacing.HostPacer("h")
    await pacer.acquire(LIST)
    pacer.answered(LIST, status=200, headers={})
    start = asyncio.get_running_loop().time()
    assert await _granted(pacer, 500) == [start] * 500
    assert pacer.budgets() == {}


async def test_the_first_call_goes_alone_until_its_answer_tells_the_budget() -> None:
    pacer = pacing.HostPacer("h")
    await pacer.acquire(LIST)
    second = asyncio.create_task(pacer.acquire(LIST))
    await asyncio.sleep(5)
    assert not second.done()
    pacer.answered(LIST, status=200, headers=_headers(40, 39, 60))
    await asyncio.sleep(0)
    assert second.done()
    assert pacer.budgets() == {LIST: (40, 38)}


async def test_a_spent_window_holds_calls_until_its_reset() -> None:
    loop = asyncio.get_running_loop()
    pacer = pacing.HostPacer("h")
    t0 = loop.time()
    await pacer.acquire(LIST)
    pacer.answered(LIST, status=200, headers=_headers(40, 39, 60))
    times = await _granted(pacer, 60)
    assert times[:39] == [t0] * 39  # the rest of this window at once (live work has no reserve)
    assert all(t >= t0 + 60 for t in times[39:])  # the others in the next window, none before
    assert max(times) < t0 + 63


async def test_routine_work_leaves_the_reserve_to_live_work() -> None:
    pacer = pacing.HostPacer("h")
    t0 = asyncio.get_running_loop().time()
    await pacer.acquire(LIST)
    pacer.answered(LIST, status=200, headers=_headers(40, 39, 60))
    routine = asyncio.create_task(_granted(pacer, 40, level=pacing.ROUTINE))
    await asyncio.sleep(1)
    assert pacer.budgets() == {LIST: (40, 4)}  # 35 routine calls went, 4 kept back (10 %)
    live = await _granted(pacer, 4)
    assert live == [t0 + 1] * 4  # a SecretSync created during the wave is served at once
    assert min((await routine)[35:]) >= t0 + 60


async def test_live_waiters_go_first_when_the_window_resets() -> None:
    pacer = pacing.HostPacer("h")
    await pacer.acquire(LIST)
    pacer.answered(LIST, status=200, headers=_headers(10, 0, 30))
    order: list[str] = []

    async def one(name: str, level: int) -> None:
        await pacer.acquire(LIST, level=level)
        order.append(name)
        pacer.failed(LIST)

    tasks = [asyncio.create_task(one(f"resync-{i}", pacing.ROUTINE)) for i in range(12)]
    await asyncio.sleep(1)
    tasks += [asyncio.create_task(one(f"new-{i}", pacing.LIVE)) for i in range(3)]
    await asyncio.sleep(40)
    assert order[:3] == ["new-0", "new-1", "new-2"]
    assert len(order) == 3 + 10 - 1 - 3  # the window's 10, one kept back from routine work
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_429_empties_the_budget_until_its_retry_after() -> None:
    pacer = pacing.HostPacer("h")
    t0 = asyncio.get_running_loop().time()
    await pacer.acquire(LIST)
    pacer.answered(LIST, status=200, headers=_headers(40, 30, 50))
    await pacer.acquire(LIST)
    # Another client behind the same IP spent the rest: the server refuses.
    pacer.answered(LIST, status=429, headers={**_headers(40, 0, 45), "retry-after": "45"})
    assert (await _granted(pacer, 1))[0] >= t0 + 45
    assert pacer.buckets[LIST].refused == 1


async def test_routes_and_hosts_have_budgets_of_their_own() -> None:
    a, b = pacing.HostPacer("a"), pacing.HostPacer("b")
    login = "POST /api/v1/auth/kubernetes-auth/login"
    await a.acquire(LIST)
    a.answered(LIST, status=200, headers=_headers(1, 0, 60))
    t0 = asyncio.get_running_loop().time()
    await a.acquire(login)  # a login never waits behind list calls
    await b.acquire(LIST)
    assert asyncio.get_running_loop().time() == t0
    assert ("a", LIST, 1, 0) in pacing.budgets()


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    pacer = pacing.HostPacer("h")
    await pacer.acquire(LIST)
    pacer.answered(LIST, status=200, headers=_headers(1, 0, 60))
    waiting = asyncio.create_task(pacer.acquire(LIST))
    await asyncio.sleep(1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert pacer.buckets[LIST].waiters == []


# --- against the dev server's self-hosted limits -------------------------------------------------

PROJECT = "22222222-2222-4222-8222-222222222222"
TOKEN = "reader-token"
SEED: dict[str, Any] = {
    "organizations": [{"id": "org-1", "name": "Org", "slug": "org"}],
    "projects": [
        {
            "id": PROJECT,
            "slug": "proj",
            "environments": [{"slug": "dev", "name": "Dev"}],
            "secrets": [
                {"environment": "dev", "path": f"/s{i}", "key": "K", "value": "v"} for i in range(100)
            ],
        }
    ],
    "identities": [
        {
            "id": "aaaaaaaa-0000-4000-8000-00000000000a",
            "name": "reader",
            "organization": "org",
            "accessTokens": [{"token": TOKEN}],
            "projects": [{"project": "proj", "role": "admin"}],
        }
    ],
}


async def test_a_cold_start_over_100_scopes_meets_no_429_at_40_a_minute() -> None:
    loop = asyncio.get_running_loop()
    epoch = 1_767_225_600.0 - loop.time()
    app = create_app(
        DevServerConfig(
            seed=SEED,
            admin_token="unused",
            v4_secrets=False,
            rate_limits=True,
            clock=lambda: epoch + loop.time(),
        )
    )
    statuses: list[int] = []

    async def record(response: httpx.Response) -> None:
        statuses.append(response.status_code)

    transport = httpx.ASGITransport(app=app)
    async with client.ServiceClient("http://old.test", transport=transport) as api:
        api._conn._http.event_hooks["response"].append(record)
        session = auth.AuthSession(api, auth.StaticTokenCredentials(TOKEN))
        fetch = fetcher.ScopeFetcher(clock=loop.time)
        t0 = loop.time()
        with pacing.priority(pacing.ROUTINE):
            results = await asyncio.gather(
                *(
                    fetch.fetch(scopes.Scope("ns/reader", PROJECT, "dev", f"/s{i}"), session)
                    for i in range(100)
                )
            )
        took = loop.time() - t0
    assert [len(r.secret_list.secrets) for r in results] == [1] * 100
    assert statuses.count(429) == 0
    # 100 lists at 40 a minute, 4 a window kept for live work: the third window.
    assert 120 <= took < 190


async def test_the_metric_shows_the_remaining_budget_per_host_and_route() -> None:
    from prometheus_client import REGISTRY

    from secretferry import metrics  # noqa: F401  # registers the collector

    pacer = pacing.HostPacer("http://metric.test/api")
    await pacer.acquire(LIST)
    pacer.answered(LIST, status=200, headers=_headers(40, 39, 60))
    await pacer.acquire(LIST)
    labels = {"host": "http://metric.test/api", "route": LIST}
    assert REGISTRY.get_sample_value("secretferry_service_rate_limit_remaining", labels) == 38.0
    assert REGISTRY.get_sample_value("secretferry_service_rate_limit", labels) == 40.0


async def test_a_list_call_waiting_for_budget_is_fresh_for_later_readers() -> None:
    """A resync that comes due while the scope's call waits for budget joins that call: its
    answer is dated by the send, after the wait, not by the start of the wait."""
    loop = asyncio.get_running_loop()
    epoch = 1_767_225_600.0 - loop.time()
    app = create_app(
        DevServerConfig(
            seed=SEED,
            admin_token="unused",
            v4_secrets=False,
            rate_limits=True,
            clock=lambda: epoch + loop.time(),
        )
    )
    async with client.ServiceClient("http://old.test", transport=httpx.ASGITransport(app=app)) as api:
        session = auth.AuthSession(api, auth.StaticTokenCredentials(TOKEN))
        fetch = fetcher.ScopeFetcher(clock=loop.time)
        scope = [scopes.Scope("ns/reader", PROJECT, "dev", f"/s{i}") for i in range(41)]
        await asyncio.gather(*(fetch.fetch(s, session) for s in scope[:40]))  # the window is spent
        calls = fetch.calls
        first = asyncio.create_task(fetch.fetch(scope[40], session))
        await asyncio.sleep(10)
        due = loop.time()  # the scope's resync comes due while its call waits for the next window
        again = await fetch.fetch(scope[40], session, not_older_than=due)
        assert (await first) is again and again.fetched_at >= loop.time() - 1 > due
    assert fetch.calls == calls + 1

"""Scope fetcher: single flight, freshness, ETags, backoff, and never losing a good result."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from clock_fakes import Clock, Top

from secretferry import logfields
from secretferry.service import auth, client, errors, fetcher, scopes

BASE = "https://service.test"
SCOPE = scopes.Scope(identity_key="ns/id", project_id="p-1", environment="dev", path="/app")


class FakeList:
    """``GET /api/v4/secrets`` with ETags; ``failures`` are answered first, one per call."""

    def __init__(self) -> None:
        self.version = 1
        self.calls = 0
        self.if_none_match: list[str | None] = []
        self.params: list[httpx.QueryParams] = []
        self.failures: list[httpx.Response] = []
        self.delay = 0.0

    async def handler(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/v4/secrets")
        self.calls += 1
        self.if_none_match.append(request.headers.get("if-none-match"))
        self.params.append(request.url.params)
        await asyncio.sleep(self.delay)
        if self.failures:
            return self.failures.pop(0)
        etag = f'"v{self.version}"'
        if request.headers.get("if-none-match") == etag:
            return httpx.Response(304, headers={"etag": etag})
        body = {"secrets": [{"secretKey": "KEY", "secretValue": f"value-{self.version}"}], "imports": []}
        return httpx.Response(200, json=body, headers={"etag": etag})


def _error(status: int, error: str, headers: dict[str, str] | None = None) -> httpx.Response:
    body = {"reqId": "r", "statusCode": status, "message": "failed", "error": error}
    return httpx.Response(status, json=body, headers=headers)


@pytest.fixture
def service() -> FakeList:
    return FakeList()


@pytest.fixture
async def session(service: FakeList) -> AsyncIterator[auth.AuthSession]:
    async with client.ServiceClient(BASE, transport=httpx.MockTransport(service.handler)) as api:
        yield auth.AuthSession(api, auth.StaticTokenCredentials("static"))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def outcomes() -> list[tuple[scopes.Scope, str]]:
    return []


@pytest.fixture
def fetch(clock: Clock, outcomes: list[tuple[scopes.Scope, str]]) -> fetcher.ScopeFetcher:
    return fetcher.ScopeFetcher(
        clock=clock,
        backoff_initial=1.0,
        backoff_max=60.0,
        on_call=lambda s, o, _endpoint: outcomes.append((s, o)),
        rng=Top(),
    )


@pytest.mark.looptime
async def test_concurrent_fetches_share_one_call(
    fetch: fetcher.ScopeFetcher, session: auth.AuthSession, service: FakeList
) -> None:
    service.delay = 0.02
    results = await asyncio.gather(*(fetch.fetch(SCOPE, session) for _ in range(100)))
    assert service.calls == 1 and fetch.calls == 1
    assert all(r is results[0] for r in results)
    assert results[0].changed and results[0].etag == '"v1"'


async def test_fresh_enough_cache_costs_no_call(
    fetch: fetcher.ScopeFetcher, session: auth.AuthSession, service: FakeList, clock: Clock
) -> None:
    cycle_start = clock.now
    first = await fetch.fetch(SCOPE, session, not_older_than=cycle_start)
    assert first.fetched_at == cycle_start
    clock.now += 5
    for _ in range(100):
        assert await fetch.fetch(SCOPE, session, not_older_than=cycle_start) is first
    assert service.calls == 1 and fetch.cache_hits == 100
    await fetch.fetch(SCOPE, session, not_older_than=clock.now)
    assert service.calls == 2


async def test_conditional_get_and_not_modified(
    fetch: fetcher.ScopeFetcher,
    session: auth.AuthSession,
    service: FakeList,
    clock: Clock,
    outcomes: list[tuple[scopes.Scope, str]],
) -> None:
    first = await fetch.fetch(SCOPE, session)
    clock.now += 10
    second = await fetch.fetch(SCOPE, session)
    assert service.if_none_match == [None, '"v1"']
    assert not second.changed and second.secret_list is first.secret_list
    assert second.fetched_at == clock.now and fetch.not_modified == 1
    service.version = 2
    third = await fetch.fetch(SCOPE, session)
    assert third.changed and third.secret_list.secrets[0].secret_value == "value-2"
    assert [o for _, o in outcomes] == ["changed", "not_modified", "changed"]


async def test_same_content_without_etag_is_unchanged(
    fetch: fetcher.ScopeFetcher, session: auth.AuthSession
) -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"secrets": [{"secretKey": "K", "secretValue": "v"}]})

    async with client.ServiceClient(BASE, transport=httpx.MockTransport(handler)) as api:
        plain = auth.AuthSession(api, auth.StaticTokenCredentials("static"))
        assert (await fetch.fetch(SCOPE, plain)).changed
        assert not (await fetch.fetch(SCOPE, plain)).changed


async def test_force_skips_etag(
    fetch: fetcher.ScopeFetcher, session: auth.AuthSession, service: FakeList
) -> None:
    await fetch.fetch(SCOPE, session)
    result = await fetch.fetch(SCOPE, session, force=True)
    assert service.if_none_match == [None, None] and not result.changed


async def test_query_comes_from_the_scope(
    fetch: fetcher.ScopeFetcher, session: auth.AuthSession, service: FakeList
) -> None:
    scope = scopes.Scope(
        identity_key="i",
        project_id="p-9",
        environment="prod",
        path="a/b/",
        recursive=True,
        include_imports=False,
        tag_slugs=("z", "a"),
        metadata_filter=(("k", "v"),),
    )
    await fetch.fetch(scope, session)
    params = service.params[0]
    assert params["projectId"] == "p-9" and params["environment"] == "prod"
    assert params["secretPath"] == "/a/b" and params["recursive"] == "true"


async def test_failure_backs_off_and_keeps_the_good_result(
    fetch: fetcher.ScopeFetcher,
    session: auth.AuthSession,
    service: FakeList,
    clock: Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = await fetch.fetch(SCOPE, session)
    service.failures = [_error(503, "Unavailable")]
    with pytest.raises(errors.Unavailable):
        await fetch.fetch(SCOPE, session)
    (line,) = [r for r in caplog.records if r.name == fetcher.__name__]
    assert (getattr(line, logfields.IDENTITY), getattr(line, logfields.SCOPE)) == (
        SCOPE.identity_key,
        SCOPE.describe(),
    )
    assert fetch.cached(SCOPE) is good
    retry_at = fetch.next_attempt_at(SCOPE)
    assert retry_at == clock.now + 1.0
    assert isinstance(fetch.last_error(SCOPE), errors.Unavailable)
    # During the backoff: the last error, at once, without a call.
    clock.now = retry_at - 0.001
    with pytest.raises(errors.Unavailable):
        await fetch.fetch(SCOPE, session)
    assert service.calls == 2
    clock.now = retry_at
    result = await fetch.fetch(SCOPE, session)
    assert not result.changed and result.secret_list is good.secret_list
    assert fetch.next_attempt_at(SCOPE) is None and fetch.last_error(SCOPE) is None
    assert fetch.failures == {"Unavailable": 1}


async def test_rate_limit_honours_retry_after(
    fetch: fetcher.ScopeFetcher, session: auth.AuthSession, service: FakeList, clock: Clock
) -> None:
    service.failures = [_error(429, "TooManyRequests", {"retry-after": "120"})]
    with pytest.raises(errors.RateLimited):
        await fetch.fetch(SCOPE, session)
    assert fetch.next_attempt_at(SCOPE) == clock.now + 120
    clock.now += 119
    for _ in range(10):
        with pytest.raises(errors.RateLimited):
            await fetch.fetch(SCOPE, session)
    assert service.calls == 1
    assert fetch.cached(SCOPE) is None
    # force ignores the backoff (an explicit refresh request)
    assert (await fetch.fetch(SCOPE, session, force=True)).changed
    assert service.calls == 2


async def test_backoff_grows_with_consecutive_failures(
    fetch: fetcher.ScopeFetcher, session: auth.AuthSession, service: FakeList, clock: Clock
) -> None:
    service.failures = [_error(500, "InternalServerError")] * 6
    delays = []
    for _ in range(6):
        with pytest.raises(errors.Unavailable):
            await fetch.fetch(SCOPE, session)
        at = fetch.next_attempt_at(SCOPE)
        assert at is not None
        delays.append(at - clock.now)
        clock.now = at
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
    assert fetch.failures["Unavailable"] == 6


@pytest.mark.looptime
async def test_cancelled_caller_does_not_cancel_the_shared_call(
    fetch: fetcher.ScopeFetcher, session: auth.AuthSession, service: FakeList
) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    service.delay = 0.05
    first = asyncio.create_task(fetch.fetch(SCOPE, session))
    second = asyncio.create_task(fetch.fetch(SCOPE, session))
    await asyncio.sleep(0.01)
    first.cancel()
    result = await second
    assert result.changed and service.calls == 1
    assert loop.time() - start == pytest.approx(0.05)  # the one call ran to its end
    with pytest.raises(asyncio.CancelledError):
        await first


@pytest.mark.looptime
async def test_newer_requirement_waits_for_a_fresh_call(
    fetch: fetcher.ScopeFetcher, session: auth.AuthSession, service: FakeList, clock: Clock
) -> None:
    service.delay = 0.03
    early = asyncio.create_task(fetch.fetch(SCOPE, session))
    await asyncio.sleep(0.01)
    clock.now += 1  # an event arrived after that call was sent
    late = await fetch.fetch(SCOPE, session, not_older_than=clock.now)
    assert (await early).fetched_at < late.fetched_at == clock.now
    assert service.calls == 2


async def test_forget_drops_the_cache(
    fetch: fetcher.ScopeFetcher, session: auth.AuthSession, service: FakeList
) -> None:
    await fetch.fetch(SCOPE, session)
    assert len(fetch) == 1
    fetch.forget(SCOPE)
    assert fetch.cached(SCOPE) is None and len(fetch) == 0
    await fetch.fetch(SCOPE, session)
    assert service.if_none_match == [None, None]


@pytest.mark.looptime
async def test_scopes_are_independent(
    fetch: fetcher.ScopeFetcher, session: auth.AuthSession, service: FakeList
) -> None:
    other = scopes.Scope(identity_key="ns/id", project_id="p-1", environment="prod")
    service.delay = 0.01
    await asyncio.gather(fetch.fetch(SCOPE, session), fetch.fetch(other, session))
    assert service.calls == 2


@pytest.mark.parametrize(
    ("failure", "woken"),
    [
        (_error(503, "ServiceUnavailable"), True),
        (_error(429, "TooManyRequests", {"retry-after": "120"}), False),  # its retry-after holds
        (_error(403, "PermissionDenied"), False),  # not the host's fault
    ],
)
async def test_retry_now_ends_the_backoff_of_a_scope_whose_host_was_down(
    fetch: fetcher.ScopeFetcher,
    session: auth.AuthSession,
    service: FakeList,
    clock: Clock,
    failure: httpx.Response,
    woken: bool,
) -> None:
    service.failures = [failure] * 5
    for attempt in range(5):
        clock.now = (attempt and fetch.next_attempt_at(SCOPE)) or clock.now
        with pytest.raises(errors.ServiceError):
            await fetch.fetch(SCOPE, session)
    service.failures = []
    assert fetch.retry_now(SCOPE) is woken
    if woken:
        assert (await fetch.fetch(SCOPE, session)).changed  # at once, not after the 32 s backoff
    else:
        with pytest.raises(errors.ServiceError):
            await fetch.fetch(SCOPE, session)
    assert fetch.retry_now(scopes.Scope("other", "p", "dev", "/")) is False

"""List route per host: a server without the v4 list is listed through v3 raw, detected once.

What switches a host is a 404 for the ROUTE (Fastify's default answer); a 404 for data (the
service's ``NotFound``) is an answer of the v4 list and never does. Every server here is an
``httpx.MockTransport``; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import httpx
import pytest
from clock_fakes import Clock

from secretferry.service import auth, client, errors, fetcher, listroutes, scopes

OLD = "https://old.test"
NEW = "https://new.test"
SCOPE = scopes.Scope(identity_key="ns/a", project_id="p-1", environment="dev", path="/app", recursive=True)
SECRET_VALUE = "s3cr3t-value"


def route_missing(request: httpx.Request) -> httpx.Response:
    """Fastify's default answer for a route it does not have (docs/service-contract.md, "Errors")."""
    body = {
        "message": f"Route {request.method}:{request.url.raw_path.decode()} not found",
        "error": "Not Found",
        "statusCode": 404,
    }
    return httpx.Response(404, json=body)


def data_missing(request: httpx.Request) -> httpx.Response:
    """The service's own 404: the route exists, the folder does not."""
    body = {"reqId": "req-1", "statusCode": 404, "message": "Folder not found", "error": "NotFound"}
    return httpx.Response(404, json=body)


@dataclass
class Server:
    """One host: v4 answers with ``v4`` (a handler) or lists; v3 raw lists unless ``v3`` says else."""

    v4: Callable[[httpx.Request], httpx.Response] | None = None
    v3: Callable[[httpx.Request], httpx.Response] | None = None
    version: int = 1
    requests: list[httpx.Request] = field(default_factory=list)

    def paths(self) -> list[str]:
        return [r.url.path for r in self.requests]

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        special = {"/api/v4/secrets": self.v4, "/api/v3/secrets/raw": self.v3}.get(request.url.path)
        if special is not None:
            return special(request)
        etag = f'"{request.url.path}-{self.version}"'
        if request.headers.get("if-none-match") == etag:
            return httpx.Response(304, headers={"etag": etag})
        body = {"secrets": [{"secretKey": "KEY", "secretValue": SECRET_VALUE}], "imports": []}
        return httpx.Response(200, json=body, headers={"etag": etag})


@pytest.fixture
def calls() -> list[tuple[str, str]]:
    return []


@pytest.fixture
def fetch(calls: list[tuple[str, str]]) -> fetcher.ScopeFetcher:
    return fetcher.ScopeFetcher(
        clock=Clock(), on_call=lambda _s, outcome, endpoint: calls.append((outcome, endpoint))
    )


@pytest.fixture
async def open_session() -> AsyncIterator[Callable[[str, Server], auth.AuthSession]]:
    """A session for an identity on ``host``; each call is a client (pool) of its own, as two
    identities with different CA bundles would have."""
    clients: list[client.ServiceClient] = []

    def make(host: str, server: Server) -> auth.AuthSession:
        async def answer(request: httpx.Request) -> httpx.Response:
            await asyncio.sleep(0)  # a call takes a turn of the loop, as on a network: others run
            return server.handler(request)

        api = client.ServiceClient(host, transport=httpx.MockTransport(answer))
        clients.append(api)
        return auth.AuthSession(api, auth.StaticTokenCredentials(f"token-{len(clients)}"))

    yield make
    for api in clients:
        await api.aclose()


async def test_route_404_switches_to_v3_with_the_same_selection(
    fetch: fetcher.ScopeFetcher,
    open_session: Callable[[str, Server], auth.AuthSession],
    calls: list[tuple[str, str]],
) -> None:
    server = Server(v4=route_missing)
    result = await fetch.fetch(SCOPE, open_session(OLD, server))
    assert server.paths() == ["/api/v4/secrets", "/api/v3/secrets/raw"]
    assert [s.secret_key for s in result.secret_list.secrets] == ["KEY"]
    assert fetch.routes.known(OLD + "/api") == listroutes.V3
    assert calls == [("changed", "GET /api/v3/secrets/raw")]
    v3 = server.requests[1]
    assert list(v3.url.params.multi_items()) == [
        ("workspaceId", "p-1"),
        ("environment", "dev"),
        ("secretPath", "/app"),
        ("viewSecretValue", "true"),
        ("expandSecretReferences", "true"),
        ("recursive", "true"),
        ("include_imports", "true"),
    ]
    assert v3.headers["authorization"] == "Bearer token-1"


async def test_data_404_from_v4_does_not_switch(
    fetch: fetcher.ScopeFetcher, open_session: Callable[[str, Server], auth.AuthSession]
) -> None:
    server = Server(v4=data_missing)
    session = open_session(NEW, server)
    with pytest.raises(errors.NotFound) as caught:
        await fetch.fetch(SCOPE, session)
    assert type(caught.value) is errors.NotFound  # not RouteNotFound
    assert server.paths() == ["/api/v4/secrets"]
    assert fetch.routes.known(NEW + "/api") == listroutes.V4  # the v4 route answered
    other = scopes.Scope(identity_key="ns/a", project_id="p-1", environment="dev", path="/there")
    server.v4 = None
    await fetch.fetch(other, session)
    assert server.paths() == ["/api/v4/secrets"] * 2


async def test_detected_once_per_host(
    fetch: fetcher.ScopeFetcher,
    open_session: Callable[[str, Server], auth.AuthSession],
    caplog: pytest.LogCaptureFixture,
) -> None:
    old, new = Server(v4=route_missing), Server()
    first, second = open_session(OLD, old), open_session(OLD, old)
    elsewhere = open_session(NEW, new)
    caplog.set_level(logging.INFO, logger="secretferry.service.listroutes")
    await fetch.fetch(SCOPE, first)
    assert old.paths() == ["/api/v4/secrets", "/api/v3/secrets/raw"]
    # Another identity on the same host (another pool, another token) goes straight to v3.
    theirs = scopes.Scope(identity_key="ns/b", project_id="p-1", environment="dev", path="/app")
    await fetch.fetch(theirs, second)
    assert old.paths()[2:] == ["/api/v3/secrets/raw"]
    assert old.requests[2].headers["authorization"] == "Bearer token-2"
    # A different host still gets v4.
    mine = scopes.Scope(identity_key="ns/c", project_id="p-1", environment="dev", path="/app")
    await fetch.fetch(mine, elsewhere)
    assert new.paths() == ["/api/v4/secrets"]
    assert fetch.routes.known(NEW + "/api") == listroutes.V4
    lines = [r for r in caplog.records if r.name == "secretferry.service.listroutes"]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING
    assert OLD in lines[0].getMessage() and "/api/v3/secrets/raw" in lines[0].getMessage()


async def test_concurrent_first_calls_log_once(
    fetch: fetcher.ScopeFetcher,
    open_session: Callable[[str, Server], auth.AuthSession],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Server(v4=route_missing)
    sessions = [open_session(OLD, server) for _ in range(5)]
    many = [
        scopes.Scope(identity_key=f"ns/{n}", project_id="p", environment="dev", path=f"/{n}")
        for n in range(20)
    ]
    caplog.set_level(logging.DEBUG)
    await asyncio.gather(*(fetch.fetch(scope, sessions[n % 5]) for n, scope in enumerate(many)))
    lines = [r for r in caplog.records if r.name == "secretferry.service.listroutes"]
    assert len(lines) == 1
    assert SECRET_VALUE not in caplog.text and "token-" not in caplog.text
    # Once known, no more v4 calls: each scope's next list is one v3 call.
    before = len(server.requests)
    await asyncio.gather(*(fetch.fetch(scope, sessions[0], force=True) for scope in many))
    assert server.paths()[before:] == ["/api/v3/secrets/raw"] * 20


async def test_v3_keeps_conditional_gets(
    fetch: fetcher.ScopeFetcher,
    open_session: Callable[[str, Server], auth.AuthSession],
    calls: list[tuple[str, str]],
) -> None:
    server = Server(v4=route_missing)
    session = open_session(OLD, server)
    first = await fetch.fetch(SCOPE, session)
    again = await fetch.fetch(SCOPE, session)
    assert server.requests[-1].headers["if-none-match"] == '"/api/v3/secrets/raw-1"'
    assert not again.changed and again.secret_list is first.secret_list
    assert calls[-1] == ("not_modified", "GET /api/v3/secrets/raw")


async def test_a_server_downgraded_under_us_switches_without_its_v4_etag(
    fetch: fetcher.ScopeFetcher,
    open_session: Callable[[str, Server], auth.AuthSession],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Server()
    session = open_session(OLD, server)
    first = await fetch.fetch(SCOPE, session)
    assert fetch.routes.known(OLD + "/api") == listroutes.V4
    server.v4 = route_missing
    result = await fetch.fetch(SCOPE, session)
    assert server.paths() == ["/api/v4/secrets", "/api/v4/secrets", "/api/v3/secrets/raw"]
    assert "if-none-match" not in server.requests[2].headers  # the v4 ETag names a v4 answer
    assert not result.changed and result.secret_list.secrets == first.secret_list.secrets
    assert fetch.routes.known(OLD + "/api") == listroutes.V3
    assert "no v4 list" in caplog.text


async def test_a_host_with_neither_route_is_not_remembered(
    fetch: fetcher.ScopeFetcher, open_session: Callable[[str, Server], auth.AuthSession]
) -> None:
    server = Server(v4=route_missing, v3=route_missing)
    session = open_session(OLD, server)
    with pytest.raises(errors.RouteNotFound):
        await fetch.fetch(SCOPE, session)
    assert fetch.routes.known(OLD + "/api") is None
    assert fetch.routes.path_for(OLD + "/api") == listroutes.V4


@pytest.mark.parametrize(
    ("v3", "remembered"),
    [
        (data_missing, listroutes.V3),  # the v3 route answered: it exists
        (lambda _r: httpx.Response(503, json={"message": "down"}), None),  # nobody answered
    ],
)
async def test_a_failing_fallback_is_remembered_only_when_v3_answered(
    fetch: fetcher.ScopeFetcher,
    open_session: Callable[[str, Server], auth.AuthSession],
    v3: Callable[[httpx.Request], httpx.Response],
    remembered: str | None,
) -> None:
    server = Server(v4=route_missing, v3=v3)
    with pytest.raises(errors.ServiceError):
        await fetch.fetch(SCOPE, open_session(OLD, server))
    assert fetch.routes.known(OLD + "/api") == remembered


async def test_a_host_that_loses_its_v3_route_is_asked_v4_again(
    fetch: fetcher.ScopeFetcher, open_session: Callable[[str, Server], auth.AuthSession]
) -> None:
    server = Server(v4=route_missing)
    session = open_session(OLD, server)
    await fetch.fetch(SCOPE, session)
    server.v4, server.v3 = None, route_missing  # upgraded under us, v3 gone
    with pytest.raises(errors.RouteNotFound):
        await fetch.fetch(SCOPE, session, force=True)
    assert fetch.routes.known(OLD + "/api") is None
    result = await fetch.fetch(SCOPE, session, force=True)
    assert server.paths()[-1] == "/api/v4/secrets" and not result.changed
    assert fetch.routes.known(OLD + "/api") == listroutes.V4


async def test_concurrent_first_calls_send_one_v4_probe_per_host(
    fetch: fetcher.ScopeFetcher, open_session: Callable[[str, Server], auth.AuthSession]
) -> None:
    """Issue 21: 12 scopes at start-up sent 12 v4 probes to one old server; now one, then v3."""
    old, new = Server(v4=route_missing), Server()
    at_old = [open_session(OLD, old) for _ in range(3)]
    at_new = open_session(NEW, new)
    many = [scopes.Scope(f"ns/{n}", "p", "dev", f"/{n}") for n in range(12)]
    await asyncio.gather(
        *(fetch.fetch(scope, at_old[n % 3]) for n, scope in enumerate(many)),
        *(fetch.fetch(scopes.Scope("ns/x", "p", "dev", f"/x{n}"), at_new) for n in range(3)),
    )
    assert old.paths().count("/api/v4/secrets") == 1
    assert old.paths().count("/api/v3/secrets/raw") == 12
    assert new.paths() == ["/api/v4/secrets"] * 3  # a host of its own: probed on its own


async def test_waiters_of_a_probe_the_host_did_not_answer_fail_without_calling(
    fetch: fetcher.ScopeFetcher, open_session: Callable[[str, Server], auth.AuthSession]
) -> None:
    def unreachable(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    alone, crowd = Server(v4=unreachable), Server(v4=unreachable)
    await asyncio.gather(
        fetch.fetch(scopes.Scope("ns/0", "p", "dev", "/"), open_session(OLD, alone)), return_exceptions=True
    )
    session = open_session(NEW, crowd)
    many = [scopes.Scope(f"ns/{n}", "p", "dev", f"/{n}") for n in range(6)]
    results = await asyncio.gather(*(fetch.fetch(scope, session) for scope in many), return_exceptions=True)
    assert all(isinstance(r, errors.Unavailable) for r in results)
    # Six scopes cost what one costs (the client's own retries of that one call included).
    assert crowd.paths() == alone.paths() and "/api/v3/secrets/raw" not in crowd.paths()
    assert fetch.routes.known(NEW + "/api") is None


async def test_waiters_of_a_rate_limited_probe_get_its_retry_after(
    fetch: fetcher.ScopeFetcher, open_session: Callable[[str, Server], auth.AuthSession]
) -> None:
    def limited(request: httpx.Request) -> httpx.Response:
        body = {"statusCode": 429, "message": "Rate limit exceeded", "error": "RateLimitExceeded"}
        return httpx.Response(429, json=body, headers={"retry-after": "42"})

    server = Server(v4=limited)
    session = open_session(OLD, server)
    many = [scopes.Scope(f"ns/{n}", "p", "dev", f"/{n}") for n in range(4)]
    results = await asyncio.gather(*(fetch.fetch(scope, session) for scope in many), return_exceptions=True)
    assert all(isinstance(r, errors.RateLimited) and r.retry_after == 42 for r in results)
    assert server.paths().count("/api/v4/secrets") == 1


async def test_a_probe_answer_about_its_own_request_is_not_handed_to_others(
    fetch: fetcher.ScopeFetcher, open_session: Callable[[str, Server], auth.AuthSession]
) -> None:
    """A host with neither route (or a 5xx): the answer may be about the prober's request (a
    Fastify 404 even echoes its query, naming its project and path), which may be another
    tenant's. Each waiter then asks for itself, one probe at a time, and sees only its own text."""
    server = Server(v4=route_missing, v3=route_missing)
    mine, theirs = open_session(OLD, server), open_session(OLD, server)
    a = scopes.Scope("tenant-a/id", "p-a", "dev", "/a-private")
    b = scopes.Scope("tenant-b/id", "p-b", "dev", "/b-private")
    got_a, got_b = await asyncio.gather(fetch.fetch(a, mine), fetch.fetch(b, theirs), return_exceptions=True)
    assert isinstance(got_a, errors.RouteNotFound) and isinstance(got_b, errors.RouteNotFound)
    assert "a-private" in str(got_a) and "b-private" not in str(got_a)
    assert "b-private" in str(got_b) and "a-private" not in str(got_b)
    assert server.paths() == ["/api/v4/secrets", "/api/v3/secrets/raw"] * 2
    assert fetch.routes.known(OLD + "/api") is None

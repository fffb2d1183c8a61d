"""Rate limits of the self-hosted profile: per route and client IP, the real numbers, a fixed
window per key (``@fastify/rate-limit``), the headers and the 429 body of that server."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from clock_fakes import Clock
from devserver_fixtures import ADMIN_API, PROJECT, VIEWER
from fastapi import FastAPI

from secretferry.devserver import cli, ratelimit

RAW = "/api/v3/secrets/raw"
LIST = {"workspaceId": PROJECT, "environment": "dev"}


def _client(app: FastAPI, ip: str = "10.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(ip, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://dev")


async def _list(client: httpx.AsyncClient) -> httpx.Response:
    return await client.get(RAW, params=LIST, headers=VIEWER)


async def test_the_41st_list_in_a_minute_is_refused_like_the_real_server(
    make_app: Callable[..., FastAPI], clock: Clock
) -> None:
    async with _client(make_app(rate_limits=True)) as client:
        first = await _list(client)
        assert first.status_code == 200
        assert first.headers["x-ratelimit-limit"] == "40"
        assert first.headers["x-ratelimit-remaining"] == "39"
        assert first.headers["x-ratelimit-reset"] == "60"
        for _ in range(38):
            await _list(client)
        clock.now += 20.5
        last = await _list(client)
        assert (last.status_code, last.headers["x-ratelimit-remaining"]) == (200, "0")
        refused = await _list(client)
    assert refused.status_code == 429
    assert refused.json() == {
        "statusCode": 429,
        "message": "Rate limit exceeded. Please try again in 1 minute",
        "error": "RateLimitExceeded",
    }
    # 39.5 s of the window are left: whole seconds, rounded up.
    assert refused.headers["retry-after"] == "40" == refused.headers["x-ratelimit-reset"]
    assert (refused.headers["x-ratelimit-limit"], refused.headers["x-ratelimit-remaining"]) == ("40", "0")


async def test_the_window_is_fixed_from_the_first_request_and_refusals_do_not_extend_it(
    make_app: Callable[..., FastAPI], clock: Clock
) -> None:
    async with _client(make_app(rate_limits=True)) as client:
        for _ in range(40):
            await _list(client)
        for _ in range(5):  # hammering while refused
            clock.now += 10
            assert (await _list(client)).status_code == 429
        clock.now += 9.9
        assert (await _list(client)).headers["retry-after"] == "1"
        clock.now += 0.1  # 60 s after the first request: a new window
        fresh = await _list(client)
    assert fresh.status_code == 200 and fresh.headers["x-ratelimit-remaining"] == "39"


async def test_each_route_and_each_client_ip_counts_alone(
    make_app: Callable[..., FastAPI],
) -> None:
    app = make_app(rate_limits=True)
    async with _client(app) as one, _client(app, "10.0.0.2") as two:
        for _ in range(40):
            await _list(one)
        assert (await _list(one)).status_code == 429
        assert (await _list(two)).status_code == 200
        by_name = await one.get(f"{RAW}/A", params=LIST, headers=VIEWER)
        folders = await one.get("/api/v2/folders", params=LIST, headers=VIEWER)
    assert by_name.status_code == 200 and by_name.headers["x-ratelimit-remaining"] == "39"
    assert folders.headers["x-ratelimit-limit"] == "60"


@pytest.mark.parametrize(
    ("method", "template", "limit"),
    [
        ("GET", "/api/v3/secrets/raw", 40),
        ("GET", "/api/v4/secrets", 40),
        ("POST", "/api/v3/secrets/raw/{secretName}", 40),
        ("POST", "/api/v2/folders", 40),
        ("GET", "/api/v2/folders", 60),
        ("GET", "/api/v2/workspace/{slug}", 60),
        ("POST", "/api/v1/auth/kubernetes-auth/login", 200),
        ("POST", "/api/v1/auth/token/renew", 200),
        ("PATCH", "/api/v1/additional-privilege/identity", 200),
    ],
)
def test_route_classes_have_the_numbers_of_that_server(method: str, template: str, limit: int) -> None:
    assert ratelimit.LIMITS[ratelimit.route_class(method, template)] == limit


async def test_logins_have_their_own_budget_and_status_and_admin_are_never_limited(
    make_app: Callable[..., FastAPI],
) -> None:
    async with _client(make_app(rate_limits=True)) as client:
        for _ in range(41):
            await _list(client)
        login = await client.post(
            "/api/v1/auth/universal-auth/login", json={"clientId": "cid", "clientSecret": "csecret"}
        )
        status = await client.get("/api/status")
        stats = await client.get("/_admin/stats", headers=ADMIN_API)
    assert login.status_code == 200 and login.headers["x-ratelimit-limit"] == "200"
    assert "x-ratelimit-limit" not in status.headers and "x-ratelimit-limit" not in stats.headers
    assert stats.json()["statuses"][f"GET {RAW} 429"] == 1


async def test_limits_are_off_by_default_and_unknown_routes_are_a_plain_404(
    make_app: Callable[..., FastAPI],
) -> None:
    async with _client(make_app()) as client:
        answer = await _list(client)
    assert answer.status_code == 200 and "x-ratelimit-limit" not in answer.headers
    async with _client(make_app(rate_limits=True)) as client:
        missing = await client.get("/api/v9/nothing", headers=VIEWER)
    assert missing.status_code == 404 and "x-ratelimit-limit" not in missing.headers


def _config(*argv: str) -> cli.DevServerConfig:
    return cli.config_from(cli.parser().parse_args(list(argv)))


def test_the_selfhosted_profile_has_them_on_and_a_flag_turns_them_off() -> None:
    assert _config().rate_limits is False
    assert _config("--profile", "selfhosted-2024-10").rate_limits is True
    assert _config("--profile", "selfhosted-2024-10", "--rate-limits", "off").rate_limits is False
    assert _config("--rate-limits", "on").rate_limits is True

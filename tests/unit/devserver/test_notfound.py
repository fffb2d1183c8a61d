"""Unknown routes answer like the real server's Fastify, and ``--no-v4`` makes v4 secrets unknown."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from devserver_fixtures import ADMIN, PROJECT
from fastapi import FastAPI

from secretferry.devserver import cli, notfound

V4 = "/api/v4/secrets"
V4_ROUTES = [
    ("GET", V4),
    ("DELETE", f"{V4}/batch"),
    ("POST", f"{V4}/NEW"),
    ("PATCH", f"{V4}/A"),
    ("DELETE", f"{V4}/A"),
    ("GET", f"{V4}/A"),
]


def bare(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dev")


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("GET", "/api/v9/nothing"),
        ("GET", "/api/v9/nothing?a=1&b=x%20y"),
        ("DELETE", "/api/status"),  # a known path with another method: Fastify has no 405
        ("POST", "/api/v4/secrets"),
        ("GET", "/"),
    ],
)
async def test_an_unknown_route_gets_fastifys_default_404(
    client: httpx.AsyncClient, method: str, url: str
) -> None:
    r = await client.request(method, url, headers=ADMIN)
    assert r.status_code == 404
    # Byte for byte, keys in Fastify's order, the target as sent (query and escapes kept).
    assert r.text == f'{{"message":"Route {method}:{url} not found","error":"Not Found","statusCode":404}}'


async def test_a_missing_thing_is_not_a_missing_route(client: httpx.AsyncClient) -> None:
    """A client tells them apart by the body: a data 404 has ``reqId`` and the service's error name."""
    r = await client.get(
        f"{V4}", params={"projectId": "no-such-project", "environment": "dev"}, headers=ADMIN
    )
    assert r.status_code == 404 and "reqId" in r.json() and r.json()["error"] != notfound.FASTIFY_ERROR


@pytest.mark.parametrize(("method", "path"), V4_ROUTES)
async def test_no_v4_makes_every_v4_secrets_route_unknown(
    make_app: Callable[..., FastAPI], method: str, path: str
) -> None:
    async with bare(make_app(v4_secrets=False)) as c:
        r = await c.request(
            method, path, params={"projectId": PROJECT, "environment": "dev"}, json={}, headers=ADMIN
        )
    url = f"{path}?projectId={PROJECT}&environment=dev"
    assert r.status_code == 404
    assert r.json() == {"message": f"Route {method}:{url} not found", "error": "Not Found", "statusCode": 404}


async def test_no_v4_leaves_v3_and_the_rest(make_app: Callable[..., FastAPI]) -> None:
    async with bare(make_app(v4_secrets=False)) as c:
        v3 = await c.get(
            "/api/v3/secrets/raw", params={"workspaceId": PROJECT, "environment": "dev"}, headers=ADMIN
        )
        assert v3.status_code == 200
        assert (await c.get("/api/status")).status_code == 200
    # Module routers are shared by every app of the process: the next app still has v4.
    async with bare(make_app()) as c:
        r = await c.get(V4, params={"projectId": PROJECT, "environment": "dev"}, headers=ADMIN)
        assert r.status_code == 200


@pytest.mark.parametrize(("argv", "expected"), [([], True), (["--no-v4"], False)])
def test_no_v4_flag(argv: list[str], expected: bool) -> None:
    args = cli.parser().parse_args(argv)
    assert cli.config_from(args).v4_secrets is expected

"""Every route of the app is guarded: service routes by an access token, ``/_admin`` by the admin token.

The route list comes from the app itself, so a route added without its guard fails here; the few
public routes are listed explicitly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import httpx
import pytest
from devserver_fixtures import ADMIN, ADMIN_API, ADMIN_API_TOKEN, T0
from fastapi import FastAPI, routing
from starlette.routing import Route

from secretferry.devserver.app import create_app
from secretferry.devserver.config import DevServerConfig

ADMIN_PREFIX = "/_admin"

# Routes the real service (or, for health, our own probes) answers without a token.
PUBLIC = {
    ("POST", "/api/v1/auth/universal-auth/login"),
    ("POST", "/api/v1/auth/kubernetes-auth/login"),
    ("POST", "/api/v1/auth/oidc-auth/login"),
    ("POST", "/api/v1/auth/jwt-auth/login"),
    ("POST", "/api/v1/auth/token/renew"),  # the token to renew is the body's credential
    ("POST", "/api/v1/auth/token/revoke"),  # likewise
    # Liveness of the service itself: the real route has no auth hook, and Infisical's operator
    # (and ours, while a host is not answering) probes it with no token.
    ("GET", "/api/status"),
    ("GET", "/_admin/health"),  # liveness only: answers a constant
}


def _routes() -> list[tuple[str, str]]:
    """(method, path template) of every route, from an app built the way ``create_app`` builds it."""
    app = create_app(DevServerConfig(admin_token=ADMIN_API_TOKEN, clock=lambda: T0))
    found: set[tuple[str, str]] = set()
    # Flattened through included routers, with their prefixes applied (as FastAPI's OpenAPI does).
    for context in routing.iter_route_contexts(app.routes):
        route = context.original_route
        # Anything that is not a plain HTTP route (a mount, a websocket) needs its own guard test.
        assert isinstance(route, Route), f"unexpected route type {type(route).__name__}: {route}"
        assert context.path and context.methods, route
        found.update((method, context.path) for method in context.methods)
    return sorted(found)


ROUTES = _routes()
SERVICE = [r for r in ROUTES if r not in PUBLIC and not r[1].startswith(ADMIN_PREFIX)]
ADMIN_ROUTES = [r for r in ROUTES if r not in PUBLIC and r[1].startswith(ADMIN_PREFIX)]


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x", path)


def _ids(routes: list[tuple[str, str]]) -> list[str]:
    return [f"{method} {path}" for method, path in routes]


Headers = Mapping[str, str] | Mapping[bytes, bytes]


def _bare(app: FastAPI, headers: Headers | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://dev", headers=headers or {}
    )


def test_the_route_list_is_complete() -> None:
    """The allow-list names only routes that exist, and the lists cover the known surface."""
    assert set(ROUTES) >= PUBLIC
    assert ("GET", "/api/v1/dynamic-secrets/{name}") in SERVICE
    assert {("GET", "/_admin/docs"), ("GET", "/_admin/openapi.json"), ("POST", "/_admin/tokens")} <= set(
        ADMIN_ROUTES
    )
    assert not [path for _, path in ROUTES if path in ("/docs", "/openapi.json", "/redoc")]


@pytest.mark.parametrize(("method", "path"), SERVICE, ids=_ids(SERVICE))
@pytest.mark.parametrize(
    ("headers", "token_error_status", "status", "error"),
    [
        ({}, 401, 401, "UnauthorizedError"),
        ({}, 403, 401, "UnauthorizedError"),  # a missing token is 401 on every server generation
        ({"Authorization": "Bearer not-issued"}, 401, 401, "UnauthorizedError"),
        ({"Authorization": "Bearer not-issued"}, 403, 403, "TokenError"),
        ({"Authorization": "Basic YTpi"}, 401, 401, "UnauthorizedError"),
        (ADMIN_API, 401, 401, "UnauthorizedError"),  # the admin token is no access token
    ],
    ids=["missing", "missing-403-server", "unknown", "unknown-403-server", "not-bearer", "admin-token"],
)
async def test_service_route_refuses_without_a_valid_token(
    make_app: Callable[..., FastAPI],
    method: str,
    path: str,
    headers: dict[str, str],
    token_error_status: int,
    status: int,
    error: str,
) -> None:
    async with _bare(make_app(token_error_status=token_error_status), headers) as c:
        r = await c.request(method, _concrete(path))
    assert r.status_code == status
    if method != "HEAD":
        assert r.json()["error"] == error


@pytest.mark.parametrize(("method", "path"), ADMIN_ROUTES, ids=_ids(ADMIN_ROUTES))
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Admin-Token": "wrong"},
        {"X-Admin-Token": ADMIN_API_TOKEN + "x"},
        {b"X-Admin-Token": "é".encode()},  # a non-ASCII header must not break the comparison
        ADMIN,
    ],
    ids=["missing", "wrong", "prefix", "non-ascii", "access-token"],
)
async def test_admin_route_refuses_without_the_admin_token(
    make_app: Callable[..., FastAPI], method: str, path: str, headers: Headers
) -> None:
    async with _bare(make_app(), headers) as c:
        r = await c.request(method, _concrete(path))
    assert r.status_code == 401
    if method != "HEAD":
        assert r.json()["error"] == "UnauthorizedError"


@pytest.mark.parametrize(("method", "path"), ADMIN_ROUTES, ids=_ids(ADMIN_ROUTES))
async def test_admin_route_passes_the_guard_with_the_admin_token(
    make_app: Callable[..., FastAPI], method: str, path: str
) -> None:
    """Past the guard (a route may still refuse the empty request it gets here, but not with 401)."""
    async with _bare(make_app(), ADMIN_API) as c:
        r = await c.request(method, _concrete(path))
    assert r.status_code != 401


async def test_admin_docs_and_openapi_with_the_admin_token(make_app: Callable[..., FastAPI]) -> None:
    async with _bare(make_app(), ADMIN_API) as c:
        spec = await c.get("/_admin/openapi.json")
        assert spec.status_code == 200 and "/_admin/tokens" in spec.json()["paths"]
        assert "X-Admin-Token" in str(spec.json()["components"]["securitySchemes"])
        docs = await c.get("/_admin/docs")
        assert docs.status_code == 200 and "swagger-ui" in docs.text and "/_admin/tokens" in docs.text


async def test_health_is_public_and_reveals_nothing(make_app: Callable[..., FastAPI]) -> None:
    async with _bare(make_app()) as c:
        r = await c.get("/_admin/health")
    assert r.status_code == 200 and r.json() == {"status": "ok"}

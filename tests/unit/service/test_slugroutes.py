"""Project slugs per host: v1, or ``/api/v2/workspace/{slug}`` where v1 is a missing route.

Issue 21: on self-hosted 2024-10 ``GET /api/v1/projects/slug/…`` is Fastify's 404 and every
``projectSlug`` showed ``SourceNotFound``. The in-process dev server speaks both generations.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from secretferry.devserver import profiles
from secretferry.devserver.app import create_app
from secretferry.devserver.config import DevServerConfig
from secretferry.service import auth, client, errors, scopes, slugroutes

PROJECT = "44444444-4444-4444-8444-444444444444"
TOKEN = "reader-token"
SEED: dict[str, Any] = {
    "organizations": [{"id": "org-1", "name": "Org", "slug": "org"}],
    "projects": [{"id": PROJECT, "slug": "proj", "environments": [{"slug": "dev", "name": "Dev"}]}],
    "identities": [
        {
            "id": "aaaaaaaa-0000-4000-8000-00000000000b",
            "name": "reader",
            "organization": "org",
            "accessTokens": [{"token": TOKEN}],
            "projects": [{"project": "proj", "role": "viewer"}],
        }
    ],
}


class Counted(httpx.AsyncBaseTransport):
    """An ASGI transport that records the paths it was asked for."""

    def __init__(self, profile: str) -> None:
        config = DevServerConfig(seed=SEED, admin_token="unused", **profiles.overrides(profile))
        self.inner = httpx.ASGITransport(app=create_app(config))
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return await self.inner.handle_async_request(request)


@pytest.fixture
async def open_session() -> AsyncIterator[Callable[[str, Counted], auth.AuthSession]]:
    clients: list[client.ServiceClient] = []

    def make(host: str, transport: Counted) -> auth.AuthSession:
        api = client.ServiceClient(host, transport=transport)
        clients.append(api)
        return auth.AuthSession(api, auth.StaticTokenCredentials(TOKEN))

    yield make
    for api in clients:
        await api.aclose()


def _slug_paths(transport: Counted) -> list[str]:
    return [p for p in transport.paths if p != "/api/status"]


async def test_selfhosted_resolves_slugs_under_v2_once_v1_proved_missing(
    open_session: Callable[[str, Counted], auth.AuthSession], caplog: pytest.LogCaptureFixture
) -> None:
    server = Counted("selfhosted-2024-10")
    cache = scopes.SlugCache()
    caplog.set_level(logging.INFO, logger="secretferry.service.slugroutes")
    assert await cache.resolve("ns/a", "proj", open_session("http://old.test", server)) == PROJECT
    assert _slug_paths(server) == ["/api/v1/projects/slug/proj", "/api/v2/workspace/proj"]
    assert cache.routes.known("http://old.test/api") == slugroutes.V2
    # Another identity on that host: straight to v2; a missing project is a data 404, not a route.
    with pytest.raises(errors.NotFound) as missing:
        await cache.resolve("ns/b", "nope", open_session("http://old.test", server))
    assert not isinstance(missing.value, errors.RouteNotFound)
    assert _slug_paths(server)[2:] == ["/api/v2/workspace/nope"]
    lines = [r for r in caplog.records if r.name == "secretferry.service.slugroutes"]
    assert len(lines) == 1 and "/api/v2/workspace/{slug}" in lines[0].getMessage()


async def test_newest_keeps_v1(open_session: Callable[[str, Counted], auth.AuthSession]) -> None:
    server = Counted("newest")
    cache = scopes.SlugCache()
    assert await cache.resolve("ns/a", "proj", open_session("http://new.test", server)) == PROJECT
    with pytest.raises(errors.NotFound):
        await cache.resolve("ns/a", "nope", open_session("http://new.test", server))
    assert _slug_paths(server) == ["/api/v1/projects/slug/proj", "/api/v1/projects/slug/nope"]
    assert cache.routes.known("http://new.test/api") == slugroutes.V1


async def test_a_host_with_neither_slug_route_is_not_remembered() -> None:
    def route_missing(request: httpx.Request) -> httpx.Response:
        message = f"Route GET:{request.url.raw_path.decode()} not found"
        return httpx.Response(404, json={"message": message, "error": "Not Found", "statusCode": 404})

    routes = slugroutes.SlugRoutes()
    transport = httpx.MockTransport(route_missing)
    async with client.ServiceClient("http://odd.test", transport=transport, access_token=TOKEN) as api:
        with pytest.raises(errors.RouteNotFound):
            await routes.project(api, "proj")
    assert routes.known("http://odd.test/api") is None

"""In-process dev server fixtures: an ASGI client for request/response tests, a live uvicorn for streams."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import uvicorn
from devserver_fixtures import ADMIN_API, ADMIN_API_TOKEN, SEED, T0
from fastapi import FastAPI

from secretferry.devserver.app import create_app
from secretferry.devserver.config import DevServerConfig
from secretferry.devserver.testing import free_port


class FakeClock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_app(clock: FakeClock) -> Callable[..., FastAPI]:
    def build(**overrides: Any) -> FastAPI:
        seed = overrides.pop("seed", copy.deepcopy(SEED))
        overrides.setdefault("admin_token", ADMIN_API_TOKEN)
        return create_app(DevServerConfig(seed=seed, clock=clock, **overrides))

    return build


@pytest.fixture
async def client(make_app: Callable[..., FastAPI]) -> AsyncIterator[httpx.AsyncClient]:
    """Sends the admin token on every request (service routes ignore it; tests of the guards use
    a client without it)."""
    app = make_app()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dev", headers=ADMIN_API) as c:
        c.app = app  # type: ignore[attr-defined]
        yield c


@contextlib.asynccontextmanager
async def live(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """Serve ``app`` with uvicorn on a loopback port in this event loop (streams need real sockets).

    The client sends the admin token of ``make_app`` on every request.
    """
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn exposes no event for "listening"
        await asyncio.sleep(0.01)
    try:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", timeout=10.0, limits=limits, headers=ADMIN_API
        ) as c:
            yield c
    finally:
        server.should_exit = True
        server.force_exit = True
        await task

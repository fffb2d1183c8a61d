"""In-process dev server fixtures: an ASGI client for request/response tests, and apps served wholly
on the event loop for tests on virtual time (streams are read with ``asgi_stream``; no sockets)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import inloop
import pytest
from clock_fakes import Clock
from devserver_fixtures import ADMIN_API, ADMIN_API_TOKEN, SEED, T0
from fastapi import FastAPI

from secretferry.devserver.app import create_app
from secretferry.devserver.config import DevServerConfig


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def make_app(clock: Clock) -> Callable[..., FastAPI]:
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


@pytest.fixture
def make_loop_app(
    make_app: Callable[..., FastAPI], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., FastAPI]]:
    """``make_app`` for tests on ``looptime``: every request served on the loop (see ``inloop``)."""
    hops = inloop.record_thread_hops(monkeypatch)
    yield lambda **overrides: inloop.serve_in_loop(make_app(**overrides))
    assert not hops, f"served in a worker thread, where virtual time cannot follow it: {hops}"


@pytest.fixture
async def loop_client(make_loop_app: Callable[..., FastAPI]) -> AsyncIterator[httpx.AsyncClient]:
    """``client`` for tests on ``looptime``: its app serves every request on the loop."""
    transport = httpx.ASGITransport(app=make_loop_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://dev", headers=ADMIN_API) as c:
        yield c

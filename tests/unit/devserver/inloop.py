"""The dev server with every request served on the event loop itself, for tests on virtual time.

FastAPI runs a plain ``def`` dependency in a worker thread, and ``looptime`` cannot see threads:
when the loop has nothing else to run and the thread is slow to hand back its result, the fake
clock jumps to the next timer (a heartbeat, a read guard) — measured at about one request in two
thousand, a test that fails now and then. The dev server's sync dependencies are cheap and never
block, so tests on virtual time call the same functions from coroutines (FastAPI's
``dependency_overrides``), and a request that still goes through a thread fails the test instead
of making it flaky.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any

import anyio.to_thread
import pytest
from fastapi import Depends, FastAPI, Request, Security
from fastapi.security import APIKeyHeader

from secretferry.devserver import admin_token, auth, routes_admin
from secretferry.devserver.state import DevState, get_state

# Read as routes_admin reads it: a missing header is None, and require_admin refuses it.
_admin_header = APIKeyHeader(name=admin_token.HEADER, auto_error=False)


async def _get_state(request: Request) -> DevState:
    return get_state(request)


async def _authenticate(request: Request, state: Annotated[DevState, Depends(get_state)]) -> auth.Caller:
    return auth.authenticate(request, state)


async def _require_admin(
    provided: Annotated[str | None, Security(_admin_header)],
    state: Annotated[DevState, Depends(get_state)],
) -> None:
    routes_admin.require_admin(provided, state)


def serve_in_loop(app: FastAPI) -> FastAPI:
    """``app`` with its sync dependencies called on the loop (overrides apply at every depth)."""
    app.dependency_overrides.update(
        {get_state: _get_state, auth.authenticate: _authenticate, routes_admin.require_admin: _require_admin}
    )
    return app


def record_thread_hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the functions Starlette/FastAPI hand to a worker thread from now on (they still run).

    Raising instead would only show as a 500 from the app's catch-all handler; the caller asserts
    the list is empty once the test is done.
    """
    hops: list[str] = []
    run_sync = anyio.to_thread.run_sync

    async def recording(func: Any, *args: Any, **kwargs: Any) -> Any:
        target = func.func if isinstance(func, functools.partial) else func
        hops.append(getattr(target, "__qualname__", repr(target)))
        return await run_sync(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", recording)
    return hops

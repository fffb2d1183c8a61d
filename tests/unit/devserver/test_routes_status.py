"""GET /api/status: public, the real response's fields, the server's clock."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from clock_fakes import Clock
from fastapi import FastAPI


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer not-issued"}], ids=["no-token", "unknown-token"]
)
async def test_status_is_public(make_app: Callable[..., FastAPI], headers: dict[str, str]) -> None:
    """No token is needed or looked at (the real route has no auth hook), even on a 403 server."""
    app = make_app(token_error_status=403)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dev") as c:
        r = await c.get("/api/status", headers=headers)
    assert r.status_code == 200 and r.json()["message"] == "Ok"


async def test_status_fields_and_date(make_app: Callable[..., FastAPI], clock: Clock) -> None:
    clock.now += 1.5
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=make_app()), base_url="http://dev") as c:
        body = (await c.get("/api/status")).json()
    assert body["date"] == "2026-01-01T00:00:01.500Z"
    assert set(body) == {
        "date",
        "message",
        "emailConfigured",
        "inviteOnlySignup",
        "redisConfigured",
        "secretScanningConfigured",
        "auditLogStorageDisabled",
    }

"""POST /api/v1/auth/token/revoke: the body's token is the credential; a revoked token is dead."""

from __future__ import annotations

import httpx
import pytest
from devserver_fixtures import ADMIN, PROJECT

REVOKE = "/api/v1/auth/token/revoke"
LOGIN = "/api/v1/auth/universal-auth/login"


async def test_revoke_kills_the_token_and_nothing_else(client: httpx.AsyncClient) -> None:
    login = await client.post(LOGIN, json={"clientId": "cid", "clientSecret": "csecret"})
    token = login.json()["accessToken"]
    listed = {"projectId": PROJECT, "environment": "dev"}
    assert (
        await client.get("/api/v4/secrets", params=listed, headers={"Authorization": f"Bearer {token}"})
    ).status_code == 200
    r = await client.post(REVOKE, json={"accessToken": token})  # no Authorization header needed
    assert r.status_code == 200 and r.json() == {"message": "Successfully revoked access token"}
    after = await client.get("/api/v4/secrets", params=listed, headers={"Authorization": f"Bearer {token}"})
    assert after.status_code == 401
    renew = await client.post("/api/v1/auth/token/renew", json={"accessToken": token})
    assert renew.status_code == 401
    # The identity's other tokens live on.
    assert (await client.get("/api/v4/secrets", params=listed, headers=ADMIN)).status_code == 200


async def test_revoking_an_unknown_token_is_401(client: httpx.AsyncClient) -> None:
    r = await client.post(REVOKE, json={"accessToken": "never-issued"})
    assert r.status_code == 401 and r.json()["error"] == "UnauthorizedError"


@pytest.mark.parametrize(
    "sent", [{}, {"accessToken": ""}, {"accessToken": 5}], ids=["none", "empty", "number"]
)
async def test_revoke_body_is_validated(client: httpx.AsyncClient, sent: dict[str, object]) -> None:
    r = await client.post(REVOKE, json=sent)
    assert r.status_code == 422 and isinstance(r.json()["message"], list)

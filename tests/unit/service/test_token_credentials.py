"""OIDC and JWT credentials: a fresh token per login, sent to the method's own route, and a 403
refusal (subject or issuer not bound) read as a refused login, not a missing permission."""

from __future__ import annotations

import itertools
import json

import httpx
import pytest

from secretferry.service import client, credentials, errors

BASE = "https://service.example"
ANSWER = {"accessToken": "new-token", "expiresIn": 7200, "accessTokenMaxTTL": 86400, "tokenType": "Bearer"}


@pytest.mark.parametrize(
    ("cls", "route"), [(credentials.OIDCCredentials, "oidc"), (credentials.JWTCredentials, "jwt")]
)
async def test_each_login_mints_and_uses_its_own_route(cls: type, route: str) -> None:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json=ANSWER)

    counter = itertools.count(1)

    async def mint() -> str:
        return f"sa-token-{next(counter)}"

    creds = cls(identity_id="id-1", mint_jwt=mint)
    async with client.ServiceClient(BASE, transport=httpx.MockTransport(answer)) as service:
        await creds.login(service)
        await creds.login(service)
    assert [r.url.path for r in sent] == [f"/api/v1/auth/{route}-auth/login"] * 2
    assert [json.loads(r.content)["jwt"] for r in sent] == ["sa-token-1", "sa-token-2"]
    assert creds.kind == route and "sa-token" not in repr(creds)


@pytest.mark.parametrize("cls", [credentials.OIDCCredentials, credentials.JWTCredentials])
async def test_a_403_at_login_is_a_refused_login(cls: type) -> None:
    body = {
        "statusCode": 403,
        "message": "Access denied: OIDC subject not allowed.",
        "error": "PermissionDenied",
    }

    async def mint() -> str:
        return "sa-token"

    creds = cls(identity_id="id-1", mint_jwt=mint)
    transport = httpx.MockTransport(lambda _r: httpx.Response(403, json=body))
    async with client.ServiceClient(BASE, transport=transport) as service:
        with pytest.raises(errors.AuthenticationError) as info:
            await creds.login(service)
    assert not isinstance(info.value, errors.PermissionDenied)
    assert "subject not allowed" in str(info.value)

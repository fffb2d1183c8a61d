"""Logins, lockout, token lifetime and use limits, renew/revoke, token-error status; fault injection."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable

import httpx
import pytest
from clock_fakes import Clock
from devserver_fixtures import ADMIN, ADMIN_ID, PROJECT, SEED
from fastapi import FastAPI

UA = "/api/v1/auth/universal-auth/login"
LIST = {"projectId": PROJECT, "environment": "dev"}


def asgi(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dev")


async def test_universal_login_ttl_and_renew(client: httpx.AsyncClient, clock: Clock) -> None:
    r = await client.post(UA, json={"clientId": "cid", "clientSecret": "csecret"})
    body = r.json()
    assert body["tokenType"] == "Bearer" and body["expiresIn"] == 100 and body["accessTokenMaxTTL"] == 1000
    bearer = {"Authorization": f"Bearer {body['accessToken']}"}
    assert (await client.get("/api/v4/secrets", params=LIST, headers=bearer)).status_code == 200
    clock.now += 90
    renewed = await client.post("/api/v1/auth/token/renew", json={"accessToken": body["accessToken"]})
    assert renewed.status_code == 200
    clock.now += 90  # 180 s after login, 90 s after renewal: still valid
    assert (await client.get("/api/v4/secrets", params=LIST, headers=bearer)).status_code == 200
    clock.now += 20
    expired = await client.get("/api/v4/secrets", params=LIST, headers=bearer)
    assert expired.status_code == 401 and expired.json()["error"] == "UnauthorizedError"
    assert (
        await client.post("/api/v1/auth/token/renew", json={"accessToken": body["accessToken"]})
    ).status_code == 401


async def test_lockout_after_three_failures(client: httpx.AsyncClient, clock: Clock) -> None:
    for _ in range(3):
        assert (await client.post(UA, json={"clientId": "cid", "clientSecret": "bad"})).status_code == 401
    locked = await client.post(UA, json={"clientId": "cid", "clientSecret": "csecret"})
    assert locked.status_code == 401 and "locked" in locked.json()["message"]
    clock.now += 301
    assert (await client.post(UA, json={"clientId": "cid", "clientSecret": "csecret"})).status_code == 200


async def test_use_limit_revoke_and_403_token_error(make_app: Callable[..., FastAPI]) -> None:
    seed = copy.deepcopy(SEED)
    seed["identities"][0]["accessTokens"] = [
        {"token": "admin-token"},
        {"token": "twice", "accessTokenNumUsesLimit": 2},
    ]
    async with asgi(make_app(seed=seed, token_error_status=403)) as c:
        twice = {"Authorization": "Bearer twice"}
        for _ in range(2):
            assert (await c.get("/api/v4/secrets", params=LIST, headers=twice)).status_code == 200
        spent = await c.get("/api/v4/secrets", params=LIST, headers=twice)
        assert spent.status_code == 403 and spent.json()["error"] == "TokenError"
        assert (
            await c.post("/api/v1/auth/token/revoke", json={"accessToken": "admin-token"})
        ).status_code == 200
        assert (await c.get("/api/v4/secrets", params=LIST, headers=ADMIN)).status_code == 403


async def test_admin_expire_tokens_and_guard(make_app: Callable[..., FastAPI]) -> None:
    async with asgi(make_app(admin_token="sesame")) as c:
        assert (await c.post(f"/_admin/identities/{ADMIN_ID}/expire-tokens")).status_code == 401
        r = await c.post(f"/_admin/identities/{ADMIN_ID}/expire-tokens", headers={"X-Admin-Token": "sesame"})
        assert r.json()["expired"] >= 1
        assert (await c.get("/api/v4/secrets", params=LIST, headers=ADMIN)).status_code == 401


async def test_kubernetes_login_without_config_is_404(client: httpx.AsyncClient) -> None:
    r = await client.post("/api/v1/auth/kubernetes-auth/login", json={"identityId": "nobody", "jwt": "x"})
    assert r.status_code == 404


async def test_kubernetes_login_unreachable_host_is_401(client: httpx.AsyncClient) -> None:
    r = await client.post("/api/v1/auth/kubernetes-auth/login", json={"identityId": ADMIN_ID, "jwt": "x"})
    assert r.status_code == 401


@pytest.mark.looptime
async def test_faults_status_retry_after_malformed_latency_and_stats(loop_client: httpx.AsyncClient) -> None:
    faults = {
        "routes": [
            {"match": "GET /api/v4/secrets", "status": 429, "retryAfter": 7, "times": 1},
            {"match": "POST /api/v1/auth/*", "malformed": "json"},
            {"match": "/api/v1/projects/*", "malformed": "content-type"},
            {"match": "GET /api/v1/dynamic-secrets/*", "status": 503, "rate": 0.0, "latencyMs": 5},
        ]
    }
    assert (await loop_client.post("/_admin/faults", json=faults)).status_code == 200
    limited = await loop_client.get("/api/v4/secrets", params=LIST, headers=ADMIN)
    assert limited.status_code == 429 and limited.headers["retry-after"] == "7"
    again = await loop_client.get("/api/v4/secrets", params=LIST, headers=ADMIN)
    assert again.status_code == 200  # times: 1
    broken = await loop_client.post(UA, json={"clientId": "cid", "clientSecret": "csecret"})
    assert broken.status_code == 200 and broken.text.startswith('{"secrets"')
    html = await loop_client.get("/api/v1/projects/slug/proj", headers=ADMIN)
    assert html.headers["content-type"] == "text/html"
    loop = asyncio.get_running_loop()
    started = loop.time()
    ok = await loop_client.get(
        "/api/v1/dynamic-secrets/pg", params={"projectSlug": "proj", "environmentSlug": "dev"}, headers=ADMIN
    )
    assert ok.status_code == 200  # rate 0: never fails
    assert loop.time() - started == pytest.approx(0.005)  # but always 5 ms late (virtual time)
    stats = (await loop_client.get("/_admin/stats")).json()
    assert stats["listSecrets"] == 2 and stats["logins"] == 1
    await loop_client.delete("/_admin/faults")
    login = await loop_client.post(UA, json={"clientId": "cid", "clientSecret": "csecret"})
    assert login.status_code == 200
    await loop_client.post("/_admin/stats/reset")
    assert (await loop_client.get("/_admin/stats")).json()["listSecrets"] == 0


async def test_add_seed_and_admin_secret_writes(client: httpx.AsyncClient) -> None:
    r = await client.post("/_admin/seed", json={"projects": [{"id": "p2", "slug": "p2"}]})
    assert r.json()["applied"]["projects"] == 1
    await client.put(
        "/_admin/secrets",
        json={"projectId": "proj", "environment": "dev", "secretKey": "Z", "secretValue": "z"},
    )
    listed = await client.get("/api/v4/secrets", params=LIST, headers=ADMIN)
    assert "Z" in [s["secretKey"] for s in listed.json()["secrets"]]
    await client.request(
        "DELETE", "/_admin/secrets", json={"projectId": "proj", "environment": "dev", "secretKey": "Z"}
    )
    listed = await client.get("/api/v4/secrets", params=LIST, headers=ADMIN)
    assert "Z" not in [s["secretKey"] for s in listed.json()["secrets"]]


@pytest.mark.parametrize(
    ("elapsed", "renewable"),
    [(0, True), (900, True), (901, False), (990, False)],
    ids=["fresh", "ends-at-max", "one-second-past", "near-max"],
)
async def test_renew_is_refused_when_it_would_pass_the_max_ttl(
    client: httpx.AsyncClient, clock: Clock, elapsed: int, renewable: bool
) -> None:
    """The real server's rule (renewAccessToken): refuse when now + TTL > createdAt + maxTTL (TTL 100,
    max 1000 here), delete the token, and so answer a later revoke 401."""
    token = (await client.post(UA, json={"clientId": "cid", "clientSecret": "csecret"})).json()["accessToken"]
    bearer = {"Authorization": f"Bearer {token}"}
    start = clock.now
    while clock.now + 90 < start + elapsed:  # keep it alive with renewals that still fit
        clock.now += 90
        assert (await client.post("/api/v1/auth/token/renew", json={"accessToken": token})).status_code == 200
    clock.now = start + elapsed
    renewed = await client.post("/api/v1/auth/token/renew", json={"accessToken": token})
    if renewable:
        assert renewed.status_code == 200
        return
    assert renewed.status_code == 401
    assert renewed.json()["message"] == "Failed to renew MI access token past its Max TTL expiration"
    assert (await client.get("/api/v4/secrets", params=LIST, headers=bearer)).status_code == 401
    assert (await client.post("/api/v1/auth/token/revoke", json={"accessToken": token})).status_code == 401


async def test_with_ttl_equal_to_max_ttl_no_renewal_ever_succeeds(
    make_app: Callable[..., FastAPI], clock: Clock
) -> None:
    seed = copy.deepcopy(SEED)
    seed["identities"][0]["universalAuth"]["accessTokenMaxTTL"] = 100
    async with asgi(make_app(seed=seed)) as c:
        token = (await c.post(UA, json={"clientId": "cid", "clientSecret": "csecret"})).json()["accessToken"]
        clock.now += 1
        assert (await c.post("/api/v1/auth/token/renew", json={"accessToken": token})).status_code == 401

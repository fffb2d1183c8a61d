"""Dynamic secret leases on the dev server, against a real throwaway PostgreSQL cluster.

Every credential here is a real role: the tests log in with what a lease returns, see renewal move
the role's ``VALID UNTIL``, see revocation cut an open session and refuse the next login, and see
the database itself refuse a password past its expiry.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from secretferry.devserver import pgcluster, sqlprovider
from secretferry.devserver.testing import DevServer, run_dev_server
from secretferry.devserver.timeutil import iso, parse_iso

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        pgcluster.unavailable_reason() is not None, reason=str(pgcluster.unavailable_reason())
    ),
]
LEASES = "/api/v1/dynamic-secrets/leases"
PROJECT_ID = "33333333-3333-4333-8333-333333333333"
SCOPE = {"projectSlug": "leases", "environmentSlug": "dev", "path": "/db"}


@pytest.fixture(scope="module")
def pg() -> Iterator[pgcluster.PgCluster]:
    with pgcluster.throwaway_cluster() as cluster:
        yield cluster


def seed(pg: pgcluster.PgCluster) -> dict[str, Any]:
    return {
        "projects": [
            {
                "id": PROJECT_ID,
                "slug": "leases",
                "environments": [{"slug": "dev", "name": "Dev"}],
                "folders": [{"environment": "dev", "path": "/other"}],
                "dynamicSecrets": [
                    {
                        "name": "app-db",
                        "environment": "dev",
                        "path": "/db",
                        "type": "sql-database",
                        "defaultTTL": "1m",
                        "maxTTL": "2m",
                        "inputs": pg.inputs(),
                    }
                ],
            }
        ],
        "identities": [
            {
                "id": "leaser",
                "name": "leaser",
                "accessTokens": [{"token": "leaser-token"}],
                "projects": [{"project": "leases", "role": "member"}],
            },
            {
                "id": "viewer",
                "name": "viewer",
                "accessTokens": [{"token": "viewer-token"}],
                "projects": [{"project": "leases", "role": "viewer"}],
            },
        ],
    }


@pytest.fixture(scope="module")
def server(pg: pgcluster.PgCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with run_dev_server(seed=seed(pg), data_dir=tmp_path_factory.mktemp("devserver")) as srv:
        yield srv


def call(server: DevServer, method: str, path: str, token: str = "leaser-token", **kw: Any) -> httpx.Response:
    return httpx.request(
        method, server.base_url + path, headers={"Authorization": f"Bearer {token}"}, timeout=30, **kw
    )


def lease(server: DevServer, **extra: Any) -> dict[str, Any]:
    r = call(server, "POST", LEASES, json={"dynamicSecretName": "app-db", **SCOPE, **extra})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def _connect(pg: pgcluster.PgCluster, data: dict[str, str]) -> asyncpg.Connection:
    return await asyncpg.connect(
        host=pg.host,
        port=pg.port,
        user=data["DB_USERNAME"],
        password=data["DB_PASSWORD"],
        database="postgres",
    )


async def _valid_until(pg: pgcluster.PgCluster, role: str) -> datetime | None:
    conn = await asyncpg.connect(
        host=pg.host, port=pg.port, user=pg.username, password=pg.password, database="postgres"
    )
    try:
        value: datetime | None = await conn.fetchval(
            "SELECT rolvaliduntil FROM pg_roles WHERE rolname = $1", role
        )
        return value
    finally:
        await conn.close()


def test_lease_connects_and_revoke_cuts_it(server: DevServer, pg: pgcluster.PgCluster) -> None:
    body = lease(server)
    assert set(body["data"]) == {"DB_USERNAME", "DB_PASSWORD"}
    assert "inputs" not in body["dynamicSecret"]  # root credentials never leave with a lease
    lease_id = body["lease"]["id"]
    assert body["lease"]["externalEntityId"] == body["data"]["DB_USERNAME"]

    async def scenario() -> None:
        conn = await _connect(pg, body["data"])
        assert await conn.fetchval("SELECT current_user") == body["data"]["DB_USERNAME"]
        revoked = call(server, "DELETE", f"{LEASES}/{lease_id}", json=SCOPE)
        assert revoked.status_code == 200, revoked.text
        assert revoked.json()["lease"]["id"] == lease_id
        assert revoked.json()["lease"]["status"] is None, revoked.json()["lease"]["statusDetails"]
        with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError, ConnectionError)):
            await conn.fetchval("SELECT 1")  # the open session was terminated
        with pytest.raises(asyncpg.InvalidAuthorizationSpecificationError):
            await _connect(pg, body["data"])  # the role is gone
        assert await _valid_until(pg, body["data"]["DB_USERNAME"]) is None

    asyncio.run(scenario())
    gone = call(server, "GET", f"{LEASES}/{lease_id}", params=SCOPE)
    assert gone.status_code == 404
    assert gone.json()["message"] == f"Dynamic secret lease with ID '{lease_id}' not found"


def test_valid_until_is_the_lease_expiry_and_renew_moves_it(
    server: DevServer, pg: pgcluster.PgCluster
) -> None:
    body = lease(server)
    role, lease_id = body["data"]["DB_USERNAME"], body["lease"]["id"]
    expire_at = parse_iso(body["lease"]["expireAt"])
    assert abs(expire_at - time.time() - 60) < 10  # defaultTTL 1m
    until = asyncio.run(_valid_until(pg, role))
    assert until is not None and abs(until.timestamp() - expire_at) < 1

    renewed = call(server, "POST", f"{LEASES}/{lease_id}/renew", json={**SCOPE, "ttl": "1m"})
    assert renewed.status_code == 200, renewed.text
    new_expiry = parse_iso(renewed.json()["lease"]["expireAt"])
    assert abs(new_expiry - (expire_at + 60)) < 1  # the current expiry plus the TTL, as the real server
    until = asyncio.run(_valid_until(pg, role))
    assert until is not None and abs(until.timestamp() - new_expiry) < 1

    # createdAt + maxTTL (2m) is reached: the next renewal is refused and the role keeps its expiry.
    refused = call(server, "POST", f"{LEASES}/{lease_id}/renew", json={**SCOPE, "ttl": "1m"})
    assert refused.status_code == 400
    assert refused.json()["message"] == "TTL cannot be larger than max ttl"
    got = call(server, "GET", f"{LEASES}/{lease_id}", params=SCOPE).json()["lease"]
    assert got["expireAt"] == renewed.json()["lease"]["expireAt"]
    assert "inputs" not in got["dynamicSecret"]
    assert call(server, "DELETE", f"{LEASES}/{lease_id}", json=SCOPE).status_code == 200


def test_database_refuses_the_password_past_valid_until(pg: pgcluster.PgCluster) -> None:
    """VALID UNTIL is enforced by PostgreSQL itself, with nobody revoking (provider, 2 s expiry)."""

    async def scenario() -> None:
        creds = await sqlprovider.create(pg.inputs(), iso(time.time() + 2))
        conn = await _connect(pg, creds.data())
        await conn.close()
        await asyncio.sleep(3)
        with pytest.raises(asyncpg.InvalidPasswordError):
            await _connect(pg, creds.data())
        await sqlprovider.revoke(pg.inputs(), creds.username)

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("extra", "token", "status", "message"),
    [
        ({"ttl": "30s"}, "leaser-token", 422, None),
        ({"ttl": "3m"}, "leaser-token", 400, "TTL cannot be larger than max TTL"),
        (
            {"dynamicSecretName": "nope"},
            "leaser-token",
            404,
            "Dynamic secret with name 'nope' in folder '/db' not found",
        ),
        (
            {"path": "/missing"},
            "leaser-token",
            404,
            "Folder with path '/missing' in environment with slug 'dev' not found",
        ),
        ({"projectSlug": "nope"}, "leaser-token", 404, "Project with slug 'nope' not found"),
        ({}, "viewer-token", 403, None),
    ],
)
def test_create_refusals(
    server: DevServer, extra: dict[str, Any], token: str, status: int, message: str | None
) -> None:
    r = call(server, "POST", LEASES, token=token, json={"dynamicSecretName": "app-db", **SCOPE, **extra})
    assert r.status_code == status, r.text
    body = r.json()
    assert body["statusCode"] == status
    if message is not None:
        assert body["message"] == message
    if status == 422:
        assert body["message"][0]["message"] == "TTL must be a greater than 1min"


def test_a_lease_is_not_found_through_another_folder(server: DevServer) -> None:
    lease_id = lease(server)["lease"]["id"]
    other = {**SCOPE, "path": "/other"}
    assert call(server, "GET", f"{LEASES}/{lease_id}", params=other).status_code == 404
    assert call(server, "DELETE", f"{LEASES}/{lease_id}", json=other).status_code == 404
    assert call(server, "DELETE", f"{LEASES}/{lease_id}", json=SCOPE).status_code == 200


def test_throwaway_cluster_leaves_nothing(tmp_path: Path) -> None:
    with pgcluster.throwaway_cluster() as cluster:
        root = cluster.data_dir.parent
        assert root.exists()
    assert not root.exists()
    _ = datetime.now(UTC)


def test_project_by_id_gives_the_slug_the_lease_routes_want(server: DevServer) -> None:
    r = call(server, "GET", f"/api/v1/workspace/{PROJECT_ID}")
    assert r.status_code == 200, r.text
    assert r.json()["workspace"]["slug"] == "leases"
    missing = call(server, "GET", "/api/v1/workspace/nope")
    assert missing.status_code == 404
    assert missing.json()["message"] == "Project with ID 'nope' not found"

"""The dev server as a subprocess keeps everything across a restart on the same SQLite file."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from secretferry.devserver.testing import run_dev_server

pytestmark = pytest.mark.integration
PROJECT = "22222222-2222-4222-8222-222222222222"
SEED = {
    "projects": [
        {
            "id": PROJECT,
            "slug": "restart",
            "environments": [{"slug": "dev", "name": "Dev"}],
            "secrets": [{"environment": "dev", "key": "SEEDED", "value": "1"}],
        }
    ],
    "identities": [
        {
            "id": "id-1",
            "name": "ops",
            "orgRole": "admin",
            "accessTokens": [{"token": "tok"}],
            "universalAuth": {"clientId": "c", "clientSecret": "s"},
            "projects": [{"project": "restart", "role": "admin"}],
        }
    ],
}


def listed(base_url: str, token: str) -> dict[str, str]:
    r = httpx.get(
        f"{base_url}/api/v4/secrets",
        params={"projectId": PROJECT, "environment": "dev", "recursive": "true"},
        headers={"Authorization": f"Bearer {token}"},
    )
    r.raise_for_status()
    return {f"{s['secretPath']}:{s['secretKey']}": s["secretValue"] for s in r.json()["secrets"]}


def test_writes_survive_restart(tmp_path: Path) -> None:
    with run_dev_server(seed=SEED, data_dir=tmp_path) as server:
        login = httpx.post(
            f"{server.base_url}/api/v1/auth/universal-auth/login", json={"clientId": "c", "clientSecret": "s"}
        )
        token = login.json()["accessToken"]
        server.set_secret(PROJECT, "dev", "/deep/er", "WRITTEN", "w")
        created = httpx.post(
            f"{server.base_url}/api/v4/secrets/VIA_API",
            json={"projectId": PROJECT, "environment": "dev", "secretValue": "api"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert created.status_code == 200
        server.delete_secret(PROJECT, "dev", "/", "SEEDED")
        before = listed(server.base_url, token)
        assert before == {"/:VIA_API": "api", "/deep/er:WRITTEN": "w"}
        server.restart()
        assert listed(server.base_url, token) == before  # the seed is not re-applied, tokens persist
        assert server.stats()["listSecrets"] == 1

"""Project webhooks at the dev server: the real routes' validation, and signed POSTs on changes."""

from __future__ import annotations

import asyncio
import json

import httpx
from devserver_fixtures import ADMIN, LIMITED, PROJECT

from secretferry.service import webhook_signature as sig

HOOKS = "/api/v1/webhooks"
KEY = "dev-webhook-key-123"


async def _receiver() -> tuple[asyncio.Server, int, asyncio.Queue[tuple[str, bytes]]]:
    got: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        headers = {
            k.strip().lower(): v.strip()
            for k, _, v in (line.partition(":") for line in head.split("\r\n")[1:])
            if k
        }
        body = await reader.readexactly(int(headers["content-length"]))
        await got.put((headers.get(sig.HEADER, ""), body))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], got


async def test_validation_of_the_routes(client: httpx.AsyncClient) -> None:
    base = {"projectId": PROJECT, "environment": "dev", "webhookUrl": "http://127.0.0.1:1/x"}
    assert (
        await client.post(HOOKS, json={**base, "webhookUrl": "not a url"}, headers=ADMIN)
    ).status_code in (400, 422)
    assert (await client.post(HOOKS, json={**base, "environment": "nope"}, headers=ADMIN)).status_code == 404
    assert (await client.post(HOOKS, json=base, headers=LIMITED)).status_code == 403
    created = await client.post(HOOKS, json={**base, "secretPath": "/app/**"}, headers=ADMIN)
    assert created.status_code == 200, created.text
    hook = created.json()["webhook"]
    assert hook["secretPath"] == "/app/**" and "webhookSecretKey" not in hook
    listed = await client.get(HOOKS, params={"projectId": PROJECT}, headers=ADMIN)
    assert [h["id"] for h in listed.json()["webhooks"]] == [hook["id"]]
    patched = await client.patch(f"{HOOKS}/{hook['id']}", json={"isDisabled": True}, headers=ADMIN)
    assert patched.json()["webhook"]["isDisabled"] is True
    assert (await client.delete(f"{HOOKS}/{hook['id']}", headers=ADMIN)).status_code == 200
    assert (await client.delete(f"{HOOKS}/{hook['id']}", headers=ADMIN)).status_code == 404


async def test_a_change_posts_the_real_payload_signed_with_the_key(client: httpx.AsyncClient) -> None:
    server, port, got = await _receiver()
    async with server:
        for path in ("/app/**", "/other"):
            created = await client.post(
                HOOKS,
                json={
                    "projectId": PROJECT,
                    "environment": "dev",
                    "secretPath": path,
                    "webhookUrl": f"http://127.0.0.1:{port}/hook",
                    "webhookSecretKey": KEY,
                },
                headers=ADMIN,
            )
            assert created.status_code == 200, created.text
        body = {"projectId": PROJECT, "environment": "dev", "secretPath": "/app/db", "secretValue": "v"}
        assert (await client.post("/api/v4/secrets/WEBHOOKED", json=body, headers=ADMIN)).status_code == 200
        header, raw = await asyncio.wait_for(got.get(), 5)
        doc = json.loads(raw)
        assert doc["event"] == "secrets.modified"
        assert doc["project"]["workspaceId"] == PROJECT
        assert (doc["project"]["environment"], doc["project"]["secretPath"]) == ("dev", "/app/db")
        assert header == f"t={doc['timestamp']};{sig.sign(raw, KEY)}"
        result, _ = sig.verify(header, raw, keys=(KEY,), now_ms=doc["timestamp"], window_seconds=300)
        assert result == sig.OK
        await asyncio.sleep(0.2)
        assert got.empty()  # /other's webhook did not match /app/db


async def test_a_change_reaches_the_webhooks_of_paths_importing_it(client: httpx.AsyncClient) -> None:
    """The seed's dev ``/`` imports prod ``/shared``: a write there fires dev ``/``'s webhook."""
    server, port, got = await _receiver()
    async with server:
        created = await client.post(
            HOOKS,
            json={
                "projectId": PROJECT,
                "environment": "dev",
                "secretPath": "/",
                "webhookUrl": f"http://127.0.0.1:{port}/hook",
                "webhookSecretKey": KEY,
            },
            headers=ADMIN,
        )
        assert created.status_code == 200, created.text
        body = {"projectId": PROJECT, "environment": "prod", "secretPath": "/shared", "secretValue": "v"}
        assert (await client.post("/api/v4/secrets/IMPORTED", json=body, headers=ADMIN)).status_code == 200
        header, raw = await asyncio.wait_for(got.get(), 5)
        doc = json.loads(raw)
        assert (doc["project"]["environment"], doc["project"]["secretPath"]) == ("dev", "/")
        assert header == f"t={doc['timestamp']};{sig.sign(raw, KEY)}"

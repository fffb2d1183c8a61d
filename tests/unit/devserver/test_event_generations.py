"""Each event-stream generation on the wire: our client's items accepted, the exact bytes written for
real writes, heartbeats, re-check failures and 422 refusals of malformed items.

Streams are driven in-process (``asgi_stream``) with the injected clock, so every timestamp and id
in a frame is known, and with heartbeat/re-check intervals of 0 or an hour, so nothing waits.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import asgi_stream
import httpx
import pytest
from devserver_fixtures import ADMIN, ADMIN_API, ADMIN_ID, LIMITED, PROJECT, T0
from fastapi import FastAPI

from secretferry.devserver import generations
from secretferry.devserver.config import EventGeneration
from secretferry.devserver.events import CREATE, DELETE, IMPORT_MUTATION, UPDATE, Change

SUBSCRIBE = "/api/v1/events/subscribe/project-events"
ALL: tuple[EventGeneration, ...] = ("documented", "old", "middle", "newest")
EVENT_ITEMS: tuple[EventGeneration, ...] = ("middle", "newest")  # items of the {event, conditions?} shape
WITH_CONDITIONS: tuple[EventGeneration, ...] = ("old", "middle", "newest")  # environmentSlug required
HOUR = 3600.0  # a timer that never fires during a test


def client_item(kind: str, path: str) -> dict[str, Any]:
    """The item our client sends, whatever the server's generation."""
    return {
        "event": kind,
        "subject": "secrets",
        "action": "subscribe",
        "conditions": {"environmentSlug": "dev", "secretPath": path},
    }


# Writes land in dev /app (a folder every generation's filter can select exactly); dev / imports
# prod /shared, so a write there is an import mutation for dev /.
REGISTER = [client_item(kind, "/app") for kind in (CREATE, UPDATE, DELETE)] + [
    client_item(IMPORT_MUTATION, "/")
]


@pytest.fixture
def admin_client() -> Callable[[FastAPI], httpx.AsyncClient]:
    def build(app: FastAPI) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://dev", headers=ADMIN_API
        )

    return build


async def put(c: httpx.AsyncClient, env: str, path: str, key: str, value: str) -> str:
    body = {
        "projectId": PROJECT,
        "environment": env,
        "secretPath": path,
        "secretKey": key,
        "secretValue": value,
    }
    r = await c.put("/_admin/secrets", json=body)
    assert r.status_code == 200, r.text
    secret_id: str = r.json()["secret"]["id"]
    return secret_id


def subscribe(
    app: FastAPI, register: list[dict[str, Any]]
) -> contextlib.AbstractAsyncContextManager[asgi_stream.AsgiStream]:
    return asgi_stream.request(
        app, "POST", SUBSCRIBE, body={"projectId": PROJECT, "register": register}, headers=ADMIN
    )


@pytest.mark.parametrize("name", ALL)
async def test_writes_reach_the_stream_byte_for_byte(
    name: EventGeneration,
    make_app: Callable[..., FastAPI],
    admin_client: Callable[[FastAPI], httpx.AsyncClient],
) -> None:
    app = make_app(event_generation=name, heartbeat_seconds=HOUR, recheck_seconds=HOUR)
    gen = generations.get(name)
    async with admin_client(app) as c, subscribe(app, REGISTER) as stream:
        assert stream.status == 200
        assert stream.headers["content-type"] == "text/event-stream"
        assert stream.headers["cache-control"] == "no-cache"
        assert stream.headers["connection"] == "keep-alive"
        assert stream.headers["x-accel-buffering"] == "no"

        e_id = await put(c, "dev", "/app", "E", "1")  # nothing was sent on connect: this comes first
        assert await stream.chunk() == gen.encode(CREATE, [Change("dev", "/app", "E", e_id)], T0)

        c_id = await put(c, "dev", "/app", "C", "changed")
        assert await stream.chunk() == gen.encode(UPDATE, [Change("dev", "/app", "C", c_id)], T0)

        body = {
            "projectId": PROJECT,
            "environment": "dev",
            "secretPath": "/app",
            "secrets": [{"secretKey": "C"}, {"secretKey": "E"}],
        }
        r = await c.request("DELETE", "/api/v4/secrets/batch", json=body, headers=ADMIN)
        assert r.status_code == 200, r.text
        two = [Change("dev", "/app", "C", c_id), Change("dev", "/app", "E", e_id)]
        assert await stream.chunk() == gen.encode(DELETE, two, T0)

        await put(c, "prod", "/shared", "S1", "changed")  # an import mutation for dev /
        if name != "old":  # old had no import-mutation event: the next frame is the next write's
            assert await stream.chunk() == gen.encode(IMPORT_MUTATION, [Change("dev", "/")], T0)

        f_id = await put(c, "dev", "/app", "F", "1")
        assert await stream.chunk() == gen.encode(CREATE, [Change("dev", "/app", "F", f_id)], T0)


async def test_old_sends_one_frame_per_key_and_every_kind(
    make_app: Callable[..., FastAPI], admin_client: Callable[[FastAPI], httpx.AsyncClient]
) -> None:
    app = make_app(event_generation="old", heartbeat_seconds=HOUR, recheck_seconds=HOUR)
    async with admin_client(app) as c, subscribe(app, [client_item(UPDATE, "/app")]) as stream:
        await put(c, "dev", "/app", "NEW", "1")  # a create, though the item names secret:update
        assert b'"eventType":"create-secret"' in (await stream.chunk() or b"")
        keys = [{"secretKey": "C"}, {"secretKey": "NEW"}]
        body = {"projectId": PROJECT, "environment": "dev", "secretPath": "/app", "secrets": keys}
        assert (
            await c.request("DELETE", "/api/v4/secrets/batch", json=body, headers=ADMIN)
        ).status_code == 200
        frames = await stream.chunk() or b""
        assert frames.count(b"data: ") == 2 and frames.count(b'"eventType":"delete-secret"') == 2


@pytest.mark.parametrize(
    ("name", "heartbeat"),
    [
        ("documented", b"event: ping\n\n"),
        ("old", b"1"),
        ("middle", b"event: ping\n\n"),
        ("newest", b"event: ping\n\n"),
    ],
)
async def test_heartbeat_bytes(
    name: EventGeneration, heartbeat: bytes, make_app: Callable[..., FastAPI]
) -> None:
    app = make_app(event_generation=name, heartbeat_seconds=0, recheck_seconds=HOUR)
    async with subscribe(app, [client_item(UPDATE, "/app")]) as stream:
        assert await stream.chunk() == heartbeat


@pytest.mark.parametrize("name", ALL)
async def test_recheck_failure_frame_then_close(
    name: EventGeneration,
    make_app: Callable[..., FastAPI],
    admin_client: Callable[[FastAPI], httpx.AsyncClient],
) -> None:
    app = make_app(event_generation=name, heartbeat_seconds=HOUR, recheck_seconds=0)
    async with admin_client(app) as c, subscribe(app, [client_item(UPDATE, "/app")]) as stream:
        assert stream.status == 200
        assert (await c.post(f"/_admin/identities/{ADMIN_ID}/expire-tokens")).status_code == 200
        frame = await stream.chunk()
        if name == "old":
            assert frame is None  # no error event in that generation: the stream just ends
        elif name == "newest":
            assert frame == b'event: error\ndata: {"message":"Permission denied or refresh failed"}\n\n'
        else:
            assert (
                frame is not None and frame.startswith(b"event: error\ndata: {") and frame.endswith(b"}\n\n")
            )
            body = json.loads(frame.removeprefix(b"event: error\ndata: "))
            assert list(body) == ["reqId", "statusCode", "message", "error"] and body["statusCode"] == 401
        assert await stream.chunk() is None


def _item(name: EventGeneration, **conditions: Any) -> dict[str, Any]:
    if name == "old":
        return {"subject": "secrets", "action": "subscribe", "conditions": conditions}
    return {"event": UPDATE, "conditions": conditions}


REFUSED: list[tuple[EventGeneration, str, list[dict[str, Any]], list[str]]] = [
    *(
        (name, "no event", [{"conditions": {"environmentSlug": "dev"}}], ["register", "0", "event"])
        for name in EVENT_ITEMS
    ),
    *(
        (
            name,
            "no environmentSlug",
            [_item(name, secretPath="/")],
            ["register", "0", "conditions", "environmentSlug"],
        )
        for name in WITH_CONDITIONS
    ),
    *(
        (name, "11 items", [_item(name, environmentSlug="dev", secretPath="/")] * 11, ["register"])
        for name in ALL
    ),
    *((name, "no items", [], ["register"]) for name in ALL),
    (
        "old",
        "no subject",
        [{"action": "subscribe", "conditions": {"environmentSlug": "dev", "secretPath": "/"}}],
        ["register", "0", "subject"],
    ),
    (
        "old",
        "no action",
        [{"subject": "secrets", "conditions": {"environmentSlug": "dev", "secretPath": "/"}}],
        ["register", "0", "action"],
    ),
]


@pytest.fixture
async def anyapp_client(
    make_app: Callable[..., FastAPI],
) -> AsyncIterator[Callable[[EventGeneration], httpx.AsyncClient]]:
    clients: list[httpx.AsyncClient] = []

    def build(name: EventGeneration) -> httpx.AsyncClient:
        app = make_app(event_generation=name)
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://dev", headers=ADMIN
        )
        clients.append(client)
        return client

    yield build
    for client in clients:
        await client.aclose()


@pytest.mark.parametrize(
    ("name", "register", "path"),
    [(name, register, path) for name, _, register, path in REFUSED],
    ids=[f"{name}-{why}" for name, why, _, _ in REFUSED],
)
async def test_malformed_items_are_422(
    name: EventGeneration,
    register: list[dict[str, Any]],
    path: list[str],
    anyapp_client: Callable[[EventGeneration], httpx.AsyncClient],
) -> None:
    r = await anyapp_client(name).post(SUBSCRIBE, json={"projectId": PROJECT, "register": register})
    body = r.json()
    assert r.status_code == 422 and body["error"] == "ValidationFailure"
    assert isinstance(body["message"], list) and path in [issue["path"] for issue in body["message"]]


async def test_old_checks_secret_events_for_every_kind(
    anyapp_client: Callable[[EventGeneration], httpx.AsyncClient],
) -> None:
    """The limited identity may subscribe to updates and creates under /app/** but not deletes:
    an old item takes every kind, so it is refused where a middle one for updates is not."""
    register = [client_item(UPDATE, "/app/**")]
    r = await anyapp_client("old").post(
        SUBSCRIBE, json={"projectId": PROJECT, "register": register}, headers=LIMITED
    )
    assert r.status_code == 403 and r.json()["details"]
    r = await anyapp_client("middle").post(
        SUBSCRIBE, json={"projectId": PROJECT, "register": [client_item(DELETE, "/app/**")]}, headers=LIMITED
    )
    assert r.status_code == 403


async def test_documented_keeps_400_for_an_unknown_event(
    anyapp_client: Callable[[EventGeneration], httpx.AsyncClient],
) -> None:
    r = await anyapp_client("documented").post(
        SUBSCRIBE, json={"projectId": PROJECT, "register": [{"event": "secret:rotate"}]}
    )
    assert r.status_code == 400


async def test_newest_checks_each_event_against_the_permission_at_its_location(
    make_app: Callable[..., FastAPI], admin_client: Callable[[FastAPI], httpx.AsyncClient]
) -> None:
    """The limited identity may see creates under /app/** only. On the newest server a "/app"
    registration also matches "/apple" by prefix, but canReceiveEvent withholds that event."""
    app = make_app(event_generation="newest", heartbeat_seconds=HOUR, recheck_seconds=HOUR)
    async with (
        admin_client(app) as c,
        asgi_stream.request(
            app,
            "POST",
            SUBSCRIBE,
            body={"projectId": PROJECT, "register": [client_item(CREATE, "/app")]},
            headers=LIMITED,
        ) as stream,
    ):
        assert stream.status == 200
        await put(c, "dev", "/apple", "OUTSIDE", "1")
        inside = await put(c, "dev", "/app/x", "INSIDE", "1")
        first = await stream.chunk() or b""
    assert first == generations.get("newest").encode(CREATE, [Change("dev", "/app/x", "INSIDE", inside)], T0)

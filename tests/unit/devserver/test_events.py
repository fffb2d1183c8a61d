"""Event streams over real sockets: filtering, shapes, fan-out, refusals, heartbeats, re-checks, drops.

Generation-specific bytes and filters are in test_generations.py / test_event_generations.py; these
tests pin the generation whose shape they read (most use ``documented``, the glob dialect).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
from devserver_fixtures import ADMIN, ADMIN_ID, LIMITED, PROJECT
from fastapi import FastAPI

from conftest import live

SUBSCRIBE = "/api/v1/events/subscribe/project-events"


def reg(event: str | None = "secret:update", env: str = "dev", path: str = "/**") -> dict[str, Any]:
    """A register item; ``event=None`` leaves the kind out (only ``documented`` allows that)."""
    item: dict[str, Any] = {"conditions": {"environmentSlug": env, "secretPath": path}}
    if event:
        item["event"] = event
    return item


class Stream:
    """Reads one SSE response in the background into (event, data) frames."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.frames: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self.closed = asyncio.Event()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        event, data = "message", ""
        try:
            async for line in self.response.aiter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data = line[5:].strip()
                elif line == "":
                    await self.frames.put((event, data))
                    event, data = "message", ""
        except httpx.HTTPError:
            pass
        finally:
            self.closed.set()

    async def next(self, timeout: float = 3.0) -> tuple[str, Any]:  # noqa: ASYNC109
        event, data = await asyncio.wait_for(self.frames.get(), timeout)
        return event, json.loads(data) if data else None

    async def nothing_for(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self.frames.get(), seconds)
        except TimeoutError:
            return True
        return False


@contextlib.asynccontextmanager
async def subscribe(
    c: httpx.AsyncClient, register: list[dict[str, Any]], headers: dict[str, str] = ADMIN
) -> AsyncIterator[Stream]:
    async with c.stream(
        "POST", SUBSCRIBE, json={"projectId": PROJECT, "register": register}, headers=headers
    ) as r:
        assert r.status_code == 200, await r.aread()
        stream = Stream(r)
        try:
            yield stream
        finally:
            stream.task.cancel()


async def write(c: httpx.AsyncClient, key: str, value: str, *, env: str = "dev", path: str = "/") -> None:
    body = {
        "projectId": PROJECT,
        "environment": env,
        "secretPath": path,
        "secretKey": key,
        "secretValue": value,
    }
    assert (await c.put("/_admin/secrets", json=body)).status_code == 200


async def test_only_matching_registrations_get_events(make_app: Callable[..., FastAPI]) -> None:
    app = make_app(event_generation="documented")
    async with live(app) as c, subscribe(c, [reg("secret:update", path="/app/**")]) as s:
        await write(c, "B", "other")  # / is outside /app/**
        await write(c, "NEW", "x", path="/app")  # a create, not an update
        await write(c, "C", "changed", path="/app")
        event, body = await s.next()
        assert event == "message"
        assert body == {
            "projectType": "secret-manager",
            "data": {
                "eventType": "secret:update",
                "payload": [{"environment": "dev", "secretPath": "/app", "secretKey": "C"}],
            },
        }
        assert await s.nothing_for(0.2)


async def test_import_mutation_reaches_importing_path(make_app: Callable[..., FastAPI]) -> None:
    app = make_app(event_generation="documented")
    async with live(app) as c, subscribe(c, [reg("secret:import-mutation", path="/")]) as s:
        await write(c, "S1", "changed", env="prod", path="/shared")
        _, body = await s.next()
        assert body["data"] == {
            "eventType": "secret:import-mutation",
            "payload": {"environment": "dev", "secretPath": "/"},
        }


async def test_middle_generation_envelope_shape(make_app: Callable[..., FastAPI]) -> None:
    async with live(make_app(event_generation="middle")) as c, subscribe(c, [reg()]) as s:
        await write(c, "A", "changed")
        event, body = await s.next()
        assert event == "secret-manager" and body["type"] == "secret-manager"
        assert body["data"]["event"] == "secret:update" and body["data"]["specversion"] == 1
        assert body["data"]["payload"][0]["secretKey"] == "A" and body["data"]["payload"][0]["secretId"]


async def test_refusals_plan_cap_permission(make_app: Callable[..., FastAPI]) -> None:
    async with live(make_app(events_plan=False)) as c:
        r = await c.post(SUBSCRIBE, json={"projectId": PROJECT, "register": [reg()]}, headers=ADMIN)
        assert r.status_code == 400 and "plan" in r.json()["message"]
    async with live(make_app(stream_cap=1)) as c, subscribe(c, [reg()]):
        r = await c.post(SUBSCRIBE, json={"projectId": PROJECT, "register": [reg()]}, headers=ADMIN)
        assert r.status_code == 429 and r.headers["retry-after"]
        r = await c.post(
            SUBSCRIBE,
            json={"projectId": PROJECT, "register": [reg("secret:update", path="/")]},
            headers=LIMITED,
        )
        assert r.status_code == 403 and r.json()["details"]
        r = await c.post(SUBSCRIBE, json={"projectId": PROJECT, "register": [reg()] * 11}, headers=ADMIN)
        assert r.status_code == 422
    app = make_app(event_generation="documented")
    async with live(app) as c, subscribe(c, [reg("secret:update", path="/app/**")], LIMITED) as s:
        await write(c, "C", "seen", path="/app")
        assert (await s.next())[1]["data"]["payload"][0]["secretKey"] == "C"


async def test_heartbeats_and_old_bare_1_heartbeats(make_app: Callable[..., FastAPI]) -> None:
    async with live(make_app(heartbeat_seconds=0.1)) as c, subscribe(c, [reg()]) as s:
        assert await s.next() == ("ping", None)
    old_item = {**reg(), "subject": "secrets", "action": "subscribe"}
    async with (
        live(make_app(heartbeat_seconds=0.1, event_generation="old")) as c,
        c.stream("POST", SUBSCRIBE, json={"projectId": PROJECT, "register": [old_item]}, headers=ADMIN) as r,
    ):
        # The old keep-alive is one byte with no line end: read bytes, not lines.
        assert r.status_code == 200
        assert await asyncio.wait_for(anext(r.aiter_raw()), 3) == b"1"


async def test_recheck_sends_error_and_closes_when_token_expires(make_app: Callable[..., FastAPI]) -> None:
    app = make_app(recheck_seconds=0.2, event_generation="middle")
    async with live(app) as c, subscribe(c, [reg()]) as s:
        await c.post(f"/_admin/identities/{ADMIN_ID}/expire-tokens")
        event, body = await s.next()
        assert event == "error" and body["statusCode"] == 401
        await asyncio.wait_for(s.closed.wait(), 3)


async def test_drop_streams_and_silent_fault(make_app: Callable[..., FastAPI]) -> None:
    async with live(make_app(heartbeat_seconds=0.1)) as c, subscribe(c, [reg()]) as s:
        await c.post("/_admin/faults", json={"streams": {"silent": True}})
        await asyncio.sleep(0.15)
        while not s.frames.empty():
            s.frames.get_nowait()
        assert await s.nothing_for(0.4)
        assert (await c.get("/_admin/stats")).json()["openStreams"] == 1
        assert (await c.post("/_admin/streams/drop")).json()["dropped"] == 1
        await asyncio.wait_for(s.closed.wait(), 3)
    async with live(make_app(faults={"streams": {"dropAfterSeconds": 0.2}})) as c, subscribe(c, [reg()]) as s:
        await asyncio.wait_for(s.closed.wait(), 3)


async def test_fan_out_to_200_streams(make_app: Callable[..., FastAPI]) -> None:
    app = make_app(stream_cap=1000, event_generation="documented")
    async with live(app) as c, contextlib.AsyncExitStack() as stack:
        streams = [await stack.enter_async_context(subscribe(c, [reg()])) for _ in range(200)]
        started = time.perf_counter()
        await write(c, "A", "fan-out")
        await asyncio.gather(*(s.next(timeout=10) for s in streams))
        elapsed = time.perf_counter() - started
        assert elapsed < 5.0  # generous on a shared 2-core box; bench/bench_devserver.py measures it

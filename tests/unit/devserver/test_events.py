"""Event streams on virtual time: filtering, shapes, fan-out, refusals, heartbeat and re-check
cadence, drops and the silent fault.

The app is driven in-process (``asgi_stream``) with every request served on the loop
(``make_loop_app``), under ``looptime``: a heartbeat, a re-check or a drop comes at an exact
virtual instant, so the tests check *when* as well as *what*, and nothing waits in real time.
Intervals are binary fractions (0.125 s, 0.25 s): the server adds them up in floating point, and a
sum such as 0.2 + 0.1 misses the virtual clock's microsecond ticks, so its timer would fire
forever without the clock reaching the deadline.
Streams over real sockets are the contract tests' (tests/integration/contract). Generation-specific
bytes and filters are in test_generations.py / test_event_generations.py; these tests pin the
generation whose shape they read (most use ``documented``, the glob dialect).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import asgi_stream
import httpx
import pytest
from devserver_fixtures import ADMIN, ADMIN_API, ADMIN_ID, LIMITED, PROJECT
from fastapi import FastAPI

pytestmark = pytest.mark.looptime

SUBSCRIBE = "/api/v1/events/subscribe/project-events"
HOUR = 3600.0  # a timer that never fires during a test


def reg(event: str | None = "secret:update", env: str = "dev", path: str = "/**") -> dict[str, Any]:
    """A register item; ``event=None`` leaves the kind out (only ``documented`` allows that)."""
    item: dict[str, Any] = {"conditions": {"environmentSlug": env, "secretPath": path}}
    if event:
        item["event"] = event
    return item


class Frames:
    """One in-process SSE response read as (event, data) frames, on demand.

    Every read is bounded by ``asgi_stream``'s guard (virtual seconds here), so a frame that never
    comes fails the test with a TimeoutError instead of hanging it.
    """

    def __init__(self, response: asgi_stream.AsgiStream) -> None:
        self.response = response
        self._buffer = b""

    async def next(self) -> tuple[str, Any] | None:
        """The next whole frame, or None once the server has ended the response."""
        while b"\n\n" not in self._buffer:
            chunk = await self.response.chunk()
            if chunk is None:
                assert not self._buffer, f"the stream ended inside a frame: {self._buffer!r}"
                return None
            self._buffer += chunk
        frame, self._buffer = self._buffer.split(b"\n\n", 1)
        event, data = "message", ""
        for line in frame.decode().split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip()
        return event, json.loads(data) if data else None

    async def within(self, seconds: float) -> list[tuple[str, Any]]:
        """The frames that come within ``seconds`` of virtual time (fewer if the stream ends)."""
        frames: list[tuple[str, Any]] = []
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                while (frame := await self.next()) is not None:
                    frames.append(frame)
        return frames

    async def nothing_for(self, seconds: float) -> bool:
        """True if no frame comes within ``seconds`` of virtual time and the stream stays open."""
        return not await self.within(seconds) and not self.response.ended


@contextlib.asynccontextmanager
async def subscribe(
    app: FastAPI, register: list[dict[str, Any]], headers: dict[str, str] = ADMIN
) -> AsyncIterator[Frames]:
    body = {"projectId": PROJECT, "register": register}
    async with asgi_stream.request(app, "POST", SUBSCRIBE, body=body, headers=headers) as r:
        assert r.status == 200, await r.json()
        yield Frames(r)


async def refusal(
    app: FastAPI, register: list[dict[str, Any]], headers: dict[str, str] = ADMIN
) -> tuple[int, dict[str, str], Any]:
    """Status, headers and JSON body of a subscribe the server should refuse before streaming."""
    body = {"projectId": PROJECT, "register": register}
    async with asgi_stream.request(app, "POST", SUBSCRIBE, body=body, headers=headers) as r:
        if r.status == 200:  # not refused: the body is an endless stream, leave it unread
            return r.status, r.headers, None
        return r.status, r.headers, await r.json()


@contextlib.asynccontextmanager
async def admin(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dev", headers=ADMIN_API) as c:
        yield c


async def write(c: httpx.AsyncClient, key: str, value: str, *, env: str = "dev", path: str = "/") -> None:
    body = {
        "projectId": PROJECT,
        "environment": env,
        "secretPath": path,
        "secretKey": key,
        "secretValue": value,
    }
    assert (await c.put("/_admin/secrets", json=body)).status_code == 200


async def test_only_matching_registrations_get_events(make_loop_app: Callable[..., FastAPI]) -> None:
    app = make_loop_app(event_generation="documented")
    async with admin(app) as c, subscribe(app, [reg("secret:update", path="/app/**")]) as s:
        await write(c, "B", "other")  # / is outside /app/**
        await write(c, "NEW", "x", path="/app")  # a create, not an update
        await write(c, "C", "changed", path="/app")
        assert await s.next() == (
            "message",
            {
                "projectType": "secret-manager",
                "data": {
                    "eventType": "secret:update",
                    "payload": [{"environment": "dev", "secretPath": "/app", "secretKey": "C"}],
                },
            },
        )
        assert await s.nothing_for(1.0)  # virtual; well inside the 15 s heartbeat


async def test_import_mutation_reaches_importing_path(make_loop_app: Callable[..., FastAPI]) -> None:
    app = make_loop_app(event_generation="documented")
    async with admin(app) as c, subscribe(app, [reg("secret:import-mutation", path="/")]) as s:
        await write(c, "S1", "changed", env="prod", path="/shared")
        frame = await s.next()
        assert frame is not None
        assert frame[1]["data"] == {
            "eventType": "secret:import-mutation",
            "payload": {"environment": "dev", "secretPath": "/"},
        }


async def test_middle_generation_envelope_shape(make_loop_app: Callable[..., FastAPI]) -> None:
    app = make_loop_app(event_generation="middle")
    async with admin(app) as c, subscribe(app, [reg()]) as s:
        await write(c, "A", "changed")
        frame = await s.next()
        assert frame is not None
        event, body = frame
        assert event == "secret-manager" and body["type"] == "secret-manager"
        assert body["data"]["event"] == "secret:update" and body["data"]["specversion"] == 1
        assert body["data"]["payload"][0]["secretKey"] == "A" and body["data"]["payload"][0]["secretId"]


async def test_refusals_plan_cap_permission(make_loop_app: Callable[..., FastAPI]) -> None:
    status, _, body = await refusal(make_loop_app(events_plan=False), [reg()])
    assert status == 400 and "plan" in body["message"]
    app = make_loop_app(stream_cap=1)
    async with subscribe(app, [reg()]):
        status, headers, _ = await refusal(app, [reg()])
        assert status == 429 and headers["retry-after"]
        status, _, body = await refusal(app, [reg("secret:update", path="/")], LIMITED)
        assert status == 403 and body["details"]
        status, _, _ = await refusal(app, [reg()] * 11)
        assert status == 422
    app = make_loop_app(event_generation="documented")
    async with admin(app) as c, subscribe(app, [reg("secret:update", path="/app/**")], LIMITED) as s:
        await write(c, "C", "seen", path="/app")
        frame = await s.next()
        assert frame is not None and frame[1]["data"]["payload"][0]["secretKey"] == "C"


async def test_heartbeats_come_every_interval(make_loop_app: Callable[..., FastAPI]) -> None:
    loop = asyncio.get_running_loop()
    app = make_loop_app(heartbeat_seconds=0.125)
    opened = loop.time()
    async with subscribe(app, [reg()]) as s:
        assert await s.next() == ("ping", None)
        assert loop.time() - opened == pytest.approx(0.125)
        assert await s.next() == ("ping", None)
        assert loop.time() - opened == pytest.approx(0.25)


async def test_old_generation_heartbeat_is_a_bare_1(make_loop_app: Callable[..., FastAPI]) -> None:
    loop = asyncio.get_running_loop()
    app = make_loop_app(heartbeat_seconds=0.125, event_generation="old")
    old_item = {**reg(), "subject": "secrets", "action": "subscribe"}
    body = {"projectId": PROJECT, "register": [old_item]}
    opened = loop.time()
    async with asgi_stream.request(app, "POST", SUBSCRIBE, body=body, headers=ADMIN) as r:
        # The old keep-alive is one byte with no line end: read bytes, not frames.
        assert r.status == 200
        assert await r.chunk() == b"1"
        assert loop.time() - opened == pytest.approx(0.125)


async def test_recheck_sends_error_and_closes_when_token_expires(
    make_loop_app: Callable[..., FastAPI],
) -> None:
    loop = asyncio.get_running_loop()
    app = make_loop_app(recheck_seconds=0.25, event_generation="middle")
    opened = loop.time()
    async with admin(app) as c, subscribe(app, [reg()]) as s:
        assert await s.nothing_for(0.625)  # the re-checks at 0.25 s and 0.5 s pass without a word
        assert (await c.post(f"/_admin/identities/{ADMIN_ID}/expire-tokens")).status_code == 200
        frame = await s.next()
        assert frame is not None
        event, body = frame
        assert event == "error" and body["statusCode"] == 401
        assert loop.time() - opened == pytest.approx(0.75)  # found at the next re-check, not before
        assert await s.next() is None  # and the stream ends


async def test_silent_fault_stops_heartbeats_and_drop_ends_the_stream(
    make_loop_app: Callable[..., FastAPI],
) -> None:
    loop = asyncio.get_running_loop()
    app = make_loop_app(heartbeat_seconds=0.125)
    async with admin(app) as c, subscribe(app, [reg()]) as s:
        assert (await c.post("/_admin/faults", json={"streams": {"silent": True}})).status_code == 200
        # The stream reads the faults once per wait: the heartbeat armed before may still come.
        assert await s.within(0.2) in ([], [("ping", None)])
        assert await s.nothing_for(0.5)  # four more heartbeats due, none sent
        assert (await c.get("/_admin/stats")).json()["openStreams"] == 1  # silent, still open
        dropped_at = loop.time()
        assert (await c.post("/_admin/streams/drop")).json()["dropped"] == 1
        assert await s.next() is None
        assert loop.time() == dropped_at  # ended at once, not at a later tick


async def test_streams_end_after_the_drop_fault_delay(make_loop_app: Callable[..., FastAPI]) -> None:
    loop = asyncio.get_running_loop()
    app = make_loop_app(faults={"streams": {"dropAfterSeconds": 0.25}})
    opened = loop.time()
    async with subscribe(app, [reg()]) as s:
        assert await s.next() is None
        assert loop.time() - opened == pytest.approx(0.25)


async def test_fan_out_to_200_streams(make_loop_app: Callable[..., FastAPI]) -> None:
    """One write reaches 200 open streams at once. How fast in real time is the benchmark's
    question (bench/bench_devserver.py), not a unit test's."""
    loop = asyncio.get_running_loop()
    app = make_loop_app(stream_cap=1000, event_generation="documented")
    async with admin(app) as c, contextlib.AsyncExitStack() as stack:
        streams = [await stack.enter_async_context(subscribe(app, [reg()])) for _ in range(200)]
        assert (await c.get("/_admin/stats")).json()["openStreams"] == 200
        started = loop.time()
        await write(c, "A", "fan-out")
        frames = await asyncio.gather(*(s.next() for s in streams))
        assert loop.time() == started  # delivered by the write itself: no timer was waited for
        payload = [{"environment": "dev", "secretPath": "/", "secretKey": "A"}]
        expected = (
            "message",
            {"projectType": "secret-manager", "data": {"eventType": "secret:update", "payload": payload}},
        )
        assert frames == [expected] * 200

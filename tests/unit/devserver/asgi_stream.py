"""One streaming request against an ASGI app in-process, read chunk by chunk as the app sends it.

httpx's ``ASGITransport`` returns only once the app has finished, which an event stream never
does; a live uvicorn adds sockets and real time. Driving the ASGI callable directly shows exactly
the bytes each ``http.response.body`` message carries (so a test sees any framing added on the
way) and needs no sleeping: the test reads what was sent, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.types import ASGIApp, Message

READ_TIMEOUT_SECONDS = 5.0  # only a guard against a hung test; a healthy read returns at once


class AsgiStream:
    """The response of one request: status, headers, and the body chunks still to read."""

    def __init__(self, start: Message, messages: asyncio.Queue[Message]) -> None:
        self.status: int = start["status"]
        self.headers = {k.decode().lower(): v.decode() for k, v in start.get("headers", [])}
        self._messages = messages
        self.ended = False

    async def chunk(self) -> bytes | None:
        """The next non-empty body chunk, or None once the app has ended the response."""
        while not self.ended:
            message = await asyncio.wait_for(self._messages.get(), READ_TIMEOUT_SECONDS)
            if message["type"] != "http.response.body":
                continue
            self.ended = not message.get("more_body", False)
            if message.get("body"):
                return bytes(message["body"])
        return None

    async def json(self) -> Any:
        """A refusal's JSON body (the whole body arrives before the response ends)."""
        body = b""
        while (part := await self.chunk()) is not None:
            body += part
        return json.loads(body)


@contextlib.asynccontextmanager
async def request(
    app: ASGIApp, method: str, path: str, *, body: Any, headers: dict[str, str]
) -> AsyncIterator[AsgiStream]:
    """Send ``body`` as JSON; on exit the client disconnects and the app's task is awaited."""
    payload = json.dumps(body).encode()
    raw_headers = [
        (b"host", b"dev"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        *((k.lower().encode(), v.encode()) for k, v in headers.items()),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": raw_headers,
        "client": ("127.0.0.1", 50000),
        "server": ("dev", 80),
    }
    messages: asyncio.Queue[Message] = asyncio.Queue()
    disconnected = asyncio.Event()
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": payload, "more_body": False}
        await disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        await messages.put(message)

    async def run() -> None:
        await app(scope, receive, send)

    task = asyncio.create_task(run())
    try:
        start = await asyncio.wait_for(messages.get(), READ_TIMEOUT_SECONDS)
        yield AsgiStream(start, messages)
    finally:
        disconnected.set()
        await asyncio.wait_for(task, READ_TIMEOUT_SECONDS)

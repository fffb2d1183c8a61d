"""Project event streams: registrations, messages, and a small SSE parser (pure, no I/O).

Why our own parser instead of httpx-sse's iterator: the caller's liveness watchdog must see every
byte the server sends. Heartbeats come in three forms (``event: ping`` with no data, comment lines,
and on older servers a bare ``1`` with no SSE framing at all), and a chunk that completes nothing
is still proof of life. So every chunk yields at least one message: a ``SecretEvent`` when one is
complete, otherwise a ``Heartbeat`` ("alive, nothing to act on").

Two message shapes are understood (service-contract.md):

- documented: data ``{"projectType": "secret-manager", "data": {"eventType": ..., "payload": ...}}``
- real server: ``event: secret-manager`` with data ``{"type": "secret-manager", "source", "time",
  "datacontenttype", "data": {"specversion", "event": "secret:update", "payload": ...}}``

Payload items are ``{secretId?, secretKey?, secretPath, environment}``; the import-mutation payload
is an object or an array. Unknown events, unknown fields and unparseable data are ignored (logged at
debug, without the data). ``event: error`` raises ``errors.StreamError``.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from secretferry.service import errors, wire

logger = logging.getLogger(__name__)

SECRET_CREATE = "secret:create"
SECRET_UPDATE = "secret:update"
SECRET_DELETE = "secret:delete"
SECRET_IMPORT_MUTATION = "secret:import-mutation"
EVENT_TYPES = frozenset({SECRET_CREATE, SECRET_UPDATE, SECRET_DELETE, SECRET_IMPORT_MUTATION})

# The only project type the API defines; others are "announced as coming later".
PROJECT_TYPE = "secret-manager"

# SSE allows CRLF, CR or LF line ends.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# Older servers write a bare "1" keep-alive that may share a line with the next field.
_LEADING_KEEPALIVE = re.compile(r"^1+(?=(event|data|id|retry)?:)")


@dataclasses.dataclass(frozen=True, slots=True)
class EventRegistration:
    """One item of ``register``: which event, optionally narrowed to an environment and path glob."""

    event: str
    environment_slug: str | None = None
    secret_path: str | None = None

    def to_wire(self) -> dict[str, Any]:
        conditions: dict[str, str] = {}
        if self.environment_slug is not None:
            conditions["environmentSlug"] = self.environment_slug
        if self.secret_path is not None:
            conditions["secretPath"] = self.secret_path
        wire: dict[str, Any] = {"event": self.event}
        if conditions:
            wire["conditions"] = conditions
        return wire


@dataclasses.dataclass(frozen=True, slots=True)
class EventItem:
    """Where a change happened; ``secret_key`` is absent for import mutations."""

    environment: str
    secret_path: str
    secret_key: str | None = None
    secret_id: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class SecretEvent:
    """A change notification. Empty ``items`` means the service named no usable location."""

    event_type: str
    items: tuple[EventItem, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Heartbeat:
    """Bytes arrived (ping, comment, keep-alive, partial or ignored message): the stream is alive."""


StreamMessage = SecretEvent | Heartbeat


def parse_message(event_name: str, data: str) -> SecretEvent | None:
    """Turn one dispatched SSE message into a ``SecretEvent``; ``None`` for anything else."""
    try:
        body = json.loads(data)
    except ValueError:
        logger.debug("ignoring SSE message %r: data is not JSON", event_name)
        return None
    if not isinstance(body, dict):
        logger.debug("ignoring SSE message %r: data is not an object", event_name)
        return None
    project_type = body.get("projectType", body.get("type"))
    if project_type is not None and project_type != PROJECT_TYPE:
        logger.debug("ignoring SSE message %r: project type %r", event_name, project_type)
        return None
    inner = body.get("data")
    if not isinstance(inner, dict):
        logger.debug("ignoring SSE message %r: no data object", event_name)
        return None
    event_type = inner.get("eventType", inner.get("event"))
    if event_type not in EVENT_TYPES and event_name in EVENT_TYPES:
        event_type = event_name
    if event_type not in EVENT_TYPES:
        logger.debug("ignoring SSE message %r: unknown event type", event_name)
        return None
    return SecretEvent(event_type=event_type, items=_parse_items(inner.get("payload")))


def _parse_items(payload: object) -> tuple[EventItem, ...]:
    raw = payload if isinstance(payload, list) else [payload]
    items = []
    for entry in raw:
        if not isinstance(entry, dict):
            continue
        environment, path = entry.get("environment"), entry.get("secretPath")
        if not isinstance(environment, str) or not isinstance(path, str):
            continue
        key, secret_id = entry.get("secretKey"), entry.get("secretId")
        items.append(
            EventItem(
                environment=environment,
                secret_path=path,
                secret_key=key if isinstance(key, str) else None,
                secret_id=secret_id if isinstance(secret_id, str) else None,
            )
        )
    return tuple(items)


def stream_error(data: str) -> errors.StreamError:
    """Build the error for ``event: error``: only the service's message and error name are kept."""
    message = "the service closed the event stream with an error"
    req_id: str | None = None
    status: int | None = None
    try:
        body = json.loads(data) if data else None
    except ValueError:
        body = data.strip() or None
    if isinstance(body, dict):
        text = body.get("message") or body.get("error")
        req_id = wire.request_id(body.get("reqId"))
        status = body.get("statusCode") if isinstance(body.get("statusCode"), int) else None
        if isinstance(text, str) and text:
            message = f"{message}: {wire.service_said(text)}"
    elif isinstance(body, str):
        message = f"{message}: {wire.service_said(body)}"
    return errors.StreamError(message, status_code=status, req_id=req_id)


class SSEParser:
    """Incremental SSE framing (WHATWG rules) that reports keep-alives instead of dropping them."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[StreamMessage]:
        """Consume bytes; return the messages they complete (raises ``StreamError`` on ``error``)."""
        text = self._buffer + self._decoder.decode(chunk)
        # A trailing "\r" may be the first half of "\r\n": keep it until the next chunk decides.
        held = ""
        if text.endswith("\r"):
            text, held = text[:-1], "\r"
        lines = _LINE_BREAK.split(text)
        self._buffer = lines.pop() + held
        out: list[StreamMessage] = []
        for line in lines:
            message = self._line(line)
            if message is not None:
                out.append(message)
        return out

    def _line(self, line: str) -> StreamMessage | None:
        line = _LEADING_KEEPALIVE.sub("", line)
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return Heartbeat()
        name, sep, value = line.partition(":")
        if not sep:
            # A line with no colon ("1" from older servers): no field we use; proof of life.
            return Heartbeat()
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None

    def _dispatch(self) -> StreamMessage | None:
        event, data = self._event or "message", "\n".join(self._data)
        had_fields = bool(self._event or self._data)
        self._event, self._data = "", []
        if not had_fields:
            return None
        if event == "ping":
            return Heartbeat()
        if event == "error":
            raise stream_error(data)
        parsed = parse_message(event, data)
        return parsed if parsed is not None else Heartbeat()


async def iter_messages(chunks: AsyncIterator[bytes]) -> AsyncGenerator[StreamMessage, None]:
    """Yield at least one message per non-empty chunk (see the module docstring)."""
    parser = SSEParser()
    async for chunk in chunks:
        if not chunk:
            continue
        messages = parser.feed(chunk)
        if not messages:
            messages = [Heartbeat()]
        for message in messages:
            yield message

"""Project event streams: registrations, messages, and a small SSE parser (pure, no I/O).

Why our own parser instead of httpx-sse's iterator: the caller's liveness watchdog must see every
byte the server sends. Heartbeats come in three forms (``event: ping`` with no data, comment lines,
and on the oldest servers the single byte ``1`` with no newline and no SSE framing at all), and a
chunk that completes nothing is still proof of life. So every chunk yields at least one message: a
``SecretEvent`` when one is complete, otherwise a ``Heartbeat`` ("alive, nothing to act on").
httpx-sse's ``aiter_sse`` yields only complete events (comments dropped, the bare ``1`` never
completes one), so it would starve the watchdog; that is why it is not a dependency.

The real service has shipped three generations of this stream, and the seed documents a fourth
shape (docs/service-contract.md, "Event stream"); all are understood here:

- documented: no ``event:`` line, data ``{"projectType": "secret-manager", "data": {"eventType",
  "payload"}}``;
- old: no ``event:`` line, data ``{"type", ..., "data": {"eventType": "update-secret", "payload"}}``
  with audit event names (``create-secret``, ``update-secrets``, ...);
- middle: ``event: secret-manager``, data ``{"type", "source", "time", "datacontenttype", "data":
  {"specversion": 1, "event": "secret:update", "payload": [...]}}``;
- newest: ``event: secret:update``, data ``{"type", "data": {"eventType", "payload"}}`` with the key
  in ``secretKeys``;
- and a flat ``event: secret:update`` / ``data: {environment, secretPath, projectId, secretKey}``
  seen in another consumer.

Payload items carry ``environment`` and ``secretPath`` and a key as ``secretKey`` (string),
``secretKeys`` (string or list) or not at all; the import-mutation payload is an object or an array.

A data message that is not understood is NOT a heartbeat: dropping it is how a change gets lost
when a server speaks a shape we have not seen. It becomes a ``SecretEvent`` of type
``UNKNOWN_CHANGE`` with no items, which the stream manager turns into a (rate-limited) nudge of every
scope the stream serves. Only messages that are understood as "no change" are ignored: pings,
comments, read audit events (``get-secrets``) and events of another project type.
``event: error`` raises ``errors.StreamError``.
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
UNKNOWN_CHANGE = "unknown"
"""The type of a message that was not understood: a change somewhere in what the stream serves."""

# The oldest generation names events after its audit log. Reads ("get-secrets") change nothing.
_AUDIT_NAMES = {
    "create-secret": SECRET_CREATE,
    "create-secrets": SECRET_CREATE,
    "update-secret": SECRET_UPDATE,
    "update-secrets": SECRET_UPDATE,
    "delete-secret": SECRET_DELETE,
    "delete-secrets": SECRET_DELETE,
}
_READ_PREFIXES = ("get-", "read-")

# The oldest generation registers ``{subject, action, conditions}``; middle and newest register
# ``{event, conditions}``. Each server validates its own keys and strips the others (zod's default
# for objects), so every item carries both forms and one body works on every generation.
OLD_SUBJECT = "secrets"
OLD_ACTION = "subscribe"

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
        wire: dict[str, Any] = {"event": self.event, "subject": OLD_SUBJECT, "action": OLD_ACTION}
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
    """A change notification. Empty ``items`` means the service named no usable location (or the
    message was not understood, ``event_type == UNKNOWN_CHANGE``): a change of unknown scope."""

    event_type: str
    items: tuple[EventItem, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Heartbeat:
    """Bytes arrived (ping, comment, keep-alive, partial message, or one understood as no change):
    the stream is alive."""


StreamMessage = SecretEvent | Heartbeat


def parse_message(event_name: str, data: str) -> SecretEvent | None:
    """Turn one dispatched SSE message into a ``SecretEvent``; ``None`` when it is understood as no
    change (read audit event, another project type). Anything not understood is ``UNKNOWN_CHANGE``."""
    try:
        body = json.loads(data)
    except ValueError:
        return _unknown(event_name, "data is not JSON")
    if not isinstance(body, dict):
        return _unknown(event_name, "data is not an object")
    project_type = body.get("projectType", body.get("type"))
    if isinstance(project_type, str) and project_type != PROJECT_TYPE:
        logger.debug("ignoring SSE message %r: project type %r", event_name, project_type)
        return None
    inner = body.get("data")
    if isinstance(inner, dict):
        named = inner.get("eventType", inner.get("event", inner.get("event_type")))
        payload = inner.get("payload")
    elif "environment" in body or "secretPath" in body:
        named, payload = None, body  # the flat shape: the location at the top level
    else:
        return _unknown(event_name, "no data object")
    kind = _kind(named) if named is not None else None
    if kind is None:
        kind = _kind(event_name)
    if kind == _READ:
        return None
    if kind is None:
        return _unknown(event_name, "unknown event type")
    return SecretEvent(event_type=kind, items=_parse_items(payload))


_READ = "read"


def _kind(name: object) -> str | None:
    """Our event type for a server's event name, ``_READ`` for a read audit event, else None."""
    if not isinstance(name, str):
        return None
    if name in EVENT_TYPES:
        return name
    if name in _AUDIT_NAMES:
        return _AUDIT_NAMES[name]
    if name.startswith(_READ_PREFIXES):
        return _READ
    return None


def _unknown(event_name: str, why: str) -> SecretEvent:
    logger.debug("SSE message %r not understood (%s): treated as a change of unknown scope", event_name, why)
    return SecretEvent(event_type=UNKNOWN_CHANGE)


def _parse_items(payload: object) -> tuple[EventItem, ...]:
    raw = payload if isinstance(payload, list) else [payload]
    items = []
    for entry in raw:
        if not isinstance(entry, dict):
            continue
        environment, path = entry.get("environment"), entry.get("secretPath")
        if not isinstance(environment, str) or not isinstance(path, str):
            continue
        secret_id = entry.get("secretId")
        for key in _keys(entry):
            items.append(
                EventItem(
                    environment=environment,
                    secret_path=path,
                    secret_key=key,
                    secret_id=secret_id if isinstance(secret_id, str) else None,
                )
            )
    return tuple(items)


def _keys(entry: dict[str, Any]) -> list[str | None]:
    """``secretKey`` (string) or ``secretKeys`` (string or list); ``[None]`` when neither."""
    keys: list[str | None] = []
    for field in ("secretKey", "secretKeys"):
        value = entry.get(field)
        if isinstance(value, str):
            keys.append(value)
        elif isinstance(value, list):
            keys.extend(k for k in value if isinstance(k, str))
    return list(dict.fromkeys(keys)) or [None]


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
        if not data.strip():
            return Heartbeat()  # an event with no data names nothing that changed
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

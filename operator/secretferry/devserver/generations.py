"""The generations of the project event stream, byte for byte (docs/service-contract.md, "Event stream").

The real service has shipped three shapes of this stream and servers of each are still deployed;
the seed's docs/service-api.md documents a fourth. A client must survive all of them, so the dev server
speaks whichever one it is started with (``--event-generation``). Everything that differs between
them lives here so that ``events`` (fan-out) and ``routes_events`` (refusals, timers) stay the same
for all four:

- documented: register ``{event?, conditions?}``; glob paths (absent: everything); ``data:`` only.
- old: register ``{subject, action, conditions}``; glob paths; heartbeat the single byte ``1``;
  audit-log event names, one frame per key; no import mutations; no error event on re-check.
- middle: register ``{event, conditions?}``; glob paths (``"/p"`` = that folder only);
  ``event: secret-manager`` envelope; re-check failure sends the JSON error body.
- newest: register as middle; ``startsWith`` paths; ``event: <kind>``, ``secretKeys``; re-check
  failure sends a fixed message.

Register items are validated with pydantic; a violation is a ``pydantic.ValidationError`` that the
route answers 422 like every other body error. Unknown keys are ignored (the real server's zod
schemas strip them), which is why one item shape, ``{event, subject, action, conditions}``, is
accepted by every generation.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter

from secretferry.devserver import events, globs
from secretferry.devserver.config import EventGeneration
from secretferry.devserver.errors import ApiError, BadRequest, error_body
from secretferry.devserver.events import Change, Registration
from secretferry.devserver.timeutil import iso

PROJECT_TYPE = "secret-manager"
PING = b"event: ping\n\n"
# The oldest servers wrote this single byte as keep-alive: no newline, no SSE framing at all.
OLD_HEARTBEAT = b"1"
# What the newest server sends, verbatim, when the 60 s re-check fails (it drops the reason).
NEWEST_RECHECK_MESSAGE = "Permission denied or refresh failed"
# Audit-log names the oldest generation used as ``eventType`` (it had no import-mutation event).
OLD_EVENT_NAMES = {
    events.CREATE: "create-secret",
    events.UPDATE: "update-secret",
    events.DELETE: "delete-secret",
}
# Envelope fields of the old and middle generations (CloudEvents-like; ``specversion`` a number).
ENVELOPE_SOURCE = "infisical"
ENVELOPE_SPEC_VERSION = 1

EventKind = Literal["secret:create", "secret:update", "secret:delete", "secret:import-mutation"]


def _json(body: Any) -> str:
    return json.dumps(body, separators=(",", ":"))


def _data_frame(body: Any) -> bytes:
    return f"data: {_json(body)}\n\n".encode()


def _event_frame(now: float, event: str, body: Any) -> bytes:
    """``id:`` is the send time in epoch milliseconds, as ``Date.now()`` gives it."""
    return f"id: {int(now * 1000)}\nevent: {event}\ndata: {_json(body)}\n\n".encode()


def _error_body_frame(err: ApiError) -> bytes:
    body = error_body(err.status, err.name, err.message, err.details)
    return f"event: error\ndata: {_json(body)}\n\n".encode()


class _Item(BaseModel):
    # Unknown keys are ignored, like the real service's zod schemas in strip mode.
    model_config = ConfigDict(extra="ignore")


class _DocumentedConditions(_Item):
    environmentSlug: str | None = None
    secretPath: str | None = None


class _DocumentedItem(_Item):
    event: str | None = None
    conditions: _DocumentedConditions | None = None


class _OldConditions(_Item):
    environmentSlug: str
    secretPath: str


class _OldItem(_Item):
    # The oldest router asked for ``Subscribe`` on the ``Secrets`` subject, CASL-style.
    subject: Literal["secrets"]
    action: Literal["subscribe"]
    conditions: _OldConditions


class _Conditions(_Item):
    environmentSlug: str
    secretPath: str = "/"


class _EventItem(_Item):
    event: EventKind
    conditions: _Conditions | None = None


_DOCUMENTED_ITEMS = TypeAdapter(list[_DocumentedItem])
_OLD_ITEMS = TypeAdapter(list[_OldItem])
_EVENT_ITEMS = TypeAdapter(list[_EventItem])


class Generation:
    """One generation's wire format; the base holds what most of them share."""

    name: EventGeneration
    checks_each_event: bool = False

    def parse_registrations(self, items: list[dict[str, Any]]) -> list[Registration]:
        """The ``register`` items as filters; ``pydantic.ValidationError`` (422) when malformed."""
        out = []
        for item in _EVENT_ITEMS.validate_python(items):
            conditions = item.conditions
            out.append(
                Registration(
                    event=item.event,
                    environment=conditions.environmentSlug if conditions else None,
                    secret_path=conditions.secretPath if conditions else None,
                )
            )
        return out

    def matches(self, reg: Registration, event: str, change: Change) -> bool:
        """Whether ``reg`` selects ``event`` at the change's location (glob paths by default)."""
        if reg.event is not None and reg.event != event:
            return False
        if reg.environment is not None and reg.environment != change.environment:
            return False
        return reg.secret_path is None or globs.subscription_path_matches(reg.secret_path, change.secret_path)

    def encode(self, event: str, changes: list[Change], now: float) -> bytes:
        """The bytes one stream receives for ``changes``; empty when this generation sends nothing."""
        raise NotImplementedError

    def heartbeat(self) -> bytes:
        return PING

    def error_frame(self, err: ApiError) -> bytes:
        """What is sent before closing when the re-check fails; empty: just close."""
        return _error_body_frame(err)


class Documented(Generation):
    """docs/service-api.md: ``data:`` only, ``{projectType, data: {eventType, payload}}``."""

    name: EventGeneration = "documented"

    def parse_registrations(self, items: list[dict[str, Any]]) -> list[Registration]:
        out = []
        for item in _DOCUMENTED_ITEMS.validate_python(items):
            if item.event is not None and item.event not in events.EVENT_KINDS:
                raise BadRequest(f"Unknown event '{item.event}'")
            conditions = item.conditions
            out.append(
                Registration(
                    event=item.event,
                    environment=conditions.environmentSlug if conditions else None,
                    secret_path=conditions.secretPath if conditions else None,
                )
            )
        return out

    def encode(self, event: str, changes: list[Change], now: float) -> bytes:
        payload: Any
        if event == events.IMPORT_MUTATION:
            payload = {"environment": changes[0].environment, "secretPath": changes[0].secret_path}
        else:
            payload = [
                {"environment": c.environment, "secretPath": c.secret_path, "secretKey": c.secret_key}
                for c in changes
            ]
        return _data_frame({"projectType": PROJECT_TYPE, "data": {"eventType": event, "payload": payload}})


class Old(Generation):
    """Oldest real server: one ``data:`` frame per changed key with audit-log event names."""

    name: EventGeneration = "old"

    def parse_registrations(self, items: list[dict[str, Any]]) -> list[Registration]:
        # No event kind in the item: every secret mutation under the conditions is sent.
        return [
            Registration(
                event=None,
                environment=item.conditions.environmentSlug,
                secret_path=item.conditions.secretPath,
            )
            for item in _OLD_ITEMS.validate_python(items)
        ]

    def encode(self, event: str, changes: list[Change], now: float) -> bytes:
        name = OLD_EVENT_NAMES.get(event)
        if name is None:  # import mutations did not exist yet
            return b""
        return b"".join(
            _data_frame(
                {
                    "type": PROJECT_TYPE,
                    "source": ENVELOPE_SOURCE,
                    "time": iso(now),
                    "datacontenttype": "application/json",
                    "data": {
                        "specversion": ENVELOPE_SPEC_VERSION,
                        "eventType": name,
                        "payload": {
                            "environment": c.environment,
                            "secretPath": c.secret_path,
                            "secretKey": c.secret_key,
                            "secretId": c.secret_id,
                        },
                    },
                }
            )
            for c in changes
        )

    def heartbeat(self) -> bytes:
        return OLD_HEARTBEAT

    def error_frame(self, err: ApiError) -> bytes:
        # The contract lists no error event for this generation: the stream just ends.
        return b""


class Middle(Generation):
    """``event: secret-manager`` with a CloudEvents-like envelope; import payload an array."""

    name: EventGeneration = "middle"

    def encode(self, event: str, changes: list[Change], now: float) -> bytes:
        payload = [
            {"secretPath": c.secret_path, "environment": c.environment}
            if event == events.IMPORT_MUTATION
            else {
                "secretId": c.secret_id,
                "secretKey": c.secret_key,
                "secretPath": c.secret_path,
                "environment": c.environment,
            }
            for c in changes
        ]
        body = {
            "type": PROJECT_TYPE,
            "source": ENVELOPE_SOURCE,
            "time": iso(now),
            "datacontenttype": "application/json",
            "data": {"specversion": ENVELOPE_SPEC_VERSION, "event": event, "payload": payload},
        }
        return _event_frame(now, PROJECT_TYPE, body)


class Newest(Generation):
    """Today's server (project-events-sse-service.ts): ``event: <kind>``, ``secretKeys`` per key,
    ``startsWith`` path filter, import payload an object, and each event checked against the
    subscriber's Secret Events permission at the event's own location (``canReceiveEvent``)."""

    name: EventGeneration = "newest"
    checks_each_event = True

    def matches(self, reg: Registration, event: str, change: Change) -> bool:
        # canReceiveEvent: JS truthiness, so an empty condition filters nothing; "/p/**" is a
        # literal prefix here and matches nothing.
        if reg.event != event:
            return False
        if reg.environment and change.environment != reg.environment:
            return False
        return not reg.secret_path or change.secret_path.startswith(reg.secret_path)

    def encode(self, event: str, changes: list[Change], now: float) -> bytes:
        if event == events.IMPORT_MUTATION:
            payload: Any = {"environment": changes[0].environment, "secretPath": changes[0].secret_path}
            return _event_frame(
                now, event, {"type": PROJECT_TYPE, "data": {"eventType": event, "payload": payload}}
            )
        # The real server publishes one event per (environment, folder) with a list of keys.
        groups: dict[tuple[str, str], list[Change]] = {}
        for c in changes:
            groups.setdefault((c.environment, c.secret_path), []).append(c)
        return b"".join(
            _event_frame(
                now,
                event,
                {
                    "type": PROJECT_TYPE,
                    "data": {
                        "eventType": event,
                        "payload": [
                            {"environment": env, "secretPath": path, "secretKeys": c.secret_key}
                            for c in group
                        ],
                    },
                },
            )
            for (env, path), group in groups.items()
        )

    def error_frame(self, err: ApiError) -> bytes:
        return f"event: error\ndata: {_json({'message': NEWEST_RECHECK_MESSAGE})}\n\n".encode()


GENERATIONS: dict[EventGeneration, Generation] = {
    g.name: g for g in (Documented(), Old(), Middle(), Newest())
}


def get(name: EventGeneration) -> Generation:
    """The generation a server started with ``--event-generation name`` speaks (stateless, shared)."""
    return GENERATIONS[name]

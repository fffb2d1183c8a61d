"""Event fan-out: one asyncio queue per open stream, matched by registration filters.

Publishing encodes each distinct message once and does ``put_nowait`` per matching subscriber, so one
change reaching 200 streams costs a loop over 200 small objects, not 200 encodings or 200 tasks.
Nothing is stored: a change while no stream is open is only seen by a fresh list (real service).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from secretferry.devserver import globs
from secretferry.devserver.config import EventShape
from secretferry.devserver.timeutil import iso

CREATE = "secret:create"
UPDATE = "secret:update"
DELETE = "secret:delete"
IMPORT_MUTATION = "secret:import-mutation"
EVENT_KINDS = (CREATE, UPDATE, DELETE, IMPORT_MUTATION)
QUEUE_LIMIT = 1000  # a subscriber this far behind is dropped rather than growing memory without bound
DROP = None  # sentinel put on a queue to end its stream


@dataclass(frozen=True)
class Registration:
    """One ``register[]`` item; a missing field matches everything."""

    event: str | None
    environment: str | None
    secret_path: str | None

    def matches(self, event: str, environment: str, path: str) -> bool:
        if self.event is not None and self.event != event:
            return False
        if self.environment is not None and self.environment != environment:
            return False
        return self.secret_path is None or globs.subscription_path_matches(self.secret_path, path)


@dataclass(frozen=True)
class Change:
    """One changed item of a published event."""

    environment: str
    secret_path: str
    secret_key: str | None = None
    secret_id: str | None = None


@dataclass(eq=False)
class Subscriber:
    project_id: str
    identity_id: str
    token: str
    registrations: list[Registration]
    queue: asyncio.Queue[bytes | None] = field(default_factory=lambda: asyncio.Queue(QUEUE_LIMIT))

    def wants(self, event: str, change: Change) -> bool:
        return any(r.matches(event, change.environment, change.secret_path) for r in self.registrations)


def encode(shape: EventShape, event: str, changes: list[Change], now: float) -> bytes:
    """One SSE frame in the documented shape or the real server's envelope."""
    if shape == "envelope":
        payload: Any = [
            {
                "secretId": c.secret_id,
                "secretKey": c.secret_key,
                "secretPath": c.secret_path,
                "environment": c.environment,
            }
            if event != IMPORT_MUTATION
            else {"secretPath": c.secret_path, "environment": c.environment}
            for c in changes
        ]
        body: dict[str, Any] = {
            "type": "secret-manager",
            "source": "secretferry-devserver",
            "time": iso(now),
            "datacontenttype": "application/json",
            "data": {"specversion": "1.0", "event": event, "payload": payload},
        }
        return f"event: secret-manager\ndata: {json.dumps(body, separators=(',', ':'))}\n\n".encode()
    if event == IMPORT_MUTATION:
        payload = {"environment": changes[0].environment, "secretPath": changes[0].secret_path}
    else:
        payload = [
            {"environment": c.environment, "secretPath": c.secret_path, "secretKey": c.secret_key}
            for c in changes
        ]
    body = {"projectType": "secret-manager", "data": {"eventType": event, "payload": payload}}
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n".encode()


class EventBus:
    """Open streams by project; counts per (project, identity) for the stream cap."""

    def __init__(self, shape: EventShape) -> None:
        self.shape: EventShape = shape
        self.by_project: dict[str, set[Subscriber]] = {}
        self.delivered = 0

    def open(self, subscriber: Subscriber) -> None:
        self.by_project.setdefault(subscriber.project_id, set()).add(subscriber)

    def close(self, subscriber: Subscriber) -> None:
        subscribers = self.by_project.get(subscriber.project_id)
        if subscribers is not None:
            subscribers.discard(subscriber)

    def count(self, project_id: str, identity_id: str) -> int:
        return sum(1 for s in self.by_project.get(project_id, ()) if s.identity_id == identity_id)

    @property
    def open_streams(self) -> int:
        return sum(len(subs) for subs in self.by_project.values())

    def publish(self, project_id: str, event: str, changes: list[Change], now: float) -> int:
        """Queue the event on every matching stream; returns how many streams got it."""
        if not changes:
            return 0
        frames: dict[tuple[int, ...], bytes] = {}
        sent = 0
        for subscriber in list(self.by_project.get(project_id, ())):
            picked = tuple(i for i, c in enumerate(changes) if subscriber.wants(event, c))
            if not picked:
                continue
            if event == IMPORT_MUTATION:
                picked = picked[:1]
            frame = frames.get(picked)
            if frame is None:
                frame = frames[picked] = encode(self.shape, event, [changes[i] for i in picked], now)
            try:
                subscriber.queue.put_nowait(frame)
                sent += 1
            except asyncio.QueueFull:
                self._drop(subscriber)
        self.delivered += sent
        return sent

    def publish_each(self, project_id: str, event: str, changes: list[Change], now: float) -> int:
        """Import mutations are one message per importing path."""
        return sum(self.publish(project_id, event, [change], now) for change in changes)

    def drop_all(self) -> int:
        subscribers = [s for subs in self.by_project.values() for s in subs]
        for subscriber in subscribers:
            self._drop(subscriber)
        return len(subscribers)

    def _drop(self, subscriber: Subscriber) -> None:
        self.close(subscriber)
        while True:
            try:
                subscriber.queue.put_nowait(DROP)
                return
            except asyncio.QueueFull:
                subscriber.queue.get_nowait()

"""Event fan-out: one asyncio queue per open stream, matched by registration filters.

Publishing encodes each distinct message once and does ``put_nowait`` per matching subscriber, so one
change reaching 200 streams costs a loop over 200 small objects, not 200 encodings or 200 tasks.
Nothing is stored: a change while no stream is open is only seen by a fresh list (real service).
Which changes a registration selects and the bytes sent are the running generation's (``Dialect``,
implemented by ``generations``), so this module is the same for all of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

CREATE = "secret:create"
UPDATE = "secret:update"
DELETE = "secret:delete"
IMPORT_MUTATION = "secret:import-mutation"
EVENT_KINDS = (CREATE, UPDATE, DELETE, IMPORT_MUTATION)
QUEUE_LIMIT = 1000  # a subscriber this far behind is dropped rather than growing memory without bound
DROP = None  # sentinel put on a queue to end its stream


@dataclass(frozen=True)
class Registration:
    """One ``register[]`` item, as the running generation understood it; None: no such filter."""

    event: str | None
    environment: str | None
    secret_path: str | None


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


class Dialect(Protocol):
    """What fan-out needs of an event-stream generation (``generations.Generation``)."""

    def matches(self, reg: Registration, event: str, change: Change) -> bool: ...

    def encode(self, event: str, changes: list[Change], now: float) -> bytes: ...

    @property
    def checks_each_event(self) -> bool:
        """Whether each event is also checked against the subscriber's permission at its own
        location (the newest server's ``canReceiveEvent``), not only the registrations."""
        ...


MayReceive = Callable[["Subscriber", str, Change], bool]


class EventBus:
    """Open streams by project; counts per (project, identity) for the stream cap."""

    def __init__(self, dialect: Dialect, may_receive: MayReceive | None = None) -> None:
        self.dialect = dialect
        self._may_receive = may_receive
        self.by_project: dict[str, set[Subscriber]] = {}
        self.delivered = 0
        # Told of every published change, streams or not (project webhooks: devserver.webhooks).
        self.on_publish: Callable[[str, list[Change]], None] | None = None

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
        if self.on_publish is not None:
            self.on_publish(project_id, changes)
        frames: dict[tuple[int, ...], bytes] = {}
        sent = 0
        for subscriber in list(self.by_project.get(project_id, ())):
            picked = tuple(i for i, c in enumerate(changes) if self._wants(subscriber, event, c))
            if not picked:
                continue
            if event == IMPORT_MUTATION:
                picked = picked[:1]
            frame = frames.get(picked)
            if frame is None:
                frame = frames[picked] = self.dialect.encode(event, [changes[i] for i in picked], now)
            if not frame:  # this generation has no message for it (old: import mutations)
                continue
            try:
                subscriber.queue.put_nowait(frame)
                sent += 1
            except asyncio.QueueFull:
                self._drop(subscriber)
        self.delivered += sent
        return sent

    def _wants(self, subscriber: Subscriber, event: str, change: Change) -> bool:
        if not any(self.dialect.matches(r, event, change) for r in subscriber.registrations):
            return False
        if self.dialect.checks_each_event and self._may_receive is not None:
            return self._may_receive(subscriber, event, change)
        return True

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

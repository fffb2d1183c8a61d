"""Stand-ins for the controller's collaborators' ports: the Kubernetes client and the work queue.

No apiserver: ``FakeKube`` answers ``request`` from a handler and records every call; the queue
records what was enqueued instead of running it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from secretferry.kube import client as kube_client
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import scheduler, state

Answer = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]


async def _empty(method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    return {}


class FakeKube:
    def __init__(self, answer: Answer = _empty) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self._answer = answer

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.calls.append((method, path, kwargs))
        return await self._answer(method, path, kwargs)

    def port(self) -> kube_client.Kube:
        return cast(kube_client.Kube, self)


class RecordingQueue:
    """Keeps the last ``live`` each key was queued with."""

    def __init__(self) -> None:
        self.queued: dict[state.SyncKey, bool] = {}

    def enqueue(self, key: state.SyncKey, *, live: bool = True, first: bool = False) -> None:
        self.queued[key] = live

    def forget(self, key: state.SyncKey) -> None:
        self.queued.pop(key, None)

    def port(self) -> scheduler.Scheduler[state.SyncKey]:
        return cast(scheduler.Scheduler[state.SyncKey], self)


class FakeSession:
    """A service session whose login fails with ``error`` (or works when None); never logged in."""

    last_login_at = None
    expires_at = None

    def __init__(self, error: Exception | None = None, *, api_root: str = "http://127.0.0.1:9/api") -> None:
        self.error = error
        self.api_root = api_root
        self.logins = 0

    async def token(self) -> str:
        self.logins += 1
        if self.error is not None:
            raise self.error
        return "t"


class FakeSessions:
    """The registry's ``session(entry)``: hands every identity the same fake session."""

    def __init__(self, session: FakeSession) -> None:
        self._session = session

    async def session(self, entry: ident_mod.IdentityEntry) -> FakeSession:
        entry.session = cast(Any, self._session)
        return self._session

    def port(self) -> ident_mod.IdentityRegistry:
        return cast(ident_mod.IdentityRegistry, self)

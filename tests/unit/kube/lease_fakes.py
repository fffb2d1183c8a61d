"""An in-memory apiserver for one Lease, and candidates electing with it, on virtual loop time.

The store checks resourceVersion like the apiserver (a PUT with a stale one gets 409, a POST of
an existing Lease AlreadyExists), so races are decided by the same rule as in a cluster. Each
candidate reaches it over its own line, which a test can cut (requests refused) or make hang
(never answered), and has its own wall clock, to skew.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from secretferry.kube import errors, leases
from secretferry.kube.client import Kube

NAMESPACE, NAME = "ferry-system", "ferry-leader"
COLLECTION = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
PATH = f"{COLLECTION}/{NAME}"
TIMINGS = leases.Timings(lease_duration_seconds=15, renew_deadline_seconds=10.0, retry_period_seconds=2.0)
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)  # the true wall time at loop time 0
LATENCY_SECONDS = 0.005  # per request: enough to order concurrent requests, far below every timing


@dataclass(frozen=True)
class Call:
    at: float  # loop time the request reached the store
    who: str
    method: str
    status: int


class LeaseStore:
    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.calls: list[Call] = []

    def handle(self, who: str, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        now = asyncio.get_running_loop().time()
        try:
            answer = self._handle(method, path, body)
        except errors.KubeError as exc:
            self.calls.append(Call(now, who, method, exc.status))
            raise
        self.calls.append(Call(now, who, method, 200))
        return answer

    def _handle(self, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        if method == "GET":
            assert path == PATH
            if self.lease is None:
                raise errors.NotFound(404, "NotFound", f'leases "{NAME}" not found')
            return copy.deepcopy(self.lease)
        assert body is not None
        if method == "POST":
            assert path == COLLECTION
            if self.lease is not None:
                raise errors.AlreadyExists(409, "AlreadyExists", f'leases "{NAME}" already exists')
        else:
            assert (method, path) == ("PUT", PATH)
            if self.lease is None:  # deleted under the holder: the apiserver's answer
                raise errors.NotFound(404, "NotFound", f'leases "{NAME}" not found')
            if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                raise errors.Conflict(409, "Conflict", "the object has been modified")
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.lease)

    @property
    def spec(self) -> dict[str, Any]:
        return dict((self.lease or {}).get("spec") or {})

    def last_write(self, who: str) -> float:
        return max(
            c.at for c in self.calls if c.who == who and c.method in ("POST", "PUT") and c.status == 200
        )


class Line:
    """One candidate's connection to the store: ``up``, ``refused`` (503) or ``hangs``."""

    def __init__(self, store: LeaseStore, who: str) -> None:
        self.store, self.who, self.mode = store, who, "up"

    async def request(self, method: str, path: str, *, body: dict[str, Any] | None = None) -> dict[str, Any]:
        if self.mode == "hangs":
            await asyncio.Event().wait()
        await asyncio.sleep(LATENCY_SECONDS)
        if self.mode == "refused":
            raise errors.Unavailable(503, "ServiceUnavailable", "connection refused")
        return self.store.handle(self.who, method, path, copy.deepcopy(body))


class Candidate:
    """One replica: an Elector on its own line and wall clock, recording when it led."""

    def __init__(
        self,
        store: LeaseStore,
        identity: str,
        *,
        skew_seconds: float = 0.0,
        annotations: dict[str, str] | None = None,
    ) -> None:
        self.line = Line(store, identity)
        self.identity = identity
        self.elector = leases.Elector(
            cast(Kube, self.line),
            namespace=NAMESPACE,
            name=NAME,
            identity=identity,
            timings=TIMINGS,
            wall=lambda: T0 + timedelta(seconds=asyncio.get_running_loop().time() + skew_seconds),
            jitter=lambda: 0.0,  # polls exactly every retry period: the timings below are exact
            annotations=annotations,
        )
        self.started_at: float | None = None
        self.stopped_at: float | None = None
        self.task: asyncio.Task[None] | None = None

    def run(self) -> Candidate:
        self.task = asyncio.create_task(
            self.elector.run(on_started_leading=self._started, on_stopped_leading=self._stopped)
        )
        return self

    async def crash(self) -> None:
        """Killed: no release, no last word."""
        assert self.task is not None
        self.task.cancel()
        await asyncio.wait([self.task])

    async def _started(self) -> None:
        self.started_at = asyncio.get_running_loop().time()

    async def _stopped(self) -> None:
        self.stopped_at = asyncio.get_running_loop().time()

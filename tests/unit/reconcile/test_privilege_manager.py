"""The TemporaryPrivilege loop against the in-process dev server, on virtual loop time.

The dev server's clock and the manager's are the loop's (``looptime``), so a window of an hour
passes in no wall time, and the calls at the service are counted exactly: the end of a window
turns the status Expired with no call; drift is repaired at the check interval; deletion removes
the privilege and then our finalizer; a server without the v2 routes is changed through v1.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import AsyncIterator, Awaitable, Callable
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest
from devserver import inloop  # tests/unit/devserver: the dev server served on the loop
from reconcile_fakes import FakeApiserver, FakeKube

from secretferry import settings as settings_mod
from secretferry.devserver.app import create_app
from secretferry.devserver.config import DevServerConfig
from secretferry.kube import status as kube_status
from secretferry.models import base as models_base
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import reasons
from secretferry.reconcile.privileges import manager as manager_mod
from secretferry.service import client

pytestmark = pytest.mark.looptime

TOKEN = "admin-token"
TARGET = "aaaaaaaa-0000-4000-8000-00000000000b"
T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
CHECK_SECONDS = 60.0
PATH = kube_status.resource_path(
    group=models_base.GROUP,
    version=models_base.VERSION,
    plural="temporaryprivileges",
    namespace=None,
    name="grant",
)
SEED: dict[str, Any] = {
    "organizations": [{"id": "org-1", "name": "Org", "slug": "org"}],
    "projects": [
        {"id": "22222222-2222-4222-8222-222222222222", "slug": "proj", "environments": [{"slug": "dev"}]}
    ],
    "identities": [
        {
            "id": "aaaaaaaa-0000-4000-8000-00000000000a",
            "name": "admin",
            "organization": "org",
            "accessTokens": [{"token": TOKEN}],
            "projects": [{"project": "proj", "role": "admin"}],
        },
        {
            "id": TARGET,
            "name": "target",
            "organization": "org",
            "projects": [{"project": "proj", "role": "no-access"}],
        },
    ],
}
READ = {
    "actions": ["read"],
    "subject": "secrets",
    "conditions": {"environment": "dev", "secretPath": "/a/**"},
}
RICH = {"actions": ["describeSecret"], "subject": "secrets", "conditions": {"secretName": "X"}}


class _Session:
    """The granter's session: every call goes to the dev server with the admin token."""

    def __init__(self, api: client.ServiceClient) -> None:
        self.api = api

    async def call(self, fn: Callable[[client.ServiceClient], Awaitable[Any]]) -> Any:
        return await fn(self.api)


class _Registry:
    def __init__(self, session: _Session) -> None:
        self._session = session
        self.names = {"granter"}

    def get(self, key: ident_mod.IdentityKey) -> Any:
        known = key[0] == ident_mod.CLUSTER and key[2] in self.names
        return SimpleNamespace(model=object(), invalid=None) if known else None

    async def session(self, entry: Any) -> _Session:
        return self._session


class _Counting(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.calls: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(f"{request.method} {request.url.path}")
        return await self.inner.handle_async_request(request)


class World:
    def __init__(self, api: client.ServiceClient, transport: _Counting, **settings: Any) -> None:
        loop = asyncio.get_running_loop()
        self.base = loop.time()
        self.api = api
        self.transport = transport
        self.apiserver = FakeApiserver()
        self.statuses: list[dict[str, Any]] = []
        self.kube = FakeKube(self._answer)
        self.manager = manager_mod.PrivilegeManager(
            kube=self.kube.port(),
            settings=settings_mod.Settings(
                **{
                    "privilege_check_interval_seconds": CHECK_SECONDS,
                    "backoff_initial_seconds": 1,
                    "backoff_max_seconds": 4,
                    **settings,
                }
            ),
            identities=cast(ident_mod.IdentityRegistry, _Registry(_Session(api))),
            instance="test-0",
            now=lambda: T0 + datetime.timedelta(seconds=loop.time() - self.base),
        )

    async def _answer(self, method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        if method == "PATCH" and path.endswith("/status"):
            self.statuses.append(kwargs["body"]["status"])
        return await self.apiserver.answer(method, path, kwargs)

    def apply(self, **spec: Any) -> None:
        current = self.apiserver.objects.get(PATH)
        body = {
            "apiVersion": models_base.API_VERSION,
            "kind": "TemporaryPrivilege",
            "metadata": {
                "name": "grant",
                "creationTimestamp": "2030-01-01T00:00:00Z",
                "generation": 1 if current is None else current["metadata"]["generation"] + 1,
                **_kept(current),
            },
            "spec": {
                "granterRef": {"name": "granter"},
                "identityId": TARGET,
                "projectSlug": "proj",
                "permissions": [READ],
                **spec,
            },
        }
        self.apiserver.put(PATH, body)
        self.deliver()

    def deliver(self) -> None:
        self.manager.event("MODIFIED", self.apiserver.objects[PATH])

    def status(self) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for patch in self.statuses:
            merged = {**merged, **patch}
        return {k: v for k, v in merged.items() if v is not None}

    def reason(self, type_: str) -> str | None:
        return next((c["reason"] for c in self.status().get("conditions", []) if c["type"] == type_), None)

    async def held(self) -> list[Any]:
        return await self.api.list_identity_privileges(identity_id=TARGET, project_slug="proj")


def _kept(current: dict[str, Any] | None) -> dict[str, Any]:
    if current is None:
        return {}
    meta = current["metadata"]
    return {k: meta[k] for k in ("finalizers", "uid") if k in meta}


async def _world(**config: Any) -> tuple[client.ServiceClient, _Counting]:
    loop = asyncio.get_running_loop()
    base = loop.time()
    app = create_app(
        DevServerConfig(
            seed=SEED, admin_token="unused", clock=lambda: T0.timestamp() + loop.time() - base, **config
        )
    )
    transport = _Counting(httpx.ASGITransport(app=inloop.serve_in_loop(app)))
    return client.ServiceClient("http://dev.test", access_token=TOKEN, transport=transport), transport


@contextlib.asynccontextmanager
async def running(config: dict[str, Any] | None = None, **settings: Any) -> AsyncIterator[World]:
    """Made inside the test: the dev server's clock and the manager's read the test's own loop."""
    api, transport = await _world(**(config or {}))
    w = World(api, transport, **settings)
    w.manager.leading = True
    try:
        yield w
    finally:
        await w.manager.stop()
        await api.aclose()


async def test_granted_then_expired_by_a_timer_alone() -> None:
    async with running() as world:
        world.apply(temporaryRange="30s")
        await asyncio.sleep(1)
        assert world.reason(reasons.READY) == reasons.GRANTED
        assert world.reason(reasons.ACTIVE) == reasons.ACTIVE
        status = world.status()
        assert status["startTime"] == "2030-01-01T00:00:00Z" and status["expiresAt"] == "2030-01-01T00:00:30Z"
        held = await world.held()
        assert [p.id for p in held] == [status["privilegeId"]] and held[0].slug == "grant"
        finalizers = world.apiserver.objects[PATH]["metadata"]["finalizers"]
        assert finalizers == [manager_mod.FINALIZER]
        calls = len(world.transport.calls)
        await asyncio.sleep(30)
        assert world.reason(reasons.ACTIVE) == reasons.EXPIRED
        assert world.reason(reasons.READY) == reasons.GRANTED
        assert len(world.transport.calls) == calls  # the end of the window needed no call


async def test_drift_is_repaired_at_the_check_interval_with_the_same_window() -> None:
    async with running() as world:
        world.apply(temporaryRange="1h")
        await asyncio.sleep(1)
        first = world.status()["privilegeId"]
        await world.api.delete_identity_privilege_v2(first)
        await asyncio.sleep(CHECK_SECONDS / 2)
        assert await world.held() == []  # not yet looked at: no read before the interval
        await asyncio.sleep(CHECK_SECONDS)
        held = await world.held()
        assert len(held) == 1 and held[0].id != first
        assert held[0].temporary_access_start_time == T0  # a re-creation never extends the grant
        assert world.status()["privilegeId"] == held[0].id


async def test_at_rest_one_read_per_interval_and_no_write() -> None:
    async with running() as world:
        world.apply(temporaryRange="1d")
        await asyncio.sleep(1)
        world.transport.calls.clear()
        await asyncio.sleep(CHECK_SECONDS * 5)
        assert world.transport.calls == ["GET /api/v1/additional-privilege/identity"] * 5


async def test_a_spec_change_updates_by_id() -> None:
    async with running() as world:
        world.apply(temporaryRange="1h")
        await asyncio.sleep(1)
        first = world.status()["privilegeId"]
        world.transport.calls.clear()
        world.apply(temporaryRange="2h", permissions=[READ, RICH])
        await asyncio.sleep(1)
        assert f"PATCH /api/v2/identity-project-additional-privilege/{first}" in world.transport.calls
        held = await world.held()
        assert [(p.id, p.temporary_range, len(p.permissions)) for p in held] == [(first, "2h", 2)]
        assert world.status()["expiresAt"] == "2030-01-01T02:00:00Z"


async def test_deletion_removes_it_at_the_service_then_the_finalizer() -> None:
    async with running() as world:
        world.apply(temporaryRange="1h")
        await asyncio.sleep(1)
        body = world.apiserver.objects[PATH]
        body["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:05Z"
        world.deliver()
        await asyncio.sleep(1)
        assert await world.held() == []
        assert world.apiserver.objects[PATH]["metadata"].get("finalizers") in (None, [])


async def test_permanent_is_refused_without_the_setting() -> None:
    async with running() as world:
        world.apply(permanent=True)
        await asyncio.sleep(1)
        assert world.reason(reasons.READY) == reasons.PERMANENT_NOT_ALLOWED
        assert world.transport.calls == []  # nothing sent, not even a login
        assert await world.held() == []


async def test_permanent_with_the_setting() -> None:
    async with running(allow_permanent_privileges=True) as w:
        w.apply(permanent=True)
        await asyncio.sleep(1)
        held = await w.held()
        assert len(held) == 1 and not held[0].is_temporary and len(held[0].permissions) == 1
        assert w.reason(reasons.ACTIVE) == reasons.ACTIVE and "expiresAt" not in w.status()


async def test_without_the_v2_routes_changes_go_through_v1() -> None:
    async with running({"privileges_v2": False}) as w:
        transport = w.transport
        w.apply(temporaryRange="1h")
        await asyncio.sleep(1)
        first = w.status()["privilegeId"]
        w.apply(temporaryRange="3h")
        await asyncio.sleep(1)
        held = await w.held()
        assert [(p.id, p.temporary_range) for p in held] == [(first, "3h")]
        assert "PATCH /api/v1/additional-privilege/identity" in transport.calls
        # Rules only v2 carries: refused, and the privilege keeps what it had.
        w.apply(temporaryRange="3h", permissions=[RICH])
        await asyncio.sleep(1)
        assert w.reason(reasons.READY) == reasons.SERVER_NOT_SUPPORTED
        assert [len(p.permissions) for p in await w.held()] == [1]


async def test_a_missing_granter_is_retried_when_it_appears() -> None:
    # Retries an hour apart: only the identity event can bring the next pass within the test.
    async with running(backoff_initial_seconds=3600, backoff_max_seconds=3600) as world:
        world.apply(temporaryRange="1h", granterRef={"name": "later"})
        await asyncio.sleep(1)
        assert world.reason(reasons.READY) == reasons.GRANTER_NOT_FOUND
        assert world.reason(reasons.ACTIVE) == reasons.NOT_GRANTED
        registry = cast(_Registry, world.manager._identities)
        registry.names.add("later")
        world.manager.granter_changed("later")
        await asyncio.sleep(0.1)
        assert world.reason(reasons.READY) == reasons.GRANTED


async def test_a_resource_whose_granter_never_existed_can_be_deleted() -> None:
    async with running() as world:
        world.apply(temporaryRange="1h", granterRef={"name": "typo"})
        await asyncio.sleep(1)
        assert world.reason(reasons.READY) == reasons.GRANTER_NOT_FOUND
        body = world.apiserver.objects[PATH]
        assert body["metadata"]["finalizers"] == [manager_mod.FINALIZER]
        body["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:05Z"
        world.deliver()
        await asyncio.sleep(1)
        assert world.apiserver.objects[PATH]["metadata"].get("finalizers") in (None, [])
        assert world.transport.calls == []


async def test_two_resources_on_one_privilege_the_older_keeps_it() -> None:
    async with running() as world:
        world.apply(temporaryRange="1h", slug="shared")
        await asyncio.sleep(1)
        first = world.status()["privilegeId"]
        younger = {
            "apiVersion": models_base.API_VERSION,
            "kind": "TemporaryPrivilege",
            "metadata": {"name": "younger", "generation": 1, "creationTimestamp": "2030-01-01T00:00:01Z"},
            "spec": {
                "granterRef": {"name": "granter"},
                "identityId": TARGET,
                "projectSlug": "proj",
                "slug": "shared",
                "permissions": [RICH],
                "temporaryRange": "2h",
            },
        }
        younger_path = PATH.rsplit("/", 1)[0] + "/younger"
        world.apiserver.put(younger_path, younger)
        world.manager.event("ADDED", world.apiserver.objects[younger_path])
        await asyncio.sleep(CHECK_SECONDS * 2)
        conflict = [s for s in world.statuses if "SlugConflict" in str(s)]
        assert conflict and "'grant' already manages" in str(conflict[-1])
        held = await world.held()
        assert [(p.id, p.temporary_range) for p in held] == [(first, "1h")]  # untouched by the younger
        # The younger one's deletion leaves the older one's privilege alone.
        world.apiserver.objects[younger_path]["metadata"]["deletionTimestamp"] = "2030-01-01T00:03:00Z"
        world.manager.event("MODIFIED", world.apiserver.objects[younger_path])
        await asyncio.sleep(1)
        assert [p.id for p in await world.held()] == [first]


async def test_a_failing_service_is_retried_with_backoff_not_at_every_wake_up() -> None:
    faults = {"routes": [{"match": "GET /api/v1/additional-privilege/identity", "status": 503}]}
    async with running({"faults": faults}, backoff_initial_seconds=8, backoff_max_seconds=8) as world:
        world.apply(temporaryRange="1h")
        await asyncio.sleep(0.5)
        assert world.reason(reasons.READY) == reasons.SERVICE_UNAVAILABLE
        calls = len(world.transport.calls)
        for _ in range(5):  # echoes of our own status patches, kopf's re-lists
            world.deliver()
            await asyncio.sleep(0.1)
        assert len(world.transport.calls) == calls
        assert world.reason(reasons.READY) == reasons.SERVICE_UNAVAILABLE  # not Granted meanwhile
        assert len(world.statuses) == 1  # and not rewritten at each wake-up
        await asyncio.sleep(9)
        assert len(world.transport.calls) > calls  # the backoff step passed: tried again

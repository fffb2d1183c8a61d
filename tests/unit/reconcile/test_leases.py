"""DynamicSecretLease: the renewal schedule (table), and the keeper over virtual time.

The keeper runs against a fake lease service that behaves as the real one does (renewal adds the
TTL to the current expiry; refused past createdAt + maxTTL with a 400) and the fake apiserver;
time is looptime's, so an hour of renewals takes no wall time.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import types
from collections.abc import Callable
from typing import Any, cast

import pytest
import reconcile_fakes

from secretferry import settings as settings_mod
from secretferry.models import dynamicsecretlease as lease_models
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import reasons, rollouts
from secretferry.reconcile.leases import keeper as keeper_mod
from secretferry.reconcile.leases import schedule
from secretferry.service import errors as service_errors
from secretferry.service import leases as service_leases
from secretferry.service import models as service_models

EPOCH = 1_800_000_000.0  # virtual time starts here (2027), whole seconds
PASSWORD_PREFIX = "pw-"


# --- schedule: pure ---------------------------------------------------------------------------
def held(
    *, created: float = 0, expires: float = 3600, term: float = 3600, max_ttl: float | None = None
) -> schedule.Held:
    return schedule.Held("l", created, expires, term, max_ttl)


@pytest.mark.parametrize(
    ("h", "now", "expected"),
    [
        (None, 10, schedule.Step("acquire", 10)),
        (held(), 100, schedule.Step("wait", 3600 - 0.33 * 3600)),
        (held(), 2412, schedule.Step("renew", 2412)),  # 0.67 of the term has passed
        (held(), 3600, schedule.Step("replace", 3600)),  # expired: a new lease at once
        (held(max_ttl=7200), 2412, schedule.Step("renew", 2412)),  # 3600 + 3600 <= 0 + 7200
        (held(expires=7200, max_ttl=7200), 6100, schedule.Step("replace", 6100)),  # would pass the max
        (held(max_ttl=5000), 2412, schedule.Step("replace", 2412)),  # 7200 > 5000: not even asked
    ],
)
def test_next_step(h: schedule.Held | None, now: float, expected: schedule.Step) -> None:
    got = schedule.next_step(h, now=now, fraction=0.67)
    assert got.action == expected.action
    assert got.at == pytest.approx(expected.at)


def test_renewals_fall_every_term_and_leave_the_rest_for_retries() -> None:
    h = held(term=600, expires=600)
    times = []
    for _ in range(5):
        at = schedule.renew_at(h, 0.75)
        times.append(at)
        h = schedule.Held(h.lease_id, h.created_at, h.expires_at + h.term_seconds, h.term_seconds)
    assert [b - a for a, b in itertools.pairwise(times)] == [600.0] * 4
    assert times[0] == 450.0


@pytest.mark.parametrize(
    ("text", "seconds"), [("24h", 86400.0), ("2m", 120.0), ("1d", 86400.0), ("90", 0.09), ("x", None)]
)
def test_parse_ms(text: str, seconds: float | None) -> None:
    assert keeper_mod.parse_ms(text) == (pytest.approx(seconds) if seconds is not None else None)


# --- fakes ------------------------------------------------------------------------------------
class FakeLeaseService:
    """The real service's lease semantics, on the injected clock."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        default_ttl: float = 600,
        max_ttl: float | None = 1800,
        report_max: bool = True,
    ) -> None:
        self.clock = clock
        self.default_ttl, self.max_ttl, self.report_max = default_ttl, max_ttl, report_max
        self.leases: dict[str, tuple[float, float]] = {}  # id -> (created, expires)
        self.ids = itertools.count(1)
        self.calls: list[str] = []

    def _lease(self, lease_id: str) -> service_leases.Lease:
        created, expires = self.leases[lease_id]
        return service_leases.Lease(
            id=lease_id,
            expire_at=datetime.datetime.fromtimestamp(expires, datetime.UTC),
            created_at=datetime.datetime.fromtimestamp(created, datetime.UTC),
        )

    async def get_project_by_id(self, project_id: str) -> service_models.Project:
        self.calls.append("project")
        return service_models.Project(id=project_id, slug=f"slug-of-{project_id}")

    async def create_lease(self, name: str, *, ttl: str | None, **where: Any) -> service_leases.LeaseCreated:
        self.calls.append("create")
        self.where = where
        now = self.clock()
        lease_id = f"lease-{next(self.ids)}"
        seconds = float(ttl.rstrip("s")) if ttl else self.default_ttl
        self.leases[lease_id] = (now, now + seconds)
        max_text = f"{int(self.max_ttl)}s" if self.max_ttl and self.report_max else None
        return service_leases.LeaseCreated(
            lease=self._lease(lease_id),
            dynamic_secret=service_models.DynamicSecret(name=name, max_ttl=max_text),
            data={"DB_USERNAME": f"user-{lease_id}", "DB_PASSWORD": f"{PASSWORD_PREFIX}{lease_id}"},
        )

    async def renew_lease(self, lease_id: str, *, ttl: str | None, **_: Any) -> service_leases.Lease:
        self.calls.append("renew")
        if lease_id not in self.leases:
            raise service_errors.NotFound(
                f"Dynamic secret lease with ID '{lease_id}' not found", status_code=404
            )
        created, expires = self.leases[lease_id]
        new = expires + (float(ttl.rstrip("s")) if ttl else self.default_ttl)
        if self.max_ttl is not None and new > created + self.max_ttl:
            raise service_errors.ValidationError("TTL cannot be larger than max ttl", status_code=400)
        self.leases[lease_id] = (created, new)
        return self._lease(lease_id)

    async def revoke_lease(self, lease_id: str, **_: Any) -> service_leases.Lease:
        self.calls.append("revoke")
        if lease_id not in self.leases:
            raise service_errors.NotFound("not found", status_code=404)
        lease = self._lease(lease_id)
        del self.leases[lease_id]
        return lease


class FakeSession:
    def __init__(self, service: FakeLeaseService) -> None:
        self.service = service

    async def call(self, fn: Any) -> Any:
        return await fn(self.service)


class FakeIdentities:
    def __init__(self, service: FakeLeaseService) -> None:
        self.session_ = FakeSession(service)

    async def resolve_ref(self, ref: Any, namespace: str) -> object:
        return types.SimpleNamespace(key=("MachineIdentity", namespace, ref.name))

    async def session(self, entry: object) -> FakeSession:
        return self.session_

    def port(self) -> ident_mod.IdentityRegistry:
        return cast(ident_mod.IdentityRegistry, self)


class RecordingRollouts:
    def __init__(self) -> None:
        self.changes: list[tuple[str, str, str]] = []

    def changed(self, namespace: str, owner_name: str, secret_name: str, data_hmac: str, **_: Any) -> None:
        self.changes.append((namespace, owner_name, secret_name))

    def port(self) -> rollouts.RolloutManager:
        return cast(rollouts.RolloutManager, self)


class World:
    """The keeper with its fakes; ``body(name)`` is the object as the apiserver would hold it."""

    def __init__(self, *, limit: int = 20, **service: Any) -> None:
        loop = asyncio.get_running_loop()
        self.clock = lambda: EPOCH + loop.time()
        self.service = FakeLeaseService(self.clock, **service)
        self.api = reconcile_fakes.FakeApiserver()
        self.kube = reconcile_fakes.FakeKube(self.api.answer)
        self.rollouts = RecordingRollouts()
        self.keeper = keeper_mod.LeaseKeeper(
            kube=self.kube.port(),
            identities=FakeIdentities(self.service).port(),
            rollouts_=self.rollouts.port(),
            settings=settings_mod.Settings(max_leases_per_namespace=limit, lease_retry_seconds=5.0),
            instance="test",
            clock=self.clock,
        )
        self.statuses: dict[str, dict[str, Any]] = {}

    def lease(
        self, name: str = "db", namespace: str = "team", *, generation: int = 1, **spec: Any
    ) -> lease_models.DynamicSecretLease:
        status = self.statuses.get(name, {})
        return lease_models.DynamicSecretLease.from_body(
            {
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": f"uid-{namespace}-{name}",
                    "generation": generation,
                },
                "spec": {
                    "identityRef": {"name": "id"},
                    "dynamicSecret": {"name": "app-db", "projectSlug": "p", "environment": "dev"},
                    "rolloutRestartTargets": [{"kind": "Deployment", "name": "web"}],
                    **spec,
                },
                "status": status,
            }
        )

    async def step(self, name: str = "db", *, generation: int = 1, **spec: Any) -> float:
        before = len(self.kube.calls)
        delay = await self.keeper.step(self.lease(name, generation=generation, **spec))
        for method, path, kwargs in self.kube.calls[before:]:
            if method == "PATCH" and path.endswith(f"/{name}/status"):
                merged = {**self.statuses.get(name, {}), **kwargs["body"]["status"]}
                self.statuses[name] = {k: v for k, v in merged.items() if v is not None}
        return delay

    async def next_call(self, name: str = "db", **spec: Any) -> None:
        """Sleep and step as the handler's loop does until the keeper calls the service."""
        before = len(self.service.calls)
        while True:
            delay = await self.step(name, **spec)
            if len(self.service.calls) != before:
                return
            await asyncio.sleep(delay)


pytestmark = pytest.mark.looptime


async def test_lease_written_then_renewed_on_schedule() -> None:
    w = World()
    delay = await w.step()
    assert w.service.calls == ["create"]
    assert w.api.secret_data("team", "db") == {"DB_USERNAME": "user-lease-1", "DB_PASSWORD": "pw-lease-1"}
    status = w.statuses["db"]
    assert status["leaseId"] == "lease-1" and status["leasesTaken"] == 1
    ready = status["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("True", reasons.LEASED)
    assert delay == keeper_mod.MAX_WAIT_SECONDS  # looks again within 5 min (renewal due at 402 s)
    started = w.clock()
    await asyncio.sleep(delay)
    await w.next_call()
    assert w.service.calls == ["create", "renew"]
    assert w.clock() - started == pytest.approx(0.67 * 600, abs=1)
    assert w.statuses["db"]["renewals"] == 1
    assert w.rollouts.changes == []  # a renewal changes no credential: nothing restarts


async def test_max_ttl_near_takes_a_new_lease_without_a_refused_call() -> None:
    w = World(default_ttl=600, max_ttl=1800)
    await w.step()
    for _ in range(3):
        await w.next_call()
    # 600 s terms within 1800 s: create, renew, renew, then a new lease (not a refused renewal).
    assert w.service.calls[:4] == ["create", "renew", "renew", "create"]
    assert w.api.secret_data("team", "db") == {"DB_USERNAME": "user-lease-2", "DB_PASSWORD": "pw-lease-2"}
    assert w.rollouts.changes == [("team", "db", "db")]  # consumers restarted onto the new lease
    assert w.statuses["db"]["leasesTaken"] == 2


async def test_refused_renewal_takes_a_new_lease() -> None:
    # The service does not report maxTTL: the keeper learns it from the refusal.
    w = World(default_ttl=600, max_ttl=1000, report_max=False)
    await w.step()
    await w.next_call()
    assert w.service.calls == ["create", "renew", "create"]
    assert w.statuses["db"]["leaseId"] == "lease-2"
    assert w.rollouts.changes == [("team", "db", "db")]


async def test_a_lease_the_service_forgot_is_replaced() -> None:
    w = World()
    await w.step()
    w.service.leases.clear()  # revoked by hand at the service
    await w.next_call()
    assert w.service.calls == ["create", "renew", "create"]


async def test_hundred_leases_over_a_compressed_hour_none_missed() -> None:
    w = World(default_ttl=120, max_ttl=None, limit=100)
    names = [f"l{i}" for i in range(100)]
    due: dict[str, float] = {n: 0.0 for n in names}
    end = w.clock() + 3600
    expired = 0
    while True:
        name = min(due, key=lambda n: due[n])
        wait = due[name] - w.clock()
        if due[name] > end:
            break
        if wait > 0:
            await asyncio.sleep(wait)
        held = w.keeper.held(w.lease(name))
        if held is not None and w.clock() >= held.expires_at:
            expired += 1
        due[name] = w.clock() + await w.step(name)
    renewals = w.service.calls.count("renew")
    assert w.service.calls.count("create") == 100
    assert expired == 0
    assert renewals >= 100 * (3600 // 120 - 1)
    assert len(w.service.calls) == 100 + renewals  # one call per renewal, nothing else


async def test_namespace_bound_refuses_a_new_lease_before_any_call() -> None:
    w = World(limit=1)
    await w.step("a")
    await w.step("b")
    assert w.service.calls == ["create"]
    cond = w.statuses["b"]["conditions"][0]
    assert (cond["status"], cond["reason"]) == ("False", reasons.LEASE_LIMIT_REACHED)


async def test_release_revokes_under_revoke_and_not_under_retain() -> None:
    w = World()
    await w.step("a")
    await w.step("b")
    await w.keeper.release(w.lease("a"))
    await w.keeper.release(w.lease("b", revocationPolicy="Retain"))
    assert w.service.calls == ["create", "create", "revoke"]
    assert list(w.service.leases) == ["lease-2"]


async def test_no_credential_reaches_status_or_events() -> None:
    w = World(default_ttl=600, max_ttl=1000, report_max=False)
    await w.step()
    await w.next_call()
    w.service.leases.clear()
    await w.keeper.release(w.lease())
    for method, path, kwargs in w.kube.calls:
        if "/secrets" in path:
            continue
        assert PASSWORD_PREFIX not in str(kwargs), (method, path)
        if "events" in path:
            assert "lease-" not in str(kwargs.get("body", {}).get("note", "")), "lease id in an Event"


async def test_a_deleted_secret_needs_a_new_lease() -> None:
    w = World()
    await w.step()
    del w.api.objects["/api/v1/namespaces/team/secrets/db"]
    await w.step()
    assert w.service.calls == ["create", "create"]
    assert w.api.secret_data("team", "db") == {"DB_USERNAME": "user-lease-2", "DB_PASSWORD": "pw-lease-2"}


async def test_a_project_id_is_looked_up_once_and_its_slug_used() -> None:
    w = World()
    ref = {"name": "app-db", "projectId": "p-1", "environment": "dev"}
    await w.step(dynamicSecret=ref)
    await w.next_call(dynamicSecret=ref)
    assert w.service.calls == ["project", "create", "renew"]  # the slug is cached
    assert w.service.where == {"project_slug": "slug-of-p-1", "environment_slug": "dev", "path": "/"}


# --- spec edits: a new generation wakes the loop at once ---------------------------------------


def raw(generation: int, name: str = "db") -> dict[str, Any]:
    """The object as a watch event carries it (what the handler hands ``noticed``)."""
    return {
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-team-{name}", "generation": generation}
    }


async def test_a_new_generation_wakes_the_loop_and_the_next_step_follows_the_spec() -> None:
    w = World()
    delay = await w.step()
    woken = w.keeper.woken(w.lease())
    assert delay == keeper_mod.MAX_WAIT_SECONDS and not woken.is_set()
    w.keeper.noticed(raw(1))  # our own status patch echoing back: same generation
    w.keeper.noticed(raw(1, name="other"))  # another object
    assert not woken.is_set()

    w.keeper.noticed(raw(2))  # renewAtFraction edited: the loop stops waiting
    assert woken.is_set()
    renew_at_before = w.statuses["db"]["renewAt"]
    delay = await w.step(generation=2, renewAtFraction=0.1, ttl="300s")
    assert not woken.is_set() and w.service.calls == ["create"]  # nothing due: no call
    status = w.statuses["db"]
    assert status["observedGeneration"] == 2 and status["renewAt"] != renew_at_before
    # The new fraction and ttl: renew at expiry - 0.9 * 300 s, i.e. 330 s after the lease (was
    # 600 - 0.33 * 600 = 402 s).
    started = w.service.leases["lease-1"][0]
    await asyncio.sleep(delay)
    await w.next_call(generation=2, renewAtFraction=0.1, ttl="300s")
    assert w.service.calls == ["create", "renew"]
    assert w.clock() - started == pytest.approx(330, abs=1)
    assert w.service.leases["lease-1"][1] - w.service.leases["lease-1"][0] == pytest.approx(900)

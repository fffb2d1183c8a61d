"""A SecretSync's status report: one typed merge patch when something changed, Events on flips only.

No apiserver: a fake Kube port records status patches and Events (or refuses them). The wall
clock the report stamps times with is a fake one the tests move.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

import crd_schema
import pytest
from reconcile_fakes import FakeKube

from secretferry.kube import errors as kube_errors
from secretferry.kube import eventcache
from secretferry.kube import events as kube_events
from secretferry.reconcile import conditions, reasons, state, sync_report
from secretferry.reconcile import deps as deps_mod

START = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
KEYS = ["API_KEY", "DB_URL"]
SUCCESS_FIELDS = {
    "conditions",
    "observedGeneration",
    "lastSyncTime",
    "syncedKeys",
    "syncedKeyCount",
    "dataHMAC",
    "target",
    "updateMode",
    "updateModeReason",
}


class Clock:
    def __init__(self) -> None:
        self.now = START

    def tick(self, seconds: float = 60) -> str:
        """Move on; returns the new time as status shows it."""
        self.now += timedelta(seconds=seconds)
        return self.wire()

    def wire(self) -> str:
        return self.now.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    fake = Clock()
    monkeypatch.setattr(conditions, "now", lambda: fake.now)
    yield fake


class World:
    def __init__(self, kube: FakeKube | None = None) -> None:
        self.kube = kube or FakeKube()
        # report reads nothing of Deps but the Kubernetes port and the instance name.
        self.deps = cast(deps_mod.Deps, SimpleNamespace(kube=self.kube.port(), instance="secretferry-0"))
        self.entry = state.SyncEntry(key=("team-a", "app"), uid="u-1", generation=3, body={}, status={})

    async def report(self, **overrides: Any) -> None:
        await sync_report.report(self.deps, self.entry, **overrides)

    async def ok(self, **overrides: Any) -> None:
        args: dict[str, Any] = {
            "ok": True,
            "reason": reasons.SYNCED,
            "message": "Secret app holds 2 keys from 1 source(s)",
            "synced_keys": KEYS,
            "data_hmac": "ab" * 32,
            "target": {"kind": "Secret", "name": "app"},
            "mode": (reasons.STREAMING, "event stream connected"),
        }
        await self.report(**(args | overrides))

    async def failed(self, reason: str = reasons.AUTH_FAILED, message: str = "login rejected") -> None:
        await self.report(ok=False, reason=reason, message=message)

    def patches(self) -> list[dict[str, Any]]:
        return [kw["body"]["status"] for method, _, kw in self.kube.calls if method == "PATCH"]

    def events(self) -> list[tuple[str, str]]:
        return [
            (kw["body"]["type"], kw["body"]["reason"])
            for method, _, kw in self.kube.calls
            if method == "POST"
        ]

    def ready(self) -> dict[str, Any]:
        found = conditions.find(self.patches()[-1]["conditions"], reasons.READY)
        assert found is not None
        return dict(found)


async def test_a_pass_that_changes_nothing_writes_nothing(clock: Clock) -> None:
    world = World()
    await world.ok(wrote=True)
    clock.tick()
    await world.ok()
    await world.ok()
    assert len(world.patches()) == 1
    assert world.entry.status == world.patches()[0]  # the cache is what was written

    await world.failed()
    clock.tick()
    await world.failed()
    assert len(world.patches()) == 2


def _edit_ready(status: dict[str, Any], **fields: Any) -> None:
    """Change the cached Ready condition as a hand edit would (None removes a field)."""
    (ready,) = status["conditions"]
    status["conditions"] = [{k: v for k, v in (ready | fields).items() if v is not None}]


@pytest.mark.parametrize(
    ("what", "overrides", "edit_cache"),
    [
        ("message", {"message": "Secret app holds 2 keys from 2 source(s)"}, None),
        ("reason", {"reason": "SyncedWithWarnings"}, None),
        ("key names", {"synced_keys": ["API_KEY", "DB_PASSWORD"]}, None),
        ("data", {"data_hmac": "cd" * 32}, None),
        ("target", {"target": {"kind": "Secret", "name": "app-v2"}}, None),
        ("update mode", {"mode": (reasons.POLLING, "stream unavailable")}, None),
        ("mode reason", {"mode": (reasons.STREAMING, "event stream reconnected")}, None),
        ("generation", {}, lambda w: setattr(w.entry, "generation", 4)),
        ("a count edited by hand", {}, lambda w: w.entry.status.update(syncedKeyCount=7)),
        ("a condition without time", {}, lambda w: _edit_ready(w.entry.status, lastTransitionTime=None)),
        (
            "a condition of an older generation",
            {},
            lambda w: _edit_ready(w.entry.status, observedGeneration=2),
        ),
        ("no lastSyncTime", {}, lambda w: w.entry.status.pop("lastSyncTime")),
    ],
)
async def test_any_one_reported_field_that_differs_is_patched(
    clock: Clock, what: str, overrides: dict[str, Any], edit_cache: Any
) -> None:
    world = World()
    await world.ok(wrote=True)
    if edit_cache is not None:
        world.entry.status = dict(world.entry.status)
        edit_cache(world)
    clock.tick()
    await world.ok(**overrides)
    assert len(world.patches()) == 2, what
    assert world.entry.status == world.patches()[0] | world.patches()[1]
    clock.tick()
    await world.ok(**overrides)
    assert len(world.patches()) == 2, what  # and then it is known


async def test_a_success_reports_every_field_and_a_failure_only_its_condition(clock: Clock) -> None:
    world = World()
    await world.ok(wrote=True)
    written = world.patches()[0]
    assert set(written) == SUCCESS_FIELDS
    assert written["syncedKeys"] == KEYS
    assert written["syncedKeyCount"] == 2
    assert written["target"] == {"kind": "Secret", "name": "app"}
    assert (written["updateMode"], written["updateModeReason"]) == (
        reasons.STREAMING,
        "event stream connected",
    )
    assert written["lastSyncTime"] == clock.wire()
    assert world.ready() == {
        "type": reasons.READY,
        "status": "True",
        "reason": reasons.SYNCED,
        "message": "Secret app holds 2 keys from 1 source(s)",
        "observedGeneration": 3,
        "lastTransitionTime": clock.wire(),
    }

    clock.tick()
    await world.failed()
    # A merge patch: what the last success reported stays, in the object and in the cache.
    assert set(world.patches()[1]) == {"conditions", "observedGeneration"}
    assert world.entry.status["syncedKeys"] == KEYS
    assert world.entry.status["dataHMAC"] == "ab" * 32


async def test_every_patch_fits_the_committed_crd(clock: Clock) -> None:
    world = World()
    await world.ok(wrote=True, mode=(reasons.POLLING, "InstantUpdatesDisabled: spec.instantUpdates is false"))
    await world.failed(message="x" * 40_000)  # longer than a condition may hold
    await world.ok(synced_keys=[], target={"kind": "ConfigMap", "name": "app-config"}, wrote=True)

    schema = crd_schema.status_schema("secretsyncs")
    assert len(world.patches()) == 3
    for written in world.patches():
        assert crd_schema.problems(written, schema) == []


async def test_last_sync_time_moves_on_a_write_or_a_status_change_only(clock: Clock) -> None:
    world = World()
    # After a restart the Secret is already right: no write, but no lastSyncTime either.
    await world.ok()
    first = clock.wire()
    assert world.patches()[-1]["lastSyncTime"] == first

    clock.tick()
    await world.ok()  # a resync that finds everything as it was
    assert len(world.patches()) == 1

    written_at = clock.tick()
    await world.ok(wrote=True, data_hmac="cd" * 32)
    assert world.patches()[-1]["lastSyncTime"] == written_at
    assert world.ready()["lastTransitionTime"] == first  # still Ready since the first pass

    changed_at = clock.tick()
    await world.ok(mode=(reasons.POLLING, "stream unavailable"))  # status changes, the target does not
    assert world.patches()[-1]["lastSyncTime"] == changed_at

    clock.tick()
    await world.failed()
    assert "lastSyncTime" not in world.patches()[-1]
    assert world.entry.status["lastSyncTime"] == changed_at

    recovered_at = clock.tick()
    await world.ok(mode=(reasons.POLLING, "stream unavailable"))
    assert world.patches()[-1]["lastSyncTime"] == recovered_at
    assert world.ready()["lastTransitionTime"] == recovered_at


async def test_the_transition_time_moves_only_when_ready_changes_status(clock: Clock) -> None:
    world = World()
    await world.failed(reasons.AUTH_FAILED)
    failed_at = clock.wire()
    clock.tick()
    await world.failed(reasons.SERVICE_UNAVAILABLE, "service down")
    assert world.ready()["reason"] == reasons.SERVICE_UNAVAILABLE
    assert world.ready()["lastTransitionTime"] == failed_at


async def test_events_are_posted_on_ready_flips_only(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    world = World()
    steps: list[tuple[str, dict[str, Any], list[tuple[str, str]]]] = [
        ("a first success is visible in status", {"ok": True}, []),
        ("nothing changed", {"ok": True}, []),
        ("a failure", {"ok": False}, [("Warning", reasons.AUTH_FAILED)]),
        ("the same failure, worded otherwise", {"ok": False, "message": "token expired"}, []),
        (
            "another reason",
            {"ok": False, "reason": reasons.SERVICE_UNAVAILABLE},
            [("Warning", reasons.SERVICE_UNAVAILABLE)],
        ),
        ("recovered", {"ok": True}, [("Normal", reasons.SYNCED)]),
    ]
    seen = 0
    for what, step, events in steps:
        clock.tick()
        if step.pop("ok"):
            await world.ok(**step)
        else:
            await world.failed(**step)
        assert world.events()[seen:] == events, what
        seen = len(world.events())

    # As after a restart: no Event history (else this one counts into the equal Event above).
    monkeypatch.setattr(kube_events, "CORRELATOR", eventcache.Correlator())
    fresh = World()
    await fresh.failed()
    assert fresh.events() == [("Warning", reasons.AUTH_FAILED)]  # a first failure is worth an Event


async def test_a_message_longer_than_a_condition_holds_is_cut_once_and_then_known(clock: Clock) -> None:
    world = World()
    await world.failed(message="x" * 40_000)
    assert len(world.ready()["message"]) == 32768
    clock.tick()
    await world.failed(message="x" * 40_000)
    assert len(world.patches()) == 1


async def test_a_status_read_back_from_the_apiserver_keeps_its_other_conditions_and_transition_time(
    clock: Clock,
) -> None:
    world = World()
    world.entry.status = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Synced",
                "lastTransitionTime": "2025-12-24T18:00:00Z",
            },
            {"type": "Degraded", "status": "False", "reason": "AsExpected", "message": ""},
            {"type": "Broken", "status": "maybe"},  # unreadable: not copied forward
        ],
        "observedGeneration": 2,
        "lastSyncTime": "2025-12-24T18:00:00Z",
    }
    await world.ok()
    written = world.patches()[0]["conditions"]
    assert [c["type"] for c in written] == ["Degraded", "Ready"]
    assert written[1]["lastTransitionTime"] == "2025-12-24T18:00:00Z"
    assert world.patches()[0]["observedGeneration"] == 3


async def test_a_refused_patch_is_tried_again_on_the_next_report(clock: Clock) -> None:
    async def refuse_first(method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(kube.calls) == 1:
            raise kube_errors.Unavailable(503, "ServiceUnavailable", "apiserver busy")
        return {}

    kube = FakeKube(refuse_first)
    world = World(kube)
    await world.failed()
    assert world.entry.status == {}  # not written: not known
    assert world.events() == []
    await world.failed()
    assert len(world.patches()) == 2
    assert world.events() == [("Warning", reasons.AUTH_FAILED)]


async def test_a_sync_deleted_meanwhile_is_left_alone(clock: Clock) -> None:
    async def gone(method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        raise kube_errors.NotFound(404, "NotFound", "secretsyncs.secretferry.io app not found")

    world = World(FakeKube(gone))
    await world.failed()
    assert world.entry.status == {}
    assert world.events() == []

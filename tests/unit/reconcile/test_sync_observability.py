"""What a SecretSync's report tells beyond status: log lines on transitions only, nothing from a
namespace being deleted, and the opt-in per-object condition gauge (gone with the SecretSync).

No apiserver: ``FakeKube`` records status patches and Event posts; a namespace being deleted is
its answer to the Event POST, the apiserver's own 403. The per-object gauge is read back from
prometheus_client's registry.
"""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace
from typing import Any, cast

import pytest
from prometheus_client import REGISTRY
from reconcile_fakes import FakeKube, RecordingQueue

from secretferry import logfields
from secretferry.kube import errors as kube_errors
from secretferry.kube import events as kube_events
from secretferry.reconcile import deps as deps_mod
from secretferry.reconcile import reasons, state, sync_intake, sync_report

NAMESPACE = "team-a"
SYNCED = "Secret app holds 2 keys from 1 source(s)"


@pytest.fixture(autouse=True)
def memory(monkeypatch: pytest.MonkeyPatch) -> kube_events.TerminatingNamespaces:
    """A fresh memory of terminating namespaces for each test (the process keeps one)."""
    fresh = kube_events.TerminatingNamespaces()
    monkeypatch.setattr(kube_events, "TERMINATING", fresh)
    return fresh


def _terminating(namespace: str) -> kube_errors.KubeError:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": f'events.events.k8s.io "app.1" is forbidden: unable to create new content in namespace'
        f" {namespace} because it is being terminated",
        "reason": "Forbidden",
        "details": {"kind": "events", "causes": [{"reason": "NamespaceTerminating"}]},
        "code": 403,
    }
    return kube_errors.from_status(403, json.dumps(body).encode())


class World:
    def __init__(self, kube: FakeKube | None = None) -> None:
        self.kube = kube or FakeKube()
        self.deps = cast(deps_mod.Deps, SimpleNamespace(kube=self.kube.port(), instance="secretferry-0"))
        self.entries: dict[state.SyncKey, state.SyncEntry] = {}

    def entry(self, name: str = "app", namespace: str = NAMESPACE) -> state.SyncEntry:
        key = (namespace, name)
        if key not in self.entries:
            self.entries[key] = state.SyncEntry(key=key, uid=f"uid-{name}", generation=1, body={}, status={})
        return self.entries[key]

    async def ok(self, name: str = "app", namespace: str = NAMESPACE) -> None:
        await sync_report.report(
            self.deps, self.entry(name, namespace), ok=True, reason=reasons.SYNCED, message=SYNCED
        )

    async def failed(
        self,
        reason: str = reasons.IDENTITY_NOT_FOUND,
        message: str = "MachineIdentity 'mid' in namespace team-a does not exist",
        name: str = "app",
        namespace: str = NAMESPACE,
    ) -> None:
        await sync_report.report(
            self.deps, self.entry(name, namespace), ok=False, reason=reason, message=message
        )

    def event_posts(self) -> int:
        return sum(1 for method, _, _ in self.kube.calls if method == "POST")


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == sync_report.__name__]


async def test_one_warning_when_it_goes_not_ready_and_one_info_when_it_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    world = World()
    await world.ok()  # a first success is no news: status shows it
    assert _lines(caplog) == []

    await world.failed()
    await world.failed()  # failing as before: nothing new
    await world.failed(message="MachineIdentity 'mid' still missing")  # another message, same reason
    (went,) = _lines(caplog)
    assert went.levelno == logging.WARNING
    assert "not Ready" in went.getMessage() and reasons.IDENTITY_NOT_FOUND in went.getMessage()
    assert "does not exist" in went.getMessage()  # the message, as in the Event
    assert {f: getattr(went, f, None) for f in (logfields.KIND, logfields.NAMESPACE, logfields.NAME)} == {
        logfields.KIND: "SecretSync",
        logfields.NAMESPACE: NAMESPACE,
        logfields.NAME: "app",
    }
    assert getattr(went, logfields.REASON) == reasons.IDENTITY_NOT_FOUND

    await world.failed(reasons.AUTH_FAILED, "login rejected")  # another reason: a transition
    await world.ok()
    await world.ok()
    lines = _lines(caplog)
    assert [(r.levelno, getattr(r, logfields.REASON)) for r in lines] == [
        (logging.WARNING, reasons.IDENTITY_NOT_FOUND),
        (logging.WARNING, reasons.AUTH_FAILED),
        (logging.INFO, reasons.SYNCED),
    ]
    assert "Ready again" in lines[-1].getMessage()
    assert world.event_posts() == 3  # the lines are said exactly when the Events are


async def test_a_first_failure_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    world = World()
    await world.failed()
    assert [r.levelno for r in _lines(caplog)] == [logging.WARNING]


async def test_a_namespace_being_deleted_flips_its_secretsyncs_quietly(
    caplog: pytest.LogCaptureFixture, memory: kube_events.TerminatingNamespaces
) -> None:
    """The identity goes first, so every SecretSync there turns IdentityNotFound at once."""
    caplog.set_level(logging.DEBUG)

    async def answer(method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        if method == "POST" and f"/namespaces/{NAMESPACE}/" in path:
            raise _terminating(NAMESPACE)
        return {}

    world = World(FakeKube(answer))
    for i in range(20):
        await world.ok(f"app-{i}")
    caplog.clear()

    for i in range(20):
        await world.failed(name=f"app-{i}")

    assert world.event_posts() == 1  # the first refusal is remembered; the rest are not sent
    assert NAMESPACE in memory
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG and r.name == kube_events.__name__]
    assert len(debug) == 1
    # Status still says what happened, for as long as the objects exist.
    patched = [kw["body"]["status"] for method, _, kw in world.kube.calls if method == "PATCH"]
    assert sum(1 for p in patched if p["conditions"][0]["reason"] == reasons.IDENTITY_NOT_FOUND) == 20

    # Elsewhere, a failure is still announced.
    await world.failed(name="other", namespace="team-b")
    assert [r.levelno for r in _lines(caplog)] == [logging.WARNING]


def _condition(namespace: str, name: str, status: str) -> float | None:
    return REGISTRY.get_sample_value(
        "secretferry_secretsync_condition",
        {"namespace": namespace, "name": name, "condition": reasons.READY, "status": status},
    )


async def test_the_per_object_gauge_follows_ready_and_goes_with_the_secretsync(per_object: None) -> None:
    world = World()
    name = "gauge-app"
    await world.failed(name=name)
    assert (_condition(NAMESPACE, name, "False"), _condition(NAMESPACE, name, "True")) == (1.0, 0.0)

    await world.ok(name)
    assert (_condition(NAMESPACE, name, "False"), _condition(NAMESPACE, name, "True")) == (0.0, 1.0)

    intake = sync_intake.SyncIntake(
        kube=world.kube.port(),
        syncs=world.entries,
        scopes=state.ScopeIndex(jitter_fraction=0),
        targets=state.TargetCache(),
        queue=RecordingQueue().port(),
        on_scopes_changed=lambda added, removed: None,
    )
    intake.deleted((NAMESPACE, name))
    assert _condition(NAMESPACE, name, "False") is None
    assert _condition(NAMESPACE, name, "True") is None


async def test_a_secretsync_deleted_during_its_pass_leaves_no_series(per_object: None) -> None:
    async def gone(method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        if method == "PATCH":
            raise kube_errors.NotFound(404, "NotFound", "secretsyncs.secretferry.io not found")
        return {}

    world = World(FakeKube(gone))
    await world.failed(name="deleted-app")
    assert _condition(NAMESPACE, "deleted-app", "False") is None


async def test_the_per_object_gauge_is_off_by_default() -> None:
    world = World()
    await world.failed(name="quiet-app")
    assert _condition(NAMESPACE, "quiet-app", "False") is None

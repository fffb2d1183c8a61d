"""The worker's bookkeeping around one pass: a SecretSync deleted while its pass runs leaves no
per-object series behind (the intake dropped them; the pass's report would set them again)."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY
from reconcile_fakes import FakeKube

from secretferry import metrics
from secretferry import settings as settings_mod
from secretferry.reconcile import controller as controller_mod
from secretferry.reconcile import deps as deps_mod
from secretferry.reconcile import reasons, state, sync, tasks

KEY = ("team-a", "short-lived")


def _series(status: str) -> float | None:
    labels = {"namespace": KEY[0], "name": KEY[1], "condition": reasons.READY, "status": status}
    return REGISTRY.get_sample_value("secretferry_secretsync_condition", labels)


def _controller() -> controller_mod.Controller:
    return controller_mod.Controller(
        kube=FakeKube().port(), settings=settings_mod.Settings(), hmac_key=b"k" * 32, instance="test-0"
    )


async def test_a_secretsync_deleted_during_its_pass_leaves_no_series(
    per_object: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctl = _controller()
    ctl.syncs[KEY] = state.SyncEntry(key=KEY, uid="u", generation=1, body={}, status={})

    async def deleted_midway(deps: deps_mod.Deps, entry: state.SyncEntry) -> float | None:
        ctl.sync_intake.deleted(entry.key)  # the watch's DELETED, while the pass awaits the service
        metrics.set_sync_condition(entry.key, reasons.READY, "True")  # the pass's report
        return 60.0

    monkeypatch.setattr(sync, "reconcile", deleted_midway)
    await ctl._work(KEY)
    assert (_series("True"), _series("False")) == (None, None)
    assert KEY not in ctl.syncs


async def test_a_secretsync_still_there_keeps_its_series(
    per_object: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctl = _controller()
    ctl.syncs[KEY] = state.SyncEntry(key=KEY, uid="u", generation=1, body={}, status={})

    async def reported(deps: deps_mod.Deps, entry: state.SyncEntry) -> float | None:
        metrics.set_sync_condition(entry.key, reasons.READY, "True")
        return None

    monkeypatch.setattr(sync, "reconcile", reported)
    try:
        await ctl._work(KEY)
        assert (_series("True"), _series("False")) == (1.0, 0.0)
    finally:
        metrics.forget_sync(KEY)


async def test_after_stop_an_identity_event_starts_no_login_and_no_pass() -> None:
    ctl = _controller()
    ctl.identity_intake.take_over()
    ctl.syncs[KEY] = state.SyncEntry(key=KEY, uid="u", generation=1, body={}, status={})
    checks: list[object] = []
    ctl.identity_status.spawn_check = lambda entry: checks.append(entry.key)  # type: ignore[method-assign,assignment,return-value]
    await ctl.stop()
    body = {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "MachineIdentity",
        "metadata": {"name": "mid", "namespace": KEY[0], "uid": "i", "generation": 2},
        "spec": {},
    }
    ctl.identity_event("MachineIdentity", "MODIFIED", body)  # kopf still delivers while shutting down
    assert checks == []
    assert ctl.queue.pending == 0


async def test_a_task_spawned_after_cancel_all_never_runs() -> None:
    background = tasks.Tasks()
    ran: list[str] = []

    async def login() -> None:
        ran.append("login")

    await background.cancel_all()
    task = background.spawn_side(login())
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ran == []

"""An identity's readiness in the log: one WARNING when it goes not Ready, one INFO when it is
Ready again, nothing for a report that says what the last one said, nothing in a namespace being
deleted.

No apiserver: ``FakeKube`` accepts the status patches; no service (the reports are given).
"""

from __future__ import annotations

import logging

import pytest
from reconcile_fakes import FakeKube

from secretferry import logfields
from secretferry import settings as settings_mod
from secretferry.kube import events as kube_events
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import identity_status, problems, reasons, tasks
from secretferry.service import listroutes


@pytest.fixture(autouse=True)
def memory(monkeypatch: pytest.MonkeyPatch) -> kube_events.TerminatingNamespaces:
    fresh = kube_events.TerminatingNamespaces()
    monkeypatch.setattr(kube_events, "TERMINATING", fresh)
    return fresh


def _world() -> tuple[identity_status.IdentityStatus, ident_mod.IdentityEntry]:
    kube = FakeKube()
    registry = ident_mod.IdentityRegistry(
        kube=kube.port(), settings=settings_mod.Settings(default_host_api="http://127.0.0.1:9")
    )
    entry = registry.upsert(
        ident_mod.MACHINE,
        {
            "metadata": {"name": "mid", "namespace": "team-a", "uid": "uid-mid", "generation": 1},
            "spec": {"auth": {"accessToken": {"secretRef": {"name": "tok", "key": "token"}}}},
        },
    )
    status = identity_status.IdentityStatus(
        kube=kube.port(), identities=registry, routes=listroutes.ListRoutes(), background=tasks.Tasks()
    )
    return status, entry


def _lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [
        (r.levelno, getattr(r, logfields.REASON))
        for r in caplog.records
        if r.name == identity_status.__name__
    ]


async def test_readiness_changes_are_logged_once_each(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    status, entry = _world()
    missing = problems.Problem(reasons.CREDENTIALS_NOT_FOUND, "Secret team-a/tok not found")

    await status.report(entry, None)  # logged in at start-up: no news
    await status.report(entry, missing)
    await status.report(entry, missing)
    await status.report(entry, problems.Problem(reasons.AUTH_FAILED, "login rejected"))
    await status.report(entry, None)
    await status.report(entry, None)

    assert _lines(caplog) == [
        (logging.WARNING, reasons.CREDENTIALS_NOT_FOUND),
        (logging.WARNING, reasons.AUTH_FAILED),
        (logging.INFO, reasons.LOGGED_IN),
    ]
    went = next(r for r in caplog.records if r.name == identity_status.__name__)
    assert "Secret team-a/tok not found" in went.getMessage()
    assert (
        getattr(went, logfields.KIND),
        getattr(went, logfields.NAMESPACE),
        getattr(went, logfields.NAME),
        getattr(went, logfields.IDENTITY),
    ) == (ident_mod.MACHINE, "team-a", "mid", ident_mod.key_str(entry.key))


async def test_a_first_failure_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    status, entry = _world()
    await status.report(entry, problems.Problem(reasons.AUTH_FAILED, "login rejected"))
    assert _lines(caplog) == [(logging.WARNING, reasons.AUTH_FAILED)]


async def test_nothing_is_logged_for_an_identity_in_a_namespace_being_deleted(
    caplog: pytest.LogCaptureFixture, memory: kube_events.TerminatingNamespaces
) -> None:
    caplog.set_level(logging.DEBUG)
    status, entry = _world()
    await status.report(entry, None)
    memory.seen("team-a")

    await status.report(entry, problems.Problem(reasons.CREDENTIALS_NOT_FOUND, "Secret team-a/tok not found"))

    assert _lines(caplog) == []
    assert (
        entry.reported is not None and entry.reported[1] == reasons.CREDENTIALS_NOT_FOUND
    )  # status still written


async def test_a_long_message_is_cut_in_the_log_as_in_an_event(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    status, entry = _world()
    webhook = "admission webhook denied the request: " + "x" * 5000  # third-party text, any length
    await status.report(entry, problems.Problem(reasons.KUBERNETES_ERROR, webhook))
    went = next(r for r in caplog.records if r.name == identity_status.__name__)
    assert webhook[: problems.NOTE_MAX_CHARS] in went.getMessage()
    assert "x" * (problems.NOTE_MAX_CHARS + 1) not in went.getMessage()

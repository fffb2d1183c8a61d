"""A PushSecret's status: patched only when it changes, HMACs and key names only, an Event on a
transition (not on a first success)."""

from __future__ import annotations

from typing import Any, cast

from reconcile_fakes import FakeKube

from secretferry.kube import eventcache
from secretferry.kube import events as kube_events
from secretferry.models import pushsecret as push_models
from secretferry.reconcile import problems, reasons
from secretferry.reconcile.push import plan as plan_mod
from secretferry.reconcile.push import pushing, report

BODY: dict[str, Any] = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "generation": 1},
    "spec": {
        "identityRef": {"name": "ferry"},
        "selector": {"secret": {"name": "src"}},
        "destination": {"projectId": "p1", "environment": "dev", "path": "/x"},
    },
}


def _deps(kube: FakeKube) -> pushing.PushDeps:
    return pushing.PushDeps(
        kube=kube.port(),
        identities=cast(Any, None),
        routes=cast(Any, None),
        slugs=cast(Any, None),
        hmac_key=b"k" * 32,
        instance="test",
    )


def _status_patches(kube: FakeKube) -> list[dict[str, Any]]:
    return [kw["body"]["status"] for m, path, kw in kube.calls if m == "PATCH" and path.endswith("/status")]


def _events(kube: FakeKube) -> list[dict[str, Any]]:
    return [kw["body"] for m, path, kw in kube.calls if m == "POST" and "/events" in path]


async def test_status_holds_hmacs_and_names_and_is_patched_only_on_change(monkeypatch: Any) -> None:
    monkeypatch.setattr(kube_events, "CORRELATOR", eventcache.Correlator())
    kube = FakeKube()
    deps = _deps(kube)
    model = push_models.PushSecret.from_body(BODY)
    records = {"A": plan_mod.Record(source="s" * 64, remote="r" * 64)}
    await report.report(
        deps, model, BODY, ready=None, records=records, conflicts=[], replaced=False, wrote=True
    )
    (status,) = _status_patches(kube)
    assert status["pushedKeys"] == [{"key": "A", "sourceHMAC": "s" * 64, "remoteHMAC": "r" * 64}]
    assert status["pushedKeyCount"] == 1 and status["destination"] == "p1/dev/x"
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", reasons.PUSHED)
    assert _events(kube) == []  # a first success is in status only

    # The same again, over the status just written: nothing to patch (no write at rest).
    body = {**BODY, "status": status}
    kube.calls.clear()
    await report.report(
        deps, model, body, ready=None, records=records, conflicts=[], replaced=False, wrote=False
    )
    assert kube.calls == []

    # A failure: patched, and a Warning Event with the reason.
    await report.report(
        deps,
        model,
        body,
        ready=problems.Problem(reasons.PUSH_CONFLICT, "changed at the service: A"),
        records=records,
        conflicts=["A"],
        replaced=False,
        wrote=False,
    )
    (failed,) = _status_patches(kube)
    assert failed["conflicts"] == ["A"]
    assert {(e["reason"], e["type"]) for e in _events(kube)} == {(reasons.PUSH_CONFLICT, "Warning")}

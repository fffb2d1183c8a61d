"""A ClusterSecretSync's status: counts from its entries, one patch per change, Events on flips."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from reconcile_fakes import FakeKube

from secretferry import metrics
from secretferry.models import clustersecretsync as css
from secretferry.reconcile import cluster_report, desired, reasons, state

pytestmark = pytest.mark.looptime


def _entry(namespace: str, ready: str | None, reason: str = "Synced") -> state.SyncEntry:
    conditions = (
        [] if ready is None else [{"type": "Ready", "status": ready, "reason": reason, "message": "m"}]
    )
    return state.SyncEntry(
        key=state.cluster_key(namespace, "shared"),
        uid="u",
        generation=1,
        body={},
        status={"conditions": conditions},
        origin=desired.ClusterOrigin("shared", "u"),
    )


def _world(states: dict[str, str | None]) -> tuple[cluster_report.ClusterRecord, dict[state.SyncKey, Any]]:
    record = cluster_report.ClusterRecord(
        name="shared", uid="u", generation=1, status={}, namespaces=set(states)
    )
    syncs = {
        e.key: e
        for e in (_entry(ns, st, "Synced" if st == "True" else "TargetConflict") for ns, st in states.items())
    }
    return record, syncs


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ({}, ("True", reasons.NO_NAMESPACES_SELECTED)),
        ({"a": "True", "b": "True"}, ("True", reasons.SYNCED)),
        ({"a": "True", "b": None}, ("Unknown", reasons.PROGRESSING)),
        ({"a": "True", "b": "False", "c": None}, ("False", reasons.NAMESPACES_FAILED)),
    ],
)
def test_ready_follows_the_counts(states: dict[str, str | None], expected: tuple[str, str]) -> None:
    record, syncs = _world(states)
    ready, reason, _ = cluster_report.ready_condition(record, cluster_report.summarize(record, syncs))
    assert (ready, reason) == expected


def test_an_invalid_spec_says_so() -> None:
    record, syncs = _world({})
    record.invalid = "spec.namespaces: bad"
    assert cluster_report.ready_condition(record, cluster_report.summarize(record, syncs))[:2] == (
        "False",
        reasons.INVALID_SPEC,
    )


def test_failures_are_sorted_and_bounded() -> None:
    states: dict[str, str | None] = {f"ns-{i:03d}": "False" for i in range(50)}
    states["ok"] = "True"
    record, syncs = _world(states)
    summary = cluster_report.summarize(record, syncs)
    assert summary.ready == 1 and len(summary.failed) == 50
    assert [f.namespace for f in summary.failed] == sorted(f.namespace for f in summary.failed)
    _, _, message = cluster_report.ready_condition(record, summary)
    assert message.startswith("50 of 51 namespaces fail: ns-000 (TargetConflict), ns-001")


async def test_one_patch_per_change_and_an_event_on_a_flip() -> None:
    record, syncs = _world({"a": "True", "b": "False"})
    kube = FakeKube()
    report = cluster_report.ClusterReport(
        kube=kube.port(), syncs=syncs, records={"shared": record}, instance="i"
    )
    await report.report(record)
    patches = [c for c in kube.calls if c[0] == "PATCH"]
    assert [p[1] for p in patches] == ["/apis/secretferry.io/v1alpha1/clustersecretsyncs/shared/status"]
    status = patches[0][2]["body"]["status"]
    assert (status["selectedNamespaces"], status["readyNamespaces"], status["failedNamespaces"]) == (2, 1, 1)
    assert status["failures"] == [{"namespace": "b", "reason": "TargetConflict", "message": "m"}]
    assert len(status["failures"]) <= css.MAX_FAILURES_SHOWN
    events = [c for c in kube.calls if c[0] == "POST" and "events" in c[1]]
    assert len(events) == 1 and events[0][2]["body"]["reason"] == reasons.NAMESPACES_FAILED
    assert events[0][2]["body"]["note"].startswith("1 of 2 selected namespaces fail")
    assert '"b"' not in str(events[0][2]["body"]) and "TargetConflict" not in str(events[0][2]["body"])
    assert metrics.CLUSTER_SYNC_NAMESPACES.labels("shared", "failed")._value.get() == 1

    kube.calls.clear()
    await report.report(record)  # nothing changed: nothing written
    assert kube.calls == []

    syncs[state.cluster_key("b", "shared")].status = _entry("b", "True").status
    await report.report(record)
    status = next(c for c in kube.calls if c[0] == "PATCH")[2]["body"]["status"]
    assert (status["readyNamespaces"], status["failedNamespaces"], status["failures"]) == (2, 0, [])
    events = [c for c in kube.calls if c[0] == "POST" and "events" in c[1]]
    assert [e[2]["body"]["type"] for e in events] == ["Normal"]
    report.forget("shared")


async def test_the_loop_coalesces_a_burst_into_one_patch() -> None:
    record, syncs = _world({f"ns-{i}": "True" for i in range(100)})
    kube = FakeKube()
    report = cluster_report.ClusterReport(
        kube=kube.port(), syncs=syncs, records={"shared": record}, instance="i"
    )
    task = asyncio.create_task(report.loop())
    for entry in syncs.values():
        report.entry_reported(entry)
    await asyncio.sleep(1)
    task.cancel()
    assert len([c for c in kube.calls if c[0] == "PATCH"]) == 1
    report.forget("shared")


@pytest.mark.parametrize(
    ("failure", "invalid", "stalled"),
    [
        ("TargetConflict", False, True),  # a namespace only a change fixes
        (reasons.SERVICE_UNAVAILABLE, False, False),  # retried there: kstatus InProgress
        (reasons.IDENTITY_NOT_FOUND, False, False),  # may still come
        (None, True, True),  # InvalidSpec speaks for itself
    ],
)
async def test_stalled_follows_the_failing_namespaces_reasons(
    failure: str | None, invalid: bool, stalled: bool
) -> None:
    record, syncs = _world({"a": "True"} if failure is None else {"a": "True", "b": "False"})
    if failure is not None:
        syncs[state.cluster_key("b", "shared")].status = _entry("b", "False", failure).status
    if invalid:
        record.invalid = "spec.namespaces: bad"
    kube = FakeKube()
    report = cluster_report.ClusterReport(
        kube=kube.port(), syncs=syncs, records={"shared": record}, instance="i"
    )
    await report.report(record)
    status = next(c for c in kube.calls if c[0] == "PATCH")[2]["body"]["status"]
    types = {c["type"]: c for c in status["conditions"]}
    assert ("Stalled" in types) is stalled
    if stalled:
        assert types["Stalled"]["reason"] == types["Ready"]["reason"]
    report.forget("shared")

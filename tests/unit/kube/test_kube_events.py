"""Event bodies respect events.k8s.io/v1 validation limits."""

from __future__ import annotations

from datetime import UTC, datetime

from secretferry.kube import events


def test_body_shape_and_limits() -> None:
    body = events.build(
        regarding={
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "SecretSync",
            "name": "s",
            "namespace": "ns",
            "uid": "u1",
        },
        reason="R" * 200,
        note="é" * 1000,
        type="Warning",
        action="Sync",
        reporting_instance="pod-1",
        now=datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC),
    )
    assert body["eventTime"] == "2024-05-06T07:08:09.123456Z"
    assert body["metadata"]["namespace"] == "ns"  # type: ignore[index]
    assert str(body["metadata"]["name"]).startswith("s.")  # type: ignore[index]
    assert len(str(body["reason"])) == 128
    assert len(str(body["note"]).encode()) <= 1024
    assert body["reportingController"] == "secretferry.io/operator"


def test_cluster_scoped_objects_report_into_default() -> None:
    regarding: events.ObjectRef = {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "ClusterMachineIdentity",
        "name": "c",
        "uid": "u2",
    }
    body = events.build(
        regarding=regarding, reason="R", note="n", type="Normal", action="Login", reporting_instance="pod-1"
    )
    assert body["metadata"]["namespace"] == "default"  # type: ignore[index]
    assert "namespace" not in body["regarding"]  # type: ignore[operator]


def test_a_note_shows_control_characters_escaped() -> None:
    body = events.build(
        regarding={"apiVersion": "v1", "kind": "SecretSync", "name": "s", "namespace": "ns", "uid": "u"},
        reason="R",
        note="key K\nWarning Forged 1s operator: x\r\u2028" + "\n" * 2000,
        type="Warning",
        action="Sync",
        reporting_instance="pod-1",
    )
    note = str(body["note"])
    assert note.startswith("key K\\nWarning Forged 1s operator: x\\r\\u2028\\n")
    assert "\n" not in note and len(note.encode()) <= 1024  # escaped first, then cut to the limit

"""What the controller keeps per object: enough for reconcile and drift checks, nothing more."""

from __future__ import annotations

import json
from typing import Any

from secretferry.models import secretsync as sync_models
from secretferry.reconcile import drift, guards, slim
from secretferry.reconcile.desired import DesiredObject, OwnerReference

MANAGED_FIELDS = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]


def sync_body() -> dict[str, Any]:
    spec = {
        "identityRef": {"kind": "ClusterMachineIdentity", "name": "ferry"},
        "sources": [{"projectId": "p1", "environment": "dev", "path": "/app"}],
    }
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "metadata": {
            "name": "app",
            "namespace": "team-a",
            "uid": "u-1",
            "generation": 3,
            "resourceVersion": "99",
            "labels": {"team": "a"},
            "annotations": {
                slim.LAST_APPLIED: json.dumps({"spec": spec}),
                "secretferry.io/force-sync": "1",
            },
            "managedFields": MANAGED_FIELDS,
        },
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Synced"}]},
    }


def test_sync_body_keeps_what_a_reconcile_parses_and_drops_the_rest() -> None:
    kept = slim.sync_body(sync_body())
    assert set(kept) == {"apiVersion", "kind", "metadata", "spec"}
    assert "managedFields" not in kept["metadata"]
    assert "resourceVersion" not in kept["metadata"]
    assert kept["metadata"]["annotations"] == {"secretferry.io/force-sync": "1"}
    parsed = sync_models.SecretSync.from_body(kept)
    original = sync_models.SecretSync.from_body(sync_body())
    assert parsed.spec == original.spec
    meta = parsed.metadata
    assert (meta.name, meta.uid, meta.labels) == ("app", "u-1", {"team": "a"})


def test_status_is_an_equal_copy_whose_keys_are_shared() -> None:
    first, second = sync_body()["status"], sync_body()["status"]
    a, b = slim.status(first), slim.status(second)
    assert a == first
    key_a = next(iter(a["conditions"][0]))
    key_b = next(iter(b["conditions"][0]))
    assert key_a is key_b  # one string object for 10,000 statuses
    assert a["conditions"][0]["reason"] is b["conditions"][0]["reason"]
    assert slim.status(None) == {}


def secret(data: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "data": data,
        "metadata": {
            "name": "app",
            "namespace": "team-a",
            "uid": "s-1",
            "resourceVersion": "7",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"secretferry.io/sync": "app"},
            "annotations": {"secretferry.io/data-hmac": "abc"},
            "ownerReferences": [{"uid": "u-1", "kind": "SecretSync", "name": "app"}],
            "managedFields": MANAGED_FIELDS,
            **meta,
        },
    }


def test_target_keeps_what_drift_checks_read() -> None:
    kept = slim.target(secret({"K": "dg=="}))
    assert "managedFields" not in kept["metadata"]
    assert "creationTimestamp" not in kept["metadata"]
    assert kept["metadata"]["resourceVersion"] == "7"
    want = DesiredObject(
        kind="Secret",
        name="app",
        namespace="team-a",
        type="Opaque",
        string_data={"K": "v"},
        labels={"secretferry.io/sync": "app"},
        annotations={"secretferry.io/data-hmac": "abc"},
        data_hmac="abc",
        owner=OwnerReference(api_version="secretferry.io/v1alpha1", kind="SecretSync", name="app", uid="u-1"),
        creation_policy="Owner",
        deletion_policy="Delete",
        sync_name="app",
    )
    assert drift.needs_write(want, kept) is None
    assert drift.needs_write(want, slim.target(secret({"K": "dw=="}))) == drift.DATA_CHANGED
    protected = guards.Protected(namespace="secretferry-system", hmac_key_secret="secretferry-hmac-key")
    assert guards.target_problem(want, kept, previously_synced=["K"], protected=protected) is None


def test_target_without_data_and_last_applied() -> None:
    obj = secret({}, annotations={slim.LAST_APPLIED: "{...}", "x": "y"})
    del obj["data"]
    kept = slim.target(obj)
    assert "data" not in kept
    assert kept["metadata"]["annotations"] == {"x": "y"}

"""The seam between the SecretSync pass and ClusterSecretSync (desired.ClusterOrigin): who the
target shows as its writer, and why no SecretSync can pass for that writer."""

from __future__ import annotations

from typing import Any

import pytest

from secretferry import models
from secretferry.models import labels
from secretferry.reconcile import desired, guards, reasons

KEY = b"k" * 32
ORIGIN = desired.ClusterOrigin(name="shared", uid="css-uid")
PROTECTED = guards.Protected(namespace="secretferry-system", hmac_key_secret="secretferry-hmac-key")


def sync(name: str = "shared", uid: str = "css-uid", **target: Any) -> models.SecretSync:
    return models.SecretSync.from_body(
        {
            "metadata": {"name": name, "namespace": "team-a", "uid": uid, "generation": 1},
            "spec": {
                "identityRef": {"kind": "ClusterMachineIdentity", "name": "cid"},
                "sources": [{"projectId": "p", "environment": "dev"}],
                "target": {"name": "pull", **target},
            },
        }
    )


def build(origin: desired.ClusterOrigin | None, **kw: Any) -> desired.DesiredObject:
    return desired.build_desired(sync(**kw), [desired.FetchedSource({"A": "1"})], hmac_key=KEY, origin=origin)


def test_the_origin_is_the_writer() -> None:
    d = build(ORIGIN)
    assert d.labels == {
        labels.MANAGED_BY_LABEL: "secretferry",
        labels.SYNC_LABEL: "cluster_shared",
        labels.CLUSTER_SYNC_LABEL: "shared",
    }
    assert d.owner == desired.OwnerReference(
        api_version="secretferry.io/v1alpha1", kind="ClusterSecretSync", name="shared", uid="css-uid"
    )
    assert d.owner.manifest()["controller"] is True
    assert d.sync_name == "clustersecretsync.shared"  # the field manager's name
    assert (d.namespace, d.name) == ("team-a", "pull")


def test_orphan_has_no_owner_but_the_labels() -> None:
    d = build(ORIGIN, creationPolicy="Orphan")
    assert d.owner is None and d.labels[labels.SYNC_LABEL] == "cluster_shared"


@pytest.mark.parametrize("name", ["shared", "cluster-shared", "cluster.shared", "x" * 253])
def test_no_secretsync_name_gives_a_cluster_label(name: str) -> None:
    """ "_" is no character of an object name: a SecretSync's label value never equals ours."""
    assert labels.sync_label_value(name) != labels.cluster_sync_label_value("shared")
    assert "_" not in labels.sync_label_value(name)


def test_a_long_cluster_name_still_fits_a_label_and_keeps_its_mark() -> None:
    value = labels.cluster_sync_label_value("n" * 253)
    assert len(value) <= labels.LABEL_VALUE_MAX and value.startswith("cluster_")


def test_a_secretsync_named_like_the_cluster_one_is_refused_at_its_target() -> None:
    """A tenant's SecretSync "shared" aiming at the ClusterSecretSync's target: TargetConflict."""
    ours = build(ORIGIN).manifest()
    ours["metadata"]["uid"] = "secret-uid"
    tenants = build(None, uid="tenant-uid")
    problem = guards.target_problem(tenants, ours, previously_synced=["A"], protected=PROTECTED)
    assert problem is not None and problem.reason == reasons.TARGET_CONFLICT


def test_the_cluster_entry_is_refused_at_a_secretsync_s_target() -> None:
    theirs = build(None, uid="tenant-uid").manifest()
    problem = guards.target_problem(build(ORIGIN), theirs, previously_synced=[], protected=PROTECTED)
    assert problem is not None and problem.reason == reasons.TARGET_CONFLICT


def test_the_data_hmac_is_keyed_by_the_namespace_too() -> None:
    """The same ClusterSecretSync in two namespaces: HMACs that compare with nothing else."""
    a = build(ORIGIN)
    other = sync()
    b = desired.build_desired(
        models.SecretSync.from_body(
            {
                **other.model_dump(by_alias=True),
                "metadata": {**other.metadata.model_dump(), "namespace": "team-b"},
            }
        ),
        [desired.FetchedSource({"A": "1"})],
        hmac_key=KEY,
        origin=ORIGIN,
    )
    assert a.data_hmac != b.data_hmac

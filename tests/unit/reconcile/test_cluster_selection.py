"""Which namespaces a ClusterSecretSync selects, and the SecretSync it stands for in each."""

from __future__ import annotations

from secretferry.models import clustersecretsync as css
from secretferry.models import secretsync
from secretferry.reconcile import cluster_selection

BODY = {
    "metadata": {"name": "shared", "uid": "u-1", "generation": 4, "labels": {"x": "y"}},
    "spec": {
        "namespaceSelector": {"matchLabels": {"team": "pay"}},
        "namespaces": ["named"],
        "syncTemplate": {
            "identityRef": {"kind": "ClusterMachineIdentity", "name": "cid"},
            "sources": [{"projectId": "p", "environment": "dev"}],
            "target": {"name": "pull"},
        },
    },
}
NAMESPACES = {"named": {}, "pay-1": {"team": "pay"}, "pay-2": {"team": "pay"}, "other": {"team": "x"}}


def test_selected_by_labels_and_names() -> None:
    spec = css.ClusterSecretSync.from_body(BODY).spec
    assert cluster_selection.selected(spec, NAMESPACES) == {"named", "pay-1", "pay-2"}


def test_only_served_namespaces_are_selected() -> None:
    spec = css.ClusterSecretSync.from_body(BODY).spec
    assert cluster_selection.selected(spec, NAMESPACES, served={"pay-1", "other"}) == {"pay-1"}


def test_the_expanded_body_is_a_secretsync_in_the_namespace_with_the_object_s_identity() -> None:
    body = cluster_selection.expanded_body(BODY, "pay-1")
    sync = secretsync.SecretSync.from_body(body)
    assert (sync.metadata.namespace, sync.metadata.name) == ("pay-1", "shared")
    assert (sync.metadata.uid, sync.metadata.generation) == ("u-1", 4)
    assert sync.spec.target.name == "pull"
    assert sync.spec.identity_ref.kind == "ClusterMachineIdentity"
    assert body["spec"] is BODY["spec"]["syncTemplate"]  # shared, not copied per namespace
    assert "labels" not in body["metadata"]

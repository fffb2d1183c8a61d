"""Helpers for the ClusterSecretSync tests: labelled namespaces, a cluster identity, the object."""

from __future__ import annotations

import uuid
from typing import Any

import harness

from secretferry.devcluster.cluster import ControlPlane

CSS = "clustersecretsync"


def labelled_namespace(cp: ControlPlane, labels: dict[str, str], prefix: str = "css") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    cp.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
    return name


def delete_namespaces(cp: ControlPlane, *names: str) -> None:
    for name in names:
        cp.kubectl("delete", "namespace", name, "--wait=false", check=False)


def cluster_identity(
    cp: ControlPlane,
    name: str,
    *,
    sa_namespace: str,
    allowed: dict[str, Any] | None = None,
    templates: bool = False,
) -> None:
    """A ClusterMachineIdentity with Kubernetes auth through ServiceAccount ``ferry-sa`` in
    ``sa_namespace`` (a cluster identity needs no opt-in), admitting ``allowed`` (None: all)."""
    cp.kubectl("create", "serviceaccount", "ferry-sa", "-n", sa_namespace, check=False)
    spec: dict[str, Any] = {
        "auth": {
            "kubernetes": {
                "identityId": harness.IDENTITY_ID,
                "audiences": [harness.AUDIENCE],
                "serviceAccountRef": {"name": "ferry-sa", "namespace": sa_namespace},
            }
        }
    }
    if allowed is not None:
        spec["allowedNamespaces"] = allowed
    if templates:
        spec["allowTemplates"] = True
    cp.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "ClusterMachineIdentity",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def manifest(
    name: str,
    *,
    identity: str,
    path: str,
    selector: dict[str, Any] | None = None,
    namespaces: list[str] | None = None,
    target: dict[str, Any] | None = None,
    templates_namespace: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "syncTemplate": {
            "identityRef": {"kind": "ClusterMachineIdentity", "name": identity},
            "sources": [harness.source(path)],
            "target": target or {"name": "shared"},
        }
    }
    if selector is not None:
        spec["namespaceSelector"] = selector
    if namespaces is not None:
        spec["namespaces"] = namespaces
    if templates_namespace is not None:
        spec["templatesNamespace"] = templates_namespace
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "ClusterSecretSync",
        "metadata": {"name": name},
        "spec": spec,
    }


def status(cp: ControlPlane, name: str) -> dict[str, Any]:
    obj = harness.get(cp, CSS, name, "default")
    return dict((obj or {}).get("status") or {})


def counts(cp: ControlPlane, name: str) -> tuple[int | None, int | None, int | None]:
    st = status(cp, name)
    return st.get("selectedNamespaces"), st.get("readyNamespaces"), st.get("failedNamespaces")

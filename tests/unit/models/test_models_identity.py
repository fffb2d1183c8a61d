"""MachineIdentity / ClusterMachineIdentity parsing and validation."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from secretferry import models

K8S = {"kubernetes": {"identityId": "id-1", "serviceAccountRef": {"name": "sa"}}}
CLUSTER_K8S = {"kubernetes": {"identityId": "id-1", "serviceAccountRef": {"name": "sa", "namespace": "ops"}}}


def body(spec: dict[str, Any], *, kind: str = "MachineIdentity", **extra: Any) -> dict[str, Any]:
    meta = {"name": "mi", "uid": "u1", "generation": 3}
    if kind == "MachineIdentity":
        meta["namespace"] = "team-a"
    return {"apiVersion": "secretferry.io/v1alpha1", "kind": kind, "metadata": meta, "spec": spec, **extra}


def test_kubernetes_auth_defaults() -> None:
    mi = models.MachineIdentity.from_body(body({"auth": K8S}))
    assert mi.spec.auth.method == "kubernetes"
    assert mi.spec.auth.kubernetes is not None
    assert mi.spec.auth.kubernetes.token_expiration_seconds == 600
    assert mi.spec.auth.kubernetes.audiences == []
    assert mi.spec.host_api is None
    assert mi.metadata.generation == 3
    assert mi.status.conditions == []


def test_host_api_alias_and_status() -> None:
    mi = models.MachineIdentity.from_body(
        body(
            {"hostAPI": "https://svc.example", "auth": K8S},
            status={
                "tokenExpiresAt": "2030-01-01T00:00:00Z",
                "conditions": [{"type": "Ready", "status": "True", "reason": "LoggedIn"}],
            },
        )
    )
    assert mi.spec.host_api == "https://svc.example"
    assert mi.status.token_expires_at is not None
    assert models.find_condition(mi.status.conditions, "Ready") is not None
    dumped = mi.spec.model_dump(by_alias=True, exclude_none=True)
    assert dumped["hostAPI"] == "https://svc.example"


@pytest.mark.parametrize(
    "auth",
    [
        {"universal": {"clientId": "c", "clientSecretRef": {"name": "s", "key": "k"}}},
        {"universal": {"credentialsSecretRef": {"name": "s"}}},
        {"accessToken": {"secretRef": {"name": "s", "key": "token"}}},
        K8S,
    ],
)
def test_valid_auth(auth: dict[str, Any]) -> None:
    models.MachineIdentity.from_body(body({"auth": auth}))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"auth": {}}, "spec.auth: set exactly one of"),
        (
            {"auth": {**K8S, "accessToken": {"secretRef": {"name": "s", "key": "k"}}}},
            "spec.auth: set exactly one",
        ),
        ({"auth": {"universal": {"clientId": "c"}}}, "spec.auth.universal: set either clientId"),
        (
            {"auth": {"universal": {"clientId": "c", "credentialsSecretRef": {"name": "s"}}}},
            "spec.auth.universal: set either clientId",
        ),
        (
            {"auth": {"kubernetes": {**K8S["kubernetes"], "tokenExpirationSeconds": 599}}},
            "spec.auth.kubernetes.tokenExpirationSeconds: input should be greater than or equal to 600",
        ),
        ({"auth": K8S, "hostAPI": "ftp://x"}, "spec.hostAPI: string should match pattern"),
        (
            {"auth": K8S, "tls": {"caBundle": "PEM", "caSecretRef": {"name": "s", "key": "ca.crt"}}},
            "spec.tls: set at most one of caBundle and caSecretRef",
        ),
        ({}, "spec.auth: is required"),
    ],
)
def test_invalid_namespaced(spec: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValidationError) as info:
        models.MachineIdentity.from_body(body(spec))
    assert expected in models.describe_validation_error(info.value)


def test_namespaced_kind_ignores_a_namespace_on_references() -> None:
    # The CRD schema has no such field (the apiserver prunes it); a model must never act on it.
    mi = models.MachineIdentity.from_body(
        body(
            {
                "auth": {
                    "kubernetes": {"identityId": "i", "serviceAccountRef": {"name": "sa", "namespace": "x"}}
                }
            }
        )
    )
    assert mi.spec.auth.kubernetes is not None
    assert not hasattr(mi.spec.auth.kubernetes.service_account_ref, "namespace")


@pytest.mark.parametrize(
    ("auth", "missing"),
    [
        (K8S, "spec.auth.kubernetes.serviceAccountRef.namespace"),
        (
            {"universal": {"clientId": "c", "clientSecretRef": {"name": "s", "key": "k"}}},
            "spec.auth.universal.clientSecretRef.namespace",
        ),
        (
            {"universal": {"credentialsSecretRef": {"name": "s"}}},
            "spec.auth.universal.credentialsSecretRef.namespace",
        ),
        (
            {"accessToken": {"secretRef": {"name": "s", "key": "k"}}},
            "spec.auth.accessToken.secretRef.namespace",
        ),
    ],
)
def test_cluster_references_need_a_namespace(auth: dict[str, Any], missing: str) -> None:
    with pytest.raises(ValidationError) as info:
        models.ClusterMachineIdentity.from_body(body({"auth": auth}, kind="ClusterMachineIdentity"))
    assert f"{missing}: is required" in models.describe_validation_error(info.value)


def test_cluster_tls_secret_needs_a_namespace() -> None:
    spec = {"auth": CLUSTER_K8S, "tls": {"caSecretRef": {"name": "s", "key": "ca.crt"}}}
    with pytest.raises(ValidationError) as info:
        models.ClusterMachineIdentity.from_body(body(spec, kind="ClusterMachineIdentity"))
    assert "spec.tls.caSecretRef.namespace: is required" in models.describe_validation_error(info.value)


@pytest.mark.parametrize(
    ("allowed", "namespace", "ns_labels", "expected"),
    [
        (None, "any", {}, True),
        ({}, "any", {}, False),
        ({"names": ["a", "b"]}, "b", {}, True),
        ({"names": ["a"]}, "b", {}, False),
        ({"selector": {"matchLabels": {"team": "x"}}}, "b", {"team": "x"}, True),
        ({"names": ["a"], "selector": {"matchLabels": {"team": "x"}}}, "b", {"team": "y"}, False),
    ],
)
def test_allowed_namespaces(
    allowed: dict[str, Any] | None, namespace: str, ns_labels: dict[str, str], expected: bool
) -> None:
    spec: dict[str, Any] = {"auth": CLUSTER_K8S}
    if allowed is not None:
        spec["allowedNamespaces"] = allowed
    cmid = models.ClusterMachineIdentity.from_body(body(spec, kind="ClusterMachineIdentity"))
    assert cmid.spec.allows_namespace(namespace, ns_labels) is expected
    assert cmid.KIND == "ClusterMachineIdentity"
    assert isinstance(cmid.spec, models.MachineIdentitySpec)  # code for the namespaced kind reads it too


def test_unreadable_status_is_dropped_not_fatal() -> None:
    mi = models.MachineIdentity.from_body(body({"auth": K8S}, status={"conditions": "garbage"}))
    assert mi.status == models.MachineIdentityStatus()

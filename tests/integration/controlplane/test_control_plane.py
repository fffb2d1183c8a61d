"""The local control plane does what the operator's tests rely on: a real API, TokenRequest and
TokenReview, garbage collection, Deployment rollouts and served CRDs."""

from __future__ import annotations

import json

import pytest

from secretferry.devcluster.cluster import ControlPlane
from waiting import eventually

pytestmark = pytest.mark.integration


# A garbage collection or a rollout by the controller-manager can take a while on a busy machine.
SETTLE_SECONDS = 60.0


def _get_json(cp: ControlPlane, *args: str) -> dict[str, object]:
    out: dict[str, object] = json.loads(cp.kubectl("get", *args, "-o", "json"))
    return out


def test_secret_round_trip(control_plane: ControlPlane, namespace: str) -> None:
    control_plane.kubectl("create", "secret", "generic", "s1", "-n", namespace, "--from-literal=k=dmFs")
    secret = _get_json(control_plane, "secret", "s1", "-n", namespace)
    assert secret["data"] == {"k": "ZG1Gcw=="}


def _review(cp: ControlPlane, token: str, audiences: list[str]) -> dict[str, object]:
    review = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token, "audiences": audiences},
    }
    out: dict[str, object] = json.loads(
        cp.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(review))
    )
    status = out["status"]
    assert isinstance(status, dict)
    return status


def test_token_request_and_review(control_plane: ControlPlane, namespace: str) -> None:
    control_plane.kubectl("create", "serviceaccount", "app", "-n", namespace)
    token = control_plane.token_for(namespace, "app", audiences=["secretferry-test"])
    ok = _review(control_plane, token, ["secretferry-test"])
    assert ok["authenticated"] is True
    assert ok["user"]["username"] == f"system:serviceaccount:{namespace}:app"  # type: ignore[index]
    assert ok["audiences"] == ["secretferry-test"]

    other = control_plane.token_for(namespace, "app", audiences=["someone-else"])
    denied = _review(control_plane, other, ["secretferry-test"])
    assert not denied.get("authenticated")


def test_garbage_collection_follows_owner_references(control_plane: ControlPlane, namespace: str) -> None:
    control_plane.kubectl("create", "configmap", "owner", "-n", namespace)
    owner = _get_json(control_plane, "configmap", "owner", "-n", namespace)
    uid = owner["metadata"]["uid"]  # type: ignore[index]
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "owned",
                "namespace": namespace,
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}],
            },
            "stringData": {"k": "v"},
        }
    )
    control_plane.kubectl("delete", "configmap", "owner", "-n", namespace)

    def gone() -> bool:
        return "NotFound" in _stderr_of_get(control_plane, "secret", "owned", namespace)

    eventually(gone, what="the owned Secret to be collected", timeout=SETTLE_SECONDS)


def _stderr_of_get(cp: ControlPlane, kind: str, name: str, namespace: str) -> str:
    return cp.kubectl_run("get", kind, name, "-n", namespace).stderr


def _replicasets(cp: ControlPlane, namespace: str) -> list[dict[str, object]]:
    items = _get_json(cp, "replicasets", "-n", namespace, "-l", "app=web")["items"]
    assert isinstance(items, list)
    return items


def test_pod_template_patch_creates_a_new_replicaset(control_plane: ControlPlane, namespace: str) -> None:
    control_plane.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "registry.invalid/web:1"}]},
                },
            },
        }
    )
    eventually(
        lambda: len(_replicasets(control_plane, namespace)) == 1,
        what="the first ReplicaSet",
        timeout=SETTLE_SECONDS,
    )
    patch = {"spec": {"template": {"metadata": {"annotations": {"secretferry.io/restartedAt": "1"}}}}}
    control_plane.kubectl(
        "patch", "deployment", "web", "-n", namespace, "--type=merge", "-p", json.dumps(patch)
    )
    eventually(
        lambda: len(_replicasets(control_plane, namespace)) == 2,
        what="a second ReplicaSet",
        timeout=SETTLE_SECONDS,
    )


CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.secretferry.io
spec:
  group: example.secretferry.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
"""


def test_crd_from_yaml_is_served(control_plane: ControlPlane, namespace: str) -> None:
    control_plane.kubectl("apply", "-f", "-", input=CRD)
    control_plane.kubectl(
        "wait", "--for=condition=Established", "crd/widgets.example.secretferry.io", "--timeout=60s"
    )
    widget = {
        "apiVersion": "example.secretferry.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": namespace},
        "spec": {"size": 3},
    }

    def created() -> bool:
        try:
            control_plane.apply(widget)
        except RuntimeError:
            return False  # discovery may lag the Established condition by a moment
        return True

    eventually(created, what="the Widget to be accepted", timeout=SETTLE_SECONDS)
    got = _get_json(control_plane, "widget", "w", "-n", namespace)
    assert got["spec"] == {"size": 3}

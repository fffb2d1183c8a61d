"""Finding and restarting the workloads that read a Secret, on a real controller-manager."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.kube import client, errors, workloads
from waiting import eventually

pytestmark = pytest.mark.integration


# A rollout by the controller-manager can take a while on a busy machine.
SETTLE_SECONDS = 60.0


def _deployment(name: str, namespace: str, *, secret: str | None, opted_in: bool) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "image": "registry.invalid/app:1"}
    if secret:
        container["envFrom"] = [{"secretRef": {"name": secret}}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {workloads.AUTO_RELOAD_ANNOTATION: "true"} if opted_in else {},
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}},
        },
    }


def _statefulset(name: str, namespace: str, secret: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {workloads.AUTO_RELOAD_ANNOTATION: "true"},
        },
        "spec": {
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "initContainers": [
                        {
                            "name": "init",
                            "image": "registry.invalid/init:1",
                            "env": [
                                {"name": "T", "valueFrom": {"secretKeyRef": {"name": secret, "key": "t"}}}
                            ],
                        }
                    ],
                    "containers": [{"name": "app", "image": "registry.invalid/app:1"}],
                },
            },
        },
    }


async def test_consumers(kube: client.Kube, control_plane: ControlPlane, namespace: str) -> None:
    control_plane.apply(_deployment("reader", namespace, secret="app-secret", opted_in=True))
    control_plane.apply(_deployment("not-opted-in", namespace, secret="app-secret", opted_in=False))
    control_plane.apply(_deployment("other-secret", namespace, secret="other", opted_in=True))
    control_plane.apply(_statefulset("db", namespace, "app-secret"))
    found = await workloads.consumers(kube, namespace=namespace, secret_names=["app-secret", "other", "none"])
    assert found == {
        "app-secret": [("Deployment", "reader"), ("StatefulSet", "db")],
        "other": [("Deployment", "other-secret")],
        "none": [],
    }


async def test_restart_rolls_a_new_replicaset(
    kube: client.Kube, control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.apply(_deployment("web", namespace, secret="s", opted_in=True))

    def replicasets(count: int) -> bool:
        listed = json.loads(control_plane.kubectl("get", "replicasets", "-n", namespace, "-o", "json"))
        return len(listed["items"]) == count

    # polled in a thread (kubectl is a subprocess): the test's event loop stays free
    await asyncio.to_thread(
        eventually, lambda: replicasets(1), what="the first ReplicaSet", timeout=SETTLE_SECONDS
    )
    await workloads.restart(
        kube,
        kind="Deployment",
        namespace=namespace,
        name="web",
        annotations={"secretferry.io/restartedAt": "t1"},
    )
    await asyncio.to_thread(
        eventually,
        lambda: replicasets(2),
        what="a second ReplicaSet after the restart",
        timeout=SETTLE_SECONDS,
    )
    deployment = await kube.request("GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/web")
    template_annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert template_annotations == {"secretferry.io/restartedAt": "t1"}


async def test_rollouts_absent(kube: client.Kube, namespace: str) -> None:
    assert await workloads.rollouts_supported(kube) is False
    assert await workloads.rollouts_supported(kube) is False  # cached
    with pytest.raises(errors.NotFound, match="Argo Rollouts"):
        await workloads.restart(kube, kind="Rollout", namespace=namespace, name="r", annotations={"a": "b"})
    with pytest.raises(errors.NotFound):
        await workloads.restart(
            kube, kind="Deployment", namespace=namespace, name="missing", annotations={"a": "b"}
        )


async def test_read_and_a_restart_conditional_on_the_version_read(
    kube: client.Kube, control_plane: ControlPlane, namespace: str
) -> None:
    """``read`` (a LIST by field selector: the chart grants no ``get`` on workloads) returns the
    owner's annotations and version; a restart at that version fails once the workload changed,
    so an opt-in taken back between the check and the patch stops the patch."""
    body = _deployment("web", namespace, secret="s", opted_in=False)
    body["metadata"]["annotations"] = {workloads.RESTART_ON_ANNOTATION: "app"}
    control_plane.apply(body)
    control_plane.apply(_deployment("web-2", namespace, secret="s", opted_in=False))
    workload = await workloads.read(kube, kind="Deployment", namespace=namespace, name="web")
    assert workload.name == "web" and workload.kind == "Deployment"
    assert workload.annotations[workloads.RESTART_ON_ANNOTATION] == "app"
    assert workloads.references_secret(workload.pod_spec, "s")
    with pytest.raises(errors.NotFound):
        await workloads.read(kube, kind="Deployment", namespace=namespace, name="we")
    control_plane.kubectl(
        "annotate", "deployment", "web", "-n", namespace, f"{workloads.RESTART_ON_ANNOTATION}-"
    )
    with pytest.raises(errors.Conflict):
        await workloads.restart(
            kube,
            kind="Deployment",
            namespace=namespace,
            name="web",
            annotations={"secretferry.io/restart-s": "h1"},
            resource_version=workload.resource_version,
        )
    deployment = await kube.request("GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/web")
    assert "secretferry.io/restart-s" not in (
        deployment["spec"]["template"]["metadata"].get("annotations") or {}
    )

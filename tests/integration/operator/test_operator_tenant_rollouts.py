"""A tenant cannot restart a workload through ``spec.rolloutRestartTargets`` unless the workload
opted in (issue 20: a tenant restarted a Deployment it cannot patch, every cooldown, forever).

The tenant (``hostile``) may only create our kinds; the Deployments are the admin's. "Not
restarted" is judged on the pod template's annotations after a data change that did restart the
opted-in Deployment next to it, so the operator demonstrably acted on that change.
"""

from __future__ import annotations

import json
from typing import Any

import harness
import pytest
import tenant
from harness import PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

RESTART_ON = "secretferry.io/restart-on"
RESTART_ANNOTATION = "secretferry.io/restart-app"  # rollouts.restart_annotation("app")


def _deployment(namespace: str, name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "registry.invalid/app:1"}]},
            },
        },
    }


def _template_annotations(cp: ControlPlane, namespace: str, name: str) -> dict[str, str]:
    obj = harness.get(cp, "deployment", name, namespace)
    assert obj is not None
    return dict(obj["spec"]["template"]["metadata"].get("annotations") or {})


def _refusals(cp: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    events = json.loads(cp.kubectl("get", "events.events.k8s.io", "-n", namespace, "-o", "json"))
    return [e for e in events["items"] if e.get("reason") == "RolloutNotOptedIn"]


def test_a_tenant_restarts_only_workloads_that_opted_in(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "tenant-rollout-1")
    assert not hostile.can("patch", "deployments")  # what the tenant could not do itself
    control_plane.apply(_deployment(namespace, "admin-web", {}))
    control_plane.apply(_deployment(namespace, "opted-in", {RESTART_ON: "other, app"}))
    harness.kubernetes_identity(control_plane, namespace)
    hostile.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "SecretSync",
            "metadata": {"name": "app", "namespace": namespace},
            "spec": {
                "identityRef": {"name": "ferry"},
                "sources": [source(path)],
                "rolloutRestartTargets": [
                    {"kind": "Deployment", "name": "admin-web"},
                    {"kind": "Deployment", "name": "opted-in"},
                ],
            },
        }
    )
    eventually(lambda: secret_data(control_plane, namespace, "app") == {"K": "tenant-rollout-1"}, what="sync")
    before = _template_annotations(control_plane, namespace, "admin-web")

    service.set_secret(PROJECT_ID, "dev", path, "K", "tenant-rollout-2")
    eventually(
        lambda: RESTART_ANNOTATION in _template_annotations(control_plane, namespace, "opted-in"),
        what="the opted-in Deployment restarted",
    )
    refusals = eventually(
        lambda: _refusals(control_plane, namespace),
        what="a Warning on the SecretSync naming the missing annotation",
    )
    assert refusals and all(RESTART_ON in e["note"] and "admin-web" in e["note"] for e in refusals)
    assert all(e["regarding"]["kind"] == "SecretSync" for e in refusals)
    assert _template_annotations(control_plane, namespace, "admin-web") == before

    # The admin opts admin-web in: the next change restarts it too.
    control_plane.kubectl("annotate", "deployment", "admin-web", "-n", namespace, f"{RESTART_ON}=app")
    service.set_secret(PROJECT_ID, "dev", path, "K", "tenant-rollout-3")
    eventually(
        lambda: RESTART_ANNOTATION in _template_annotations(control_plane, namespace, "admin-web"),
        what="admin-web restarted once it opted in",
        timeout=30,  # the cooldown of the refused restart (5 s in the test operator) runs first
    )
    harness.assert_no_values_leaked(control_plane, operator)

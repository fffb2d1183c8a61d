"""Rollouts only on real change: a consuming Deployment gets a new ReplicaSet after a
value change, none after an unrelated change or an operator restart, and one for a burst of
changes inside the cooldown; an explicit target only when it opted in with
``secretferry.io/restart-on``. Also: the force-sync annotation."""

from __future__ import annotations

import json
import time
from typing import Any

import harness
import pytest
from harness import PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration
COOLDOWN = 5.0  # SECRETFERRY_ROLLOUT_COOLDOWN_SECONDS in harness.start_operator


def _deployment(
    name: str, *, consumes: str | None, auto_reload: bool, restart_on: str | None = None
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "registry.invalid/app:1"}
    if consumes:
        container["env"] = [{"name": "K", "valueFrom": {"secretKeyRef": {"name": consumes, "key": "K"}}}]
    meta: dict[str, Any] = {"name": name, "annotations": {}}
    if auto_reload:
        meta["annotations"]["secretferry.io/auto-reload"] = "true"
    if restart_on is not None:
        meta["annotations"]["secretferry.io/restart-on"] = restart_on
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}},
        },
    }


def _replicasets(cp: ControlPlane, namespace: str, app: str) -> int:
    listing = json.loads(cp.kubectl("get", "replicasets", "-n", namespace, "-l", f"app={app}", "-o", "json"))
    return len(listing["items"])


def _event_reasons(cp: ControlPlane, namespace: str) -> set[str]:
    events = json.loads(cp.kubectl("get", "events.events.k8s.io", "-n", namespace, "-o", "json"))
    return {str(e.get("reason")) for e in events["items"]}


def _apply(cp: ControlPlane, namespace: str, body: dict[str, Any]) -> None:
    body["metadata"]["namespace"] = namespace
    cp.apply(body)


def test_rollouts_happen_only_on_real_change(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "rollout-value-1")
    service.set_secret(PROJECT_ID, "dev", f"{path}-other", "K", "unrelated-value-1")
    _apply(control_plane, namespace, _deployment("web", consumes="app", auto_reload=True))
    _apply(control_plane, namespace, _deployment("api", consumes=None, auto_reload=False, restart_on="app"))
    _apply(control_plane, namespace, _deployment("bystander", consumes="app", auto_reload=False))
    # Named in rolloutRestartTargets, but its owner admitted another SecretSync only.
    _apply(
        control_plane, namespace, _deployment("worker", consumes=None, auto_reload=False, restart_on="other")
    )
    for app in ("web", "api", "bystander", "worker"):
        eventually(
            lambda app=app: _replicasets(control_plane, namespace, app) == 1, what=f"{app} first ReplicaSet"
        )
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(
        control_plane,
        namespace,
        "app",
        sources=[source(path)],
        rolloutRestartTargets=[
            {"kind": "Deployment", "name": "api"},
            {"kind": "Deployment", "name": "worker"},
        ],
    )
    harness.secret_sync(control_plane, namespace, "other", sources=[source(f"{path}-other")])
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"K": "rollout-value-1"}, what="first sync"
    )
    eventually(
        lambda: secret_data(control_plane, namespace, "other") == {"K": "unrelated-value-1"}, what="other"
    )
    time.sleep(2)
    assert _replicasets(control_plane, namespace, "web") == 1, "a first sync must not restart anything"

    service.set_secret(PROJECT_ID, "dev", path, "K", "rollout-value-2")
    eventually(lambda: _replicasets(control_plane, namespace, "web") == 2, what="web rolled after the change")
    eventually(
        lambda: _replicasets(control_plane, namespace, "api") == 2, what="api (explicit target) rolled"
    )
    assert _replicasets(control_plane, namespace, "bystander") == 1  # not opted in
    eventually(
        lambda: "RolloutNotOptedIn" in _event_reasons(control_plane, namespace),
        what="a Warning saying why worker was not restarted",
    )
    assert _replicasets(control_plane, namespace, "worker") == 1  # restart-on names another SecretSync

    service.set_secret(PROJECT_ID, "dev", f"{path}-other", "K", "unrelated-value-2")
    eventually(
        lambda: secret_data(control_plane, namespace, "other") == {"K": "unrelated-value-2"},
        what="the unrelated change",
    )
    # A spec edit re-keys the data HMAC (status and annotation change) but leaves the data alone.
    before = (harness.get(control_plane, "secretsync", "app", namespace) or {})["status"]["dataHMAC"]
    harness.secret_sync(
        control_plane,
        namespace,
        "app",
        sources=[source(path)],
        rolloutRestartTargets=[{"kind": "Deployment", "name": "api"}],
        refreshInterval="10m",
    )
    eventually(
        lambda: (
            (harness.get(control_plane, "secretsync", "app", namespace) or {})
            .get("status", {})
            .get("dataHMAC")
            not in (None, before)
        ),
        what="the edited SecretSync's new data HMAC",
    )
    operator.restart()
    time.sleep(COOLDOWN + 2)
    assert _replicasets(control_plane, namespace, "web") == 2, (
        "unrelated change, edit or restart caused a rollout"
    )
    assert _replicasets(control_plane, namespace, "api") == 2, "the edit restarted the explicit target"

    # A change after a quiet period rolls at once and starts the cooldown; three more changes
    # inside that cooldown coalesce into exactly one rollout at its end.
    service.set_secret(PROJECT_ID, "dev", path, "K", "rollout-value-3")
    eventually(lambda: _replicasets(control_plane, namespace, "web") == 3, what="rollout after change 3")
    for i in (4, 5, 6):  # back to back: well inside the cooldown even on a loaded machine
        service.set_secret(PROJECT_ID, "dev", path, "K", f"rollout-value-{i}")
        time.sleep(0.3)
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"K": "rollout-value-6"}, what="change 6"
    )
    eventually(
        lambda: _replicasets(control_plane, namespace, "web") == 4,
        what="one rollout for three changes inside the cooldown",
        timeout=COOLDOWN * 4,
    )
    time.sleep(COOLDOWN + 2)
    assert _replicasets(control_plane, namespace, "web") == 4
    events = json.loads(control_plane.kubectl("get", "events.events.k8s.io", "-n", namespace, "-o", "json"))
    assert any(e.get("reason") == "RolloutRestarted" for e in events["items"])


def test_force_sync_annotation_fetches_now(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "force-value-1")
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(
        control_plane, namespace, "app", sources=[source(path)], refreshInterval="3h", instantUpdates=False
    )
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"K": "force-value-1"}, what="first sync"
    )
    service.set_secret(PROJECT_ID, "dev", path, "K", "force-value-2")
    time.sleep(2)
    assert secret_data(control_plane, namespace, "app") == {"K": "force-value-1"}  # polling, 3 h away
    control_plane.kubectl("annotate", "secretsync", "app", "-n", namespace, "secretferry.io/force-sync=1")
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"K": "force-value-2"},
        what="the forced sync",
        timeout=10,
    )

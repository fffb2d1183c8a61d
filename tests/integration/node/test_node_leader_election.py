"""Two operator pods with leader election on the real node: one leads, the other takes over when
the leader is killed, and syncing goes on under the new leader."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
from node_helpers import operator_harness

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_pod import OperatorPod
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

harness = operator_harness()


@pytest.fixture(scope="module")
def pair(
    node_cluster: ControlPlane, node_service: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorPod]:
    pods = OperatorPod(
        node_cluster,
        workdir=tmp_path_factory.mktemp("operator-pair"),
        default_host_api=node_service.base_url,
        release="ferry-ha",
        replicas=2,
        values={"extraEnv": [{"name": "SECRETFERRY_STREAM_HEARTBEAT_SECONDS", "value": "1"}]},
    )
    pods.install()
    try:
        yield pods
    finally:
        pods.uninstall()


def _holder(cp: ControlPlane, pods: OperatorPod) -> str:
    out = cp.kubectl("get", "lease", "ferry-ha-secretferry", "-n", pods.namespace, "-o", "json", check=False)
    return str(json.loads(out)["spec"].get("holderIdentity") or "") if out else ""  # not created yet


def test_one_leader_and_a_takeover_when_it_is_killed(
    node_cluster: ControlPlane, node_service: DevServer, pair: OperatorPod
) -> None:
    names = {p["metadata"]["name"] for p in pair.pods()}
    assert len(names) == 2
    leader = harness.eventually(
        lambda: _holder(node_cluster, pair) in names and _holder(node_cluster, pair),
        timeout=60,
        what="a leader among the two pods",
    )
    namespace = f"ha-{uuid.uuid4().hex[:8]}"
    node_cluster.kubectl("create", "namespace", namespace)
    node_service.set_secret(harness.PROJECT_ID, "dev", "/ha", "TOKEN_URL", "https://one.ha.example")
    harness.kubernetes_identity(node_cluster, namespace)
    harness.secret_sync(node_cluster, namespace, "ha", sources=[harness.source("/ha")], refreshInterval="3h")
    harness.wait_reason(node_cluster, namespace, "ha", "Synced", timeout=90)

    # Killed, not asked to leave: no chance to hand the Lease over. The standby and the pod the
    # ReplicaSet starts in the leader's place race for the Lease once it runs out; either may win.
    killed = time.monotonic()
    node_cluster.kubectl("delete", "pod", leader, "-n", pair.namespace, "--grace-period=0", "--force")
    new_leader = harness.eventually(
        lambda: _holder(node_cluster, pair) not in ("", leader) and _holder(node_cluster, pair),
        timeout=90,
        interval=0.2,
        what=f"another pod to take the Lease from {leader}",
    )
    took_over = time.monotonic() - killed
    assert new_leader in {p["metadata"]["name"] for p in pair.pods()}
    node_service.set_secret(harness.PROJECT_ID, "dev", "/ha", "TOKEN_URL", "https://two.ha.example")
    harness.eventually(
        lambda: (
            (harness.secret_data(node_cluster, namespace, "ha") or {}).get("TOKEN_URL")
            == "https://two.ha.example"
        ),
        timeout=60,
        what="the new leader to sync a change",
    )
    # The Lease is held for 15 s: a takeover sooner than that would mean two leaders at once.
    assert took_over >= 10, f"the standby took over after {took_over:.1f} s, before the Lease ran out"
    node_cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)

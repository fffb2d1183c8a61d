"""The operator as users run it: helm installs the chart with the image built from our Dockerfile,
the operator runs as a pod on a real kubelet node, and another pod reads the Secret it writes.

Everything is real: kube-apiserver, controller-manager, kube-scheduler, kubelet, containerd/runc,
the image, the chart (plus only the local-node values in hack/local-node-values.yaml), the dev
server behind a Kubernetes-auth login checked by a real TokenReview.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any

import pytest
from node_helpers import checked_again, installed_operator, operator_harness, synced_namespace

from secretferry.devcluster import consumer
from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_pod import OperatorPod
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

harness = operator_harness()
HOURS = "3h"  # a refresh interval far beyond any test: only the event stream explains a change
# What the crash loop looked like: kopf dialling the hard-coded in-cluster DNS name.
# A connection to the in-cluster DNS name names its port ("host kubernetes.default.svc:443"); the
# apiserver's audience that the operator logs (https://kubernetes.default.svc.cluster.local) is no
# such attempt.
IN_CLUSTER_DNS_FAILURES = ("kubernetes.default.svc:", "ClientConnectorDNSError", "ClientConnectorError")


@pytest.fixture(scope="module")
def operator(
    node_cluster: ControlPlane, node_service: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorPod]:
    with installed_operator(
        node_cluster, node_service, workdir=tmp_path_factory.mktemp("operator-pod")
    ) as pod:
        yield pod


@pytest.fixture(scope="module")
def synced(node_cluster: ControlPlane, node_service: DevServer, operator: OperatorPod) -> Iterator[str]:
    """A namespace with a Kubernetes-auth identity and SecretSync ``app-config`` → Secret ``app-config``."""
    with synced_namespace(
        node_cluster,
        node_service,
        prefix="node",
        path="/node",
        values={"DB_HOST": "db-one.node.example", "DB_PASSWORD": "node-pass-original-1"},
        sync="app-config",
        refresh=HOURS,
    ) as namespace:
        yield namespace


def _pod_age_seconds(pod: dict[str, Any]) -> float:
    started = datetime.datetime.fromisoformat(pod["status"]["startTime"].replace("Z", "+00:00"))
    return (datetime.datetime.now(datetime.UTC) - started).total_seconds()


def test_the_operator_pod_runs_from_the_built_image_and_logs_in_from_the_service_env(
    node_cluster: ControlPlane, operator: OperatorPod
) -> None:
    (pod,) = operator.pods()
    assert operator.is_ready(pod)
    assert pod["spec"]["containers"][0]["image"] == "localhost/secretferry:dev"
    assert pod["spec"]["nodeName"] == "localhost"
    # The Service env the kubelet injects points at a ClusterIP nothing routes here; the chart
    # values override it, and kopf and our own client must both follow the override.
    harness.eventually(
        lambda: "secretferry started" in operator.log_text(), timeout=60, what="the operator to start"
    )
    log = operator.log_text()
    assert not [f for f in IN_CLUSTER_DNS_FAILURES if f in log], log[-3000:]


def test_a_pod_reads_the_value_the_operator_wrote(node_cluster: ControlPlane, synced: str) -> None:
    node_cluster.apply(consumer.deployment(synced, "reader", secret="app-config"))
    pod = consumer.running_pod(node_cluster, synced, "reader")
    assert consumer.read_file(node_cluster, synced, pod, "DB_HOST") == "db-one.node.example"
    assert consumer.read_file(node_cluster, synced, pod, "DB_PASSWORD") == "node-pass-original-1"


def test_a_rotation_at_the_service_reaches_the_mounted_file(
    node_cluster: ControlPlane, node_service: DevServer, synced: str
) -> None:
    pod = consumer.running_pod(node_cluster, synced, "reader")
    node_service.set_secret(harness.PROJECT_ID, "dev", "/node", "DB_PASSWORD", "node-pass-rotated-2")
    harness.eventually(
        lambda: (
            (harness.secret_data(node_cluster, synced, "app-config") or {}).get("DB_PASSWORD")
            == "node-pass-rotated-2"
        ),
        timeout=30,
        what="the rotation to reach the Secret",
    )
    harness.eventually(
        lambda: consumer.read_file(node_cluster, synced, pod, "DB_PASSWORD") == "node-pass-rotated-2",
        timeout=60,
        what="the rotation to reach the file in the pod",
    )


def test_the_operator_pod_stays_up_for_a_minute_without_restarts(
    node_cluster: ControlPlane, operator: OperatorPod, synced: str
) -> None:
    (first,) = operator.pods()
    harness.eventually(
        lambda: _pod_age_seconds(operator.pods()[0]) >= 60,
        timeout=90,
        interval=1,
        what="the operator pod to be a minute old",
    )
    (pod,) = operator.pods()
    assert pod["metadata"]["uid"] == first["metadata"]["uid"]
    assert operator.is_ready(pod)
    assert operator.restarts(pod) == 0, operator.describe()
    assert harness.ready(node_cluster, synced, "app-config")["reason"] == "Synced"  # type: ignore[index]


def test_a_replacement_pod_resumes_without_rewriting_unchanged_secrets(
    node_cluster: ControlPlane, node_service: DevServer, operator: OperatorPod, synced: str
) -> None:
    before = json.loads(node_cluster.kubectl("get", "secret", "app-config", "-n", synced, "-o", "json"))
    (old,) = operator.pods()
    node_cluster.kubectl("delete", "pod", old["metadata"]["name"], "-n", operator.namespace)
    (new_name,) = operator.wait_ready(1, exclude=[old["metadata"]["name"]])

    harness.eventually(
        lambda: checked_again(operator), timeout=60, what="the replacement to check the SecretSync again"
    )
    after = json.loads(node_cluster.kubectl("get", "secret", "app-config", "-n", synced, "-o", "json"))
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    # ...and it is live: the next change still streams in.
    node_service.set_secret(harness.PROJECT_ID, "dev", "/node", "DB_HOST", "db-two.node.example")
    harness.eventually(
        lambda: (
            (harness.secret_data(node_cluster, synced, "app-config") or {}).get("DB_HOST")
            == "db-two.node.example"
        ),
        timeout=30,
        what=f"the replacement pod {new_name} to sync a change",
    )


def test_no_secret_value_in_the_pod_logs_events_or_status(
    node_cluster: ControlPlane, operator: OperatorPod, synced: str
) -> None:
    harness.assert_no_values_leaked(node_cluster, operator)

"""What README's upgrade and uninstall guide promises, on the local node with the chart and image.

``helm upgrade`` rolls the operator pod and the new one carries on: nothing it already wrote is
rewritten, changes keep streaming in. ``helm uninstall`` removes the operator and nothing else:
the CRDs (``crds.keep``), every SecretSync and every Secret it wrote stay, and pods keep reading
them; a later install takes over again without a write.
"""

from __future__ import annotations

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
PATH = "/lifecycle"
CRDS = ("secretsyncs", "machineidentities", "clustermachineidentities")


@pytest.fixture(scope="module")
def operator(
    node_cluster: ControlPlane, node_service: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorPod]:
    # A release and namespace of its own: the other node modules' releases are gone by now, but
    # nothing here should depend on that.
    with installed_operator(
        node_cluster,
        node_service,
        workdir=tmp_path_factory.mktemp("lifecycle-pod"),
        release="sf-lifecycle",
        namespace="secretferry-lifecycle",
        # the test uninstalls it itself; a failure before that must not leave it behind
        uninstall_if=lambda pod: bool(pod.pods()) or _release_installed(pod),
    ) as pod:
        yield pod


def _release_installed(pod: OperatorPod) -> bool:
    return pod.release in pod.helm("list", "--namespace", pod.namespace, "--short")


@pytest.fixture(scope="module")
def synced(node_cluster: ControlPlane, node_service: DevServer, operator: OperatorPod) -> Iterator[str]:
    with synced_namespace(
        node_cluster,
        node_service,
        prefix="life",
        path=PATH,
        values={"API_URL": "https://api-one.lifecycle.example", "API_KEY": "lifecycle-key-original-1"},
        sync="app-config",
        refresh=HOURS,
    ) as namespace:
        yield namespace


def _secret(cp: ControlPlane, namespace: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        cp.kubectl("get", "secret", "app-config", "-n", namespace, "-o", "json")
    )
    return found


def _streams_in(cp: ControlPlane, service: DevServer, namespace: str, value: str, what: str) -> None:
    service.set_secret(harness.PROJECT_ID, "dev", PATH, "API_URL", value)
    harness.eventually(
        lambda: (harness.secret_data(cp, namespace, "app-config") or {}).get("API_URL") == value,
        timeout=30,
        what=what,
    )


def test_a_helm_upgrade_rolls_the_pod_and_rewrites_nothing(
    node_cluster: ControlPlane, node_service: DevServer, operator: OperatorPod, synced: str
) -> None:
    before = _secret(node_cluster, synced)
    (old,) = operator.pods()
    # A setting change, as a user would make one: the pod template changes, so the pod rolls.
    operator.upgrade({"config": {"logLevel": "DEBUG"}})
    operator.wait_ready(1, exclude=[old["metadata"]["name"]])
    (new,) = operator.pods()
    env = {e["name"]: e.get("value") for e in new["spec"]["containers"][0]["env"]}
    assert env["SECRETFERRY_LOG_LEVEL"] == "DEBUG"
    harness.eventually(lambda: checked_again(operator), timeout=60, what="the upgraded pod to check again")
    assert (
        _secret(node_cluster, synced)["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    )
    _streams_in(
        node_cluster, node_service, synced, "https://api-two.lifecycle.example", "a change after upgrade"
    )


def test_helm_uninstall_keeps_crds_syncs_and_secrets_and_a_reinstall_takes_over(
    node_cluster: ControlPlane, node_service: DevServer, operator: OperatorPod, synced: str
) -> None:
    node_cluster.apply(consumer.deployment(synced, "reader", secret="app-config"))
    reader = consumer.running_pod(node_cluster, synced, "reader")
    before = _secret(node_cluster, synced)

    operator.uninstall()

    assert operator.pods() == []
    for crd in CRDS:
        node_cluster.kubectl("get", "crd", f"{crd}.secretferry.io")  # raises when it is gone
    kept = harness.get(node_cluster, "secretsync", "app-config", synced)
    assert kept is not None
    # No finalizer of ours anywhere: with the operator gone, deleting them must not hang (README).
    identities = json.loads(node_cluster.kubectl("get", "machineidentities", "-n", synced, "-o", "json"))
    assert identities["items"]
    for obj in [kept, *identities["items"]]:
        assert not obj["metadata"].get("finalizers"), obj["metadata"]
    after = _secret(node_cluster, synced)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["data"] == before["data"]
    expected = (harness.secret_data(node_cluster, synced, "app-config") or {})["API_KEY"]
    assert consumer.read_file(node_cluster, synced, reader, "API_KEY") == expected
    # No operator now, so a change at the service waits: the Secret is simply left as it was.

    operator.install()
    harness.eventually(lambda: checked_again(operator), timeout=60, what="the new install to check again")
    assert (
        _secret(node_cluster, synced)["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    )
    _streams_in(
        node_cluster, node_service, synced, "https://api-three.lifecycle.example", "a change after reinstall"
    )

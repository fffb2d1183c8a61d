"""A control plane with a real kubelet node, for the tests that run the operator as a pod.

Its own control plane (not the session's shared one): with a kubelet and a scheduler present, the
Deployments other tests create would start running, and the chart tests' releases would try to
pull images. Skipped, with the host's reason in one line, only where this host cannot run a node.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from node_helpers import operator_harness

from secretferry.devcluster import cluster, node
from secretferry.devserver.testing import DevServer, run_dev_server


@pytest.fixture(scope="session")
def node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ControlPlane]:
    reason = node.unavailable_reason()
    if reason:
        pytest.skip(f"no local node on this host: {reason}")
    cp = cluster.start(tmp_path_factory.mktemp("node-cluster"))
    state = None
    try:
        state = cp.start_node().state
        yield cp
    finally:
        cp.stop()
    # Leaving the host as it was found is part of the node's contract (a shared machine).
    left = node.leftovers(state) if state is not None else []
    assert not left, f"the node left {len(left)} thing(s) on the host: {left}"


@pytest.fixture(scope="session")
def node_service(
    node_cluster: cluster.ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevServer]:
    """The dev server on loopback; the operator pod (host network) reaches it there."""
    harness = operator_harness()
    reviewer = node_cluster.reviewer_token(expiration_seconds=3600)
    with run_dev_server(
        seed=harness.seed(node_cluster, reviewer_token=reviewer),
        data_dir=tmp_path_factory.mktemp("node-devserver"),
        extra_args=["--heartbeat-seconds", "1"],
    ) as server:
        harness.record_values(server)
        yield server

"""/readyz of real operator processes against the local control plane (secretferry/readiness.py).

Two replicas under leader election: the Lease holder answers ``serving`` once its caches are
complete, the other ``standby`` (ready: a warm candidate, README "Readiness and rolling upgrades");
when the holder stops it answers ``stopping``/goes, and the standby takes over and serves. A
readiness port that is taken stops the process with a clear message instead of a start-up retried
forever. (The rollout itself, ``helm upgrade --wait`` on a real kubelet: tests/integration/node/
test_node_readiness.py.)
"""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import harness
import pytest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

# Short Lease timings: the takeover below waits for nothing but the release.
LEADER_ENV = {
    "SECRETFERRY_LEADER_LEASE_DURATION_SECONDS": "6",
    "SECRETFERRY_LEADER_RENEW_DEADLINE_SECONDS": "4",
    "SECRETFERRY_LEADER_RETRY_PERIOD_SECONDS": "0.5",
}


def _replica(cp: ControlPlane, service: DevServer, log: Path, lease: str, name: str) -> OperatorProcess:
    return harness.start_operator(
        cp, service, log, SECRETFERRY_PEERING=lease, SECRETFERRY_POD_NAME=name, **LEADER_ENV
    )


def test_leader_serves_standby_is_ready_and_takes_over(
    control_plane: ControlPlane, crds: None, service: DevServer, tmp_path: Path
) -> None:
    lease = f"ready-{uuid.uuid4().hex[:6]}"
    first = _replica(control_plane, service, tmp_path / "first.log", lease, "first")
    second = None
    try:
        harness.eventually(lambda: first.readiness() == "200 serving", timeout=60, what="the leader to serve")
        second = _replica(control_plane, service, tmp_path / "second.log", lease, "second")
        harness.eventually(lambda: second.readiness() == "200 standby", timeout=60, what="a ready standby")
        time.sleep(2)  # stays a standby while the leader holds the Lease (several retry periods)
        assert second.readiness() == "200 standby"
        assert first.readiness() == "200 serving"

        first.stop()  # releases the Lease on shutdown (the default)
        assert first.readiness() == "down"
        seen: set[str] = set()

        def serving() -> bool:
            seen.add(second.readiness())
            return "200 serving" in seen

        harness.eventually(serving, timeout=30, what="the standby to take over and serve")
        assert seen <= {"200 standby", "503 listing", "200 serving"}, seen
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_a_taken_readiness_port_stops_the_process(
    control_plane: ControlPlane, crds: None, service: DevServer, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        op = OperatorProcess(
            kubeconfig=control_plane.kubeconfig,
            log_path=tmp_path / "operator.log",
            env={
                "SECRETFERRY_NAMESPACE": harness.OPERATOR_NAMESPACE,
                "SECRETFERRY_DEFAULT_HOST_API": service.base_url,
                "SECRETFERRY_READINESS_PORT": str(port),
            },
        )
        try:
            try:
                op.start(wait_seconds=30)
            except RuntimeError as exc:
                assert "exited" in str(exc), str(exc)
            harness.eventually(lambda: op.pid is None, timeout=30, what="the operator to exit")
            assert f"the readiness endpoint cannot listen on 0.0.0.0 port {port}" in op.log_text()
        finally:
            op.stop()

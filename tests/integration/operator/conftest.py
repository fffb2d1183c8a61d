"""Operator fixtures: CRDs installed, a dev server with a real TokenReview, the operator process."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer, run_dev_server

from . import harness

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def crds(control_plane: ControlPlane) -> None:
    for path in sorted((REPO / "crds").glob("*.yaml")):
        control_plane.kubectl("apply", "--server-side", "-f", str(path))
    control_plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    control_plane.kubectl("create", "namespace", harness.OPERATOR_NAMESPACE, check=False)


@pytest.fixture(scope="session")
def reviewer_token(control_plane: ControlPlane) -> str:
    return control_plane.reviewer_token(expiration_seconds=24 * 3600)


@pytest.fixture(scope="module")
def service(
    control_plane: ControlPlane, reviewer_token: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevServer]:
    with run_dev_server(
        seed=harness.seed(control_plane, reviewer_token=reviewer_token),
        data_dir=tmp_path_factory.mktemp("devserver"),
        extra_args=["--heartbeat-seconds", "1", "--recheck-seconds", "2"],
    ) as server:
        yield server


def start_operator(
    control_plane: ControlPlane, service: DevServer, log_path: Path, **env: str
) -> OperatorProcess:
    op = OperatorProcess(
        kubeconfig=control_plane.kubeconfig,
        log_path=log_path,
        env={
            "SECRETFERRY_NAMESPACE": harness.OPERATOR_NAMESPACE,
            "SECRETFERRY_DEFAULT_HOST_API": service.base_url,
            "SECRETFERRY_LOG_LEVEL": "DEBUG",
            "SECRETFERRY_BACKOFF_INITIAL_SECONDS": "0.5",
            "SECRETFERRY_BACKOFF_MAX_SECONDS": "3",
            "SECRETFERRY_STREAM_HEARTBEAT_SECONDS": "1",
            "SECRETFERRY_ROLLOUT_COOLDOWN_SECONDS": "5",
            **env,
        },
    )
    op.start()
    return op


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane, crds: None, service: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    op = start_operator(control_plane, service, tmp_path_factory.mktemp("operator") / "operator.log")
    try:
        yield op
    finally:
        op.stop()


def events_text(control_plane: ControlPlane, namespace: str) -> str:
    return subprocess.run(
        [
            str(control_plane.bin_dir / "kubectl"),
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "get",
            "events",
            "-n",
            namespace,
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout

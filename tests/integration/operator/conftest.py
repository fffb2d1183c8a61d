"""Operator fixtures: CRDs installed, a dev server with a real TokenReview, the operator process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import harness
import pytest
import tenant

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

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
    with harness.dev_server(
        control_plane,
        reviewer_token=reviewer_token,
        data_dir=tmp_path_factory.mktemp("devserver"),
        extra_args=["--heartbeat-seconds", "1", "--recheck-seconds", "2"],
    ) as server:
        yield server


@pytest.fixture(scope="module")
def no_events_service(
    control_plane: ControlPlane, reviewer_token: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevServer]:
    """A dev server whose plan has no event subscriptions (``--no-events-plan``): polling and
    webhooks are the only ways a change arrives (each module that asks gets its own)."""
    with harness.dev_server(
        control_plane,
        reviewer_token=reviewer_token,
        data_dir=tmp_path_factory.mktemp("devserver-noevents"),
        extra_args=["--no-events-plan"],
    ) as server:
        yield server


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane, crds: None, service: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    # Per-object metrics on: the opt-in gauge is then checked like every other metric (one series
    # per SecretSync is nothing at this size).
    op = harness.start_operator(
        control_plane,
        service,
        tmp_path_factory.mktemp("operator") / "operator.log",
        SECRETFERRY_PER_OBJECT_METRICS="true",
    )
    try:
        yield op
    finally:
        op.stop()
    harness.assert_no_values_leaked(control_plane, op)


def events_text(control_plane: ControlPlane, namespace: str) -> str:
    return control_plane.kubectl("get", "events", "-n", namespace, "-o", "json", check=False)


@pytest.fixture
def hostile(control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path) -> tenant.Tenant:
    """A tenant with exactly a namespace user's rights in ``namespace`` (see tenant.py)."""
    return tenant.make_tenant(control_plane, namespace, tmp_path)

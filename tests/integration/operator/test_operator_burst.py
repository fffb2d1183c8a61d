"""A streamed change that touches more SecretSyncs than there are workers: every Secret and every
status ends up current, and no condition flips on the way."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import harness
import pytest
from harness import PROJECT_ID, eventually, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration
COUNT = 12
WORKERS = 3  # far fewer workers than SecretSyncs on the scope: writes queue up behind each other
HMAC_ANNOTATION = "secretferry.io/data-hmac"


@pytest.fixture(scope="module")
def burst_operator(
    control_plane: ControlPlane, crds: None, service: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    log_path: Path = tmp_path_factory.mktemp("operator") / "operator.log"
    op = harness.start_operator(control_plane, service, log_path, SECRETFERRY_WORKERS=str(WORKERS))
    try:
        yield op
    finally:
        op.stop()
    harness.assert_no_values_leaked(control_plane, op)


def _list(cp: ControlPlane, kind: str, namespace: str) -> list[dict[str, Any]]:
    out = cp.kubectl("get", kind, "-n", namespace, "-o", "json")
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def _all_current(cp: ControlPlane, namespace: str, value_b64: str) -> bool:
    """Every Secret holds the value, and every status records exactly that Secret's data HMAC."""
    secrets = {s["metadata"]["name"]: s for s in _list(cp, "secrets", namespace) if s.get("data")}
    syncs = _list(cp, "secretsyncs", namespace)
    if len(syncs) != COUNT or len(secrets) != COUNT:
        return False
    for sync in syncs:
        secret = secrets.get(sync["metadata"]["name"])
        status = sync.get("status") or {}
        if secret is None or secret["data"].get("K") != value_b64:
            return False
        if status.get("dataHMAC") != secret["metadata"]["annotations"].get(HMAC_ANNOTATION):
            return False
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
        if (ready.get("status"), ready.get("reason")) != ("True", "Synced"):
            return False
    return True


def test_a_burst_writes_every_secret_and_then_every_status(
    control_plane: ControlPlane, burst_operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "burst-value-1")
    harness.kubernetes_identity(control_plane, namespace)
    for i in range(COUNT):
        name = f"app-{i}"
        harness.secret_sync(control_plane, namespace, name, sources=[source(path)], refreshInterval="3h")
    first = base64.b64encode(b"burst-value-1").decode()
    eventually(lambda: _all_current(control_plane, namespace, first), what="all synced", timeout=60)

    def streaming() -> bool:
        return all(
            (s.get("status") or {}).get("updateMode") == "Streaming"
            for s in _list(control_plane, "secretsyncs", namespace)
        )

    eventually(streaming, what="all Streaming")
    transitions = _ready_transitions(control_plane, namespace)
    service.set_secret(PROJECT_ID, "dev", path, "K", "burst-value-2")
    second = base64.b64encode(b"burst-value-2").decode()
    eventually(lambda: _all_current(control_plane, namespace, second), what="all Secrets and statuses")
    # No condition flipped on the way: Ready kept its transition time everywhere.
    assert _ready_transitions(control_plane, namespace) == transitions


def _ready_transitions(cp: ControlPlane, namespace: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for sync in _list(cp, "secretsyncs", namespace):
        for cond in (sync.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Ready":
                out[sync["metadata"]["name"]] = cond.get("lastTransitionTime", "")
    return out

"""A tenant's text cannot forge a line of the operator's text log, a status or an Event.

Replays the finding of issue 20: with ``SECRETFERRY_LOG_FORMAT=text``, a line break in a source
path the tenant wrote (the CRD only asks that a path start with ``/``) made the operator print a
whole log line of the tenant's choosing — here one that claims an ERROR about another namespace.
The operator of this module logs as text; the tenant has only its RBAC.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import harness
import pytest
import tenant
from harness import eventually, source
from test_operator_tenant_writes import sync_manifest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

MARKER = "FORGED-BY-TENANT"
FORGED = f"2026-01-01T00:00:00.000Z ERROR secretferry.reconcile.sync: {MARKER} [namespace=kube-system]"


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane, crds: None, service: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    op = harness.start_operator(
        control_plane,
        service,
        tmp_path_factory.mktemp("operator") / "operator.log",
        SECRETFERRY_LOG_FORMAT="text",
    )
    try:
        yield op
    finally:
        op.stop()


def test_a_line_break_in_a_path_forges_no_log_line_status_or_event(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    harness.kubernetes_identity(control_plane, namespace)
    path = f"/{namespace}/x\n{FORGED}\r\u2028\u202e"
    hostile.apply(sync_manifest(namespace, "forger", sources=[source(path)], target={"name": "forger"}))
    cond = eventually(
        lambda: (c := harness.ready(control_plane, namespace, "forger")) and c["status"] == "False" and c,
        what="the SecretSync with a line break in its path to be reported",
    )
    assert MARKER in cond["message"]  # the path is quoted ...
    assert "\n" not in cond["message"] and "\\n" + FORGED in cond["message"]  # ... escaped

    def logged() -> list[str]:
        return [line for line in operator.log_text().splitlines() if MARKER in line]

    lines = eventually(logged, what="the operator's log line about it")
    for line in lines:
        assert not line.startswith(FORGED[:24]), f"forged log line: {line!r}"
        assert "\\n" + FORGED in line and "\u2028" not in line and "\u202e" not in line
    assert not any(line.startswith(FORGED[:24]) for line in operator.log_text().splitlines())

    events = json.loads(control_plane.kubectl("get", "events.events.k8s.io", "-n", namespace, "-o", "json"))[
        "items"
    ]
    notes = [e.get("note", "") for e in events if MARKER in e.get("note", "")]
    assert notes, "no Event quoted the path"
    assert all("\n" not in note and "\\n" + FORGED in note for note in notes)

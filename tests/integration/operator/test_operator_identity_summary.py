"""An identity's status.streams and status.scopes on the real control plane, the operator and the
dev server: the stream shows Open and the scope its last list after a sync; a change at the
service moves lastListTime within the coalescing window; ``kubectl secretferry why`` prints both.

Tenant side (README "Identity status"): a namespace user reads their own MachineIdentity's
summary and sees only the paths their namespace's SecretSyncs name — not those of another
namespace's MachineIdentity of the same name — and still cannot read a ClusterMachineIdentity.

The operator here writes summaries every 2 s (SECRETFERRY_IDENTITY_SUMMARY_INTERVAL_SECONDS), not
every 30 s, so that the test waits seconds.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import harness
import pytest
import tenant
from harness import PROJECT_ID, eventually, source
from test_operator_kubectl_plugin import no_values, plugin

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

INTERVAL_SECONDS = 2


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane, crds: None, service: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    op = harness.start_operator(
        control_plane,
        service,
        tmp_path_factory.mktemp("operator") / "operator.log",
        SECRETFERRY_IDENTITY_SUMMARY_INTERVAL_SECONDS=str(INTERVAL_SECONDS),
    )
    try:
        yield op
    finally:
        op.stop()
    harness.assert_no_values_leaked(control_plane, op)


def _status(cp: ControlPlane, namespace: str, name: str = "ferry") -> dict[str, Any]:
    obj = harness.get(cp, "machineidentity", name, namespace) or {}
    return dict(obj.get("status") or {})


def _listed(status: dict[str, Any]) -> dict[str, Any] | None:
    """The status once its stream is Open and its one scope was listed, else None."""
    streams, scopes = status.get("streams") or [], status.get("scopes") or []
    if streams and streams[0]["state"] == "Open" and scopes and scopes[0].get("lastListTime"):
        return status
    return None


def test_stream_and_last_list_in_identity_status_and_why(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    cp = control_plane
    harness.kubernetes_identity(cp, namespace)
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "KEY", "summary-value-one")
    harness.secret_sync(cp, namespace, "s", sources=[source(path)], refreshInterval="1h")
    harness.wait_reason(cp, namespace, "s", "Synced")

    status = eventually(lambda: _listed(_status(cp, namespace)), timeout=30, what="stream Open, scope listed")
    (stream,) = status["streams"]
    assert stream["projectId"] == PROJECT_ID and stream["scopes"] == 1 and status["streamsOpen"] == 1
    (scope,) = status["scopes"]
    assert (scope["projectId"], scope["environment"], scope["path"], scope["secretSyncs"]) == (
        PROJECT_ID,
        "dev",
        path,
        1,
    )
    assert scope["lastListResult"] in {"Changed", "Unchanged", "NotModified"}
    assert status["scopeCount"] == 1 and status["scopesOmitted"] == 0
    assert "Ready" in {c["type"] for c in status["conditions"]}  # the login check's, kept
    columns = cp.kubectl("get", "machineidentities", "-n", namespace)
    assert columns.split()[:4] == ["NAME", "READY", "REASON", "STREAMS"]
    assert columns.splitlines()[1].split()[3] == "1"

    # A change at the service: its event makes the scope listed again, and the summary shows it
    # within the coalescing window (times are whole seconds: the change waits for the next one).
    first = scope["lastListTime"]
    time.sleep(1.1)
    changed_at = time.monotonic()
    service.set_secret(PROJECT_ID, "dev", path, "KEY", "summary-value-two")

    def moved() -> dict[str, Any] | None:
        now = _status(cp, namespace)
        scope = now["scopes"][0]
        return now if scope["lastListTime"] != first and scope["lastListResult"] == "Changed" else None

    after = eventually(moved, timeout=30, what="lastListTime moved, the list Changed")
    took = time.monotonic() - changed_at
    # The coalescing window, plus the event's way to a list and this poll's (a loaded machine).
    assert took < INTERVAL_SECONDS + 8, f"{took:.1f} s: more than the window and an event's path"
    assert after["streams"][0].get("lastEventTime")

    why = plugin(cp, cp.kubeconfig, "why", "s", "-n", namespace)
    assert why.returncode == 0, why.stderr
    lines = why.stdout.splitlines()
    at = next(
        i for i, line in enumerate(lines) if f"1. project {PROJECT_ID} environment dev path {path}" in line
    )
    assert "ago, Changed; 1 SecretSync(s) read this scope" in lines[at + 1]
    assert lines[at + 2].strip().startswith("stream:    Open for ")
    assert "Streams:      1 open of 1" in why.stdout
    no_values(
        why.stdout, why.stderr, cp.kubectl("get", "machineidentity", "ferry", "-n", namespace, "-o", "yaml")
    )


def test_a_tenant_sees_only_its_own_namespaces_paths(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    """The tenant's MachineIdentity ``ferry`` and another namespace's ``ferry`` each list only
    their own namespace's path; the tenant reads its own summary with its own RBAC (``why``
    included), and no ClusterMachineIdentity."""
    cp = control_plane
    other = f"t-{uuid.uuid4().hex[:10]}"
    cp.kubectl("create", "namespace", other)
    try:
        mine, theirs = f"/{namespace}-mine", f"/{other}-theirs"
        for ns, path in ((namespace, mine), (other, theirs)):
            harness.kubernetes_identity(cp, ns)
            service.set_secret(PROJECT_ID, "dev", path, "KEY", f"tenant-summary-{ns}")
        harness.secret_sync(cp, other, "victim", sources=[source(theirs)], refreshInterval="1h")
        hostile.apply(
            {
                "apiVersion": "secretferry.io/v1alpha1",
                "kind": "SecretSync",
                "metadata": {"name": "mine", "namespace": namespace},
                "spec": {
                    "identityRef": {"name": "ferry"},
                    "sources": [source(mine)],
                    "refreshInterval": "1h",
                },
            }
        )
        harness.wait_reason(cp, namespace, "mine", "Synced")
        harness.wait_reason(cp, other, "victim", "Synced")
        eventually(lambda: _listed(_status(cp, other)), timeout=30, what="the other namespace's summary")

        def tenant_view() -> dict[str, Any] | None:
            body = json.loads(
                hostile.kubectl("get", "machineidentity", "ferry", "-n", namespace, "-o", "json")
            )
            return _listed(dict(body.get("status") or {}))

        seen = eventually(tenant_view, timeout=30, what="the tenant's own summary")
        assert [s["path"] for s in seen["scopes"]] == [mine]
        assert theirs not in json.dumps(seen)
        assert [s["path"] for s in _status(cp, other)["scopes"]] == [theirs]
        assert not hostile.can("get", "clustermachineidentities")

        why = plugin(cp, hostile.kubeconfig, "why", "mine", "-n", namespace)
        assert "SecretSync(s) read this scope" in why.stdout, why.stdout + why.stderr
        assert theirs not in why.stdout
        no_values(why.stdout, why.stderr)
    finally:
        cp.kubectl("delete", "namespace", other, "--wait=false", check=False)

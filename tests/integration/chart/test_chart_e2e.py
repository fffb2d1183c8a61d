"""The chart's RBAC is enough and no more, proven by the operator itself.

A real ``helm install`` into the local control plane; then the operator process runs
AUTHENTICATED AS THE CHART'S ServiceAccount (a bearer token from TokenRequest, not the admin
certificate) with the environment the chart's Deployment sets, and performs an end-to-end sync:
Kubernetes auth through a real TokenReview, the Secret written, statuses Ready, a change streamed
in. No apiserver call of its own is refused (no 403 in its log). The same token is refused what
the chart does not grant (a Secret outside ``scope.namespaces``; pods; RBAC objects).

No kubelet runs, so the Deployment's pod never starts: the operator runs as a local process
instead, which is why the token and the env are taken from the installed objects.
"""

from __future__ import annotations

import json
import re
import ssl
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import Installed, operator_harness

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

harness = operator_harness()
PROJECT_ID: str = harness.PROJECT_ID
HOURS = "3h"  # refresh interval far beyond any test: only the stream can explain the change
# Env the Deployment sets that must not reach a local process: OperatorProcess picks free ports
# (the chart's fixed 8080/8081/8082 would collide between tests), and HOME/TMPDIR are the pod's /tmp.
_LOCAL_ONLY = {
    "SECRETFERRY_METRICS_PORT",
    "SECRETFERRY_LIVENESS_PORT",
    "SECRETFERRY_READINESS_PORT",  # each process its own (several run side by side here)
    "HOME",
    "TMPDIR",
}
# Test timing only; nothing here changes what the operator may do.
_FAST = {
    "SECRETFERRY_LOG_LEVEL": "DEBUG",
    "SECRETFERRY_BACKOFF_INITIAL_SECONDS": "0.5",
    "SECRETFERRY_BACKOFF_MAX_SECONDS": "3",
    "SECRETFERRY_STREAM_HEARTBEAT_SECONDS": "1",
}
_FORBIDDEN = re.compile(r"forbidden|\b403\b", re.IGNORECASE)


def _as_token(
    cp: ControlPlane, token: str, method: str, path: str, body: dict[str, Any] | None = None
) -> int:
    """One raw request with the bearer token (CA-verified TLS, no client certificate); the status."""
    ctx = ssl.create_default_context(cadata=cp.ca_pem)
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(cp.server + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, context=ctx, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _whoami(cp: ControlPlane, token: str) -> str:
    ctx = ssl.create_default_context(cadata=cp.ca_pem)
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    request = urllib.request.Request(
        cp.server + "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=ctx, timeout=10) as r:
        return str(json.loads(r.read())["status"]["userInfo"]["username"])


def _namespaces(cp: ControlPlane, count: int) -> list[str]:
    names = [f"t-{uuid.uuid4().hex[:10]}" for _ in range(count)]
    for ns in names:
        cp.kubectl("create", "namespace", ns)
    return names


def _start_as_chart_sa(cp: ControlPlane, release: Installed, tmp_path: Path) -> tuple[OperatorProcess, str]:
    token = cp.token_for(release.namespace, release.service_account, expiration_seconds=3600)
    assert _whoami(cp, token) == f"system:serviceaccount:{release.namespace}:{release.service_account}"
    kubeconfig = cp.token_kubeconfig(token, tmp_path / "chart-sa.kubeconfig")
    env = {k: v for k, v in release.deployment_env.items() if k not in _LOCAL_ONLY}
    op = OperatorProcess(kubeconfig=kubeconfig, log_path=tmp_path / "operator.log", env={**env, **_FAST})
    op.start()
    return op, token


def _sync_end_to_end(cp: ControlPlane, service: DevServer, app_ns: str) -> None:
    """Identity + SecretSync (as admin, like a user); everything after is the operator's work."""
    path = f"/{app_ns}"
    service.set_secret(PROJECT_ID, "dev", path, "DB_PASS", "chart-e2e-value-1")
    harness.kubernetes_identity(cp, app_ns)
    harness.secret_sync(cp, app_ns, "app", sources=[harness.source(path)], refreshInterval=HOURS)
    harness.eventually(
        lambda: harness.secret_data(cp, app_ns, "app") == {"DB_PASS": "chart-e2e-value-1"},
        what="the first sync under the chart's RBAC",
        timeout=60,
    )
    cond = harness.wait_reason(cp, app_ns, "app", "Synced")
    assert cond["status"] == "True"
    identity = harness.eventually(
        lambda: harness.ready(cp, app_ns, "ferry", kind="machineidentity"), what="MachineIdentity Ready"
    )
    assert identity["status"] == "True", identity
    harness.eventually(
        lambda: (
            ((harness.get(cp, "secretsync", "app", app_ns) or {}).get("status") or {}).get("updateMode")
            == "Streaming"
        ),
        what="updateMode Streaming",
    )
    service.set_secret(PROJECT_ID, "dev", path, "DB_PASS", "chart-e2e-value-2")
    started = time.monotonic()
    harness.eventually(
        lambda: harness.secret_data(cp, app_ns, "app") == {"DB_PASS": "chart-e2e-value-2"},
        what="the streamed change",
        timeout=15,
        interval=0.05,
    )
    assert time.monotonic() - started < 15  # against a 3 h refresh interval
    # A generator under the chart's RBAC: watched, its Secret created, its status patched.
    cp.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "PasswordGenerator",
            "metadata": {"name": "gen", "namespace": app_ns},
            "spec": {},
        }
    )
    harness.eventually(
        lambda: (
            (harness.ready(cp, app_ns, "gen", kind="passwordgenerator") or {}).get("reason") == "Generated"
        ),
        what="the generator's Secret under the chart's RBAC",
    )
    harness.VALUES.add((harness.secret_data(cp, app_ns, "gen") or {})["password"])


def _temporary_privilege_lifecycle(cp: ControlPlane) -> None:
    """What the operator does to a TemporaryPrivilege under the chart's RBAC: watch and list it,
    patch its finalizer on and off, patch its status (a granter that does not exist keeps the
    service out of it)."""
    name = f"chart-e2e-{uuid.uuid4().hex[:6]}"
    cp.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "TemporaryPrivilege",
            "metadata": {"name": name},
            "spec": {
                "granterRef": {"name": "no-such-granter"},
                "identityId": "0f000000-0000-4000-8000-0000000000ff",
                "projectSlug": "app",
                "permissions": [{"actions": ["read"], "subject": "secrets"}],
                "temporaryRange": "1h",
            },
        }
    )

    def refused() -> dict[str, Any] | None:
        obj = json.loads(cp.kubectl("get", "temporaryprivilege", name, "-o", "json"))
        reasons = {c["type"]: c["reason"] for c in (obj.get("status") or {}).get("conditions") or []}
        held = "secretferry.io/temporaryprivilege" in (obj["metadata"].get("finalizers") or [])
        return obj if held and reasons.get("Ready") == "GranterNotFound" else None

    harness.eventually(refused, what="the TemporaryPrivilege's finalizer and status", timeout=30)
    cp.kubectl("delete", "temporaryprivilege", name, "--wait=false")
    harness.eventually(
        lambda: cp.kubectl_run("get", "temporaryprivilege", name).returncode != 0 or None,
        what="the TemporaryPrivilege's finalizer removed",
        timeout=30,
    )


def _refused_lines(op: OperatorProcess) -> list[str]:
    """Refusals of the operator's own API calls. Expected, and not RBAC: writes into a namespace
    being deleted (NamespaceLifecycle admission), e.g. an earlier test's leftovers, seen by a
    cluster-wide operator in the shared session cluster."""
    return [
        line
        for line in op.log_text().splitlines()
        if _FORBIDDEN.search(line) and "because it is being terminated" not in line
    ]


def _secret(cp: ControlPlane, namespace: str, name: str) -> None:
    cp.kubectl("create", "secret", "generic", name, "-n", namespace, "--from-literal=k=not-yours-123456")


def test_namespaced_release_syncs_with_its_own_token_and_nothing_more(
    control_plane: ControlPlane,
    service: DevServer,
    install: Callable[..., Installed],
    namespace: str,
    tmp_path: Path,
) -> None:
    app_ns, outsider = _namespaces(control_plane, 2)
    op: OperatorProcess | None = None
    try:
        release = install(
            namespace, f"scope.namespaces={{{app_ns}}}", f"config.defaultHostAPI={service.base_url}"
        )
        assert release.deployment_env["SECRETFERRY_WATCH_NAMESPACES"] == app_ns
        assert release.deployment_env["SECRETFERRY_NAMESPACE"] == namespace
        op, token = _start_as_chart_sa(control_plane, release, tmp_path)
        _sync_end_to_end(control_plane, service, app_ns)
        _temporary_privilege_lifecycle(control_plane)
        # The HMAC key was created in the release namespace under the narrow hmac-key Role.
        assert harness.get(control_plane, "secret", "secretferry-hmac-key", namespace) is not None
        assert _refused_lines(op) == []

        # The token works (the managed Secret is readable), so every 403 below is authorization.
        _secret(control_plane, outsider, "not-managed")
        _secret(control_plane, namespace, "not-the-hmac-key")
        assert _as_token(control_plane, token, "GET", f"/api/v1/namespaces/{app_ns}/secrets/app") == 200
        denied = [
            ("GET", f"/api/v1/namespaces/{outsider}/secrets/not-managed"),
            ("GET", f"/api/v1/namespaces/{outsider}/secrets"),
            ("GET", "/api/v1/secrets"),
            ("GET", f"/api/v1/namespaces/{namespace}/secrets/not-the-hmac-key"),
            ("GET", f"/apis/secretferry.io/v1alpha1/namespaces/{outsider}/secretsyncs"),
            ("DELETE", f"/api/v1/namespaces/{outsider}/secrets/not-managed"),
        ]
        statuses = {f"{m} {p}": _as_token(control_plane, token, m, p) for m, p in denied}
        assert statuses == {k: 403 for k in statuses}
        assert harness.get(control_plane, "secret", "not-managed", outsider) is not None
    finally:
        if op is not None:
            op.stop()
        for ns in (app_ns, outsider):
            control_plane.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    if op is not None:
        harness.assert_no_values_leaked(control_plane, op)


def test_clusterwide_release_syncs_with_its_own_token_and_nothing_more(
    control_plane: ControlPlane,
    service: DevServer,
    install: Callable[..., Installed],
    namespace: str,
    tmp_path: Path,
) -> None:
    (app_ns,) = _namespaces(control_plane, 1)
    op: OperatorProcess | None = None
    try:
        release = install(namespace, f"config.defaultHostAPI={service.base_url}")
        assert release.deployment_env["SECRETFERRY_WATCH_NAMESPACES"] == ""
        op, token = _start_as_chart_sa(control_plane, release, tmp_path)
        _sync_end_to_end(control_plane, service, app_ns)
        assert harness.get(control_plane, "secret", "secretferry-hmac-key", namespace) is not None
        assert _refused_lines(op) == []

        assert _as_token(control_plane, token, "GET", f"/api/v1/namespaces/{app_ns}/secrets/app") == 200
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"escalate-{uuid.uuid4().hex[:8]}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": release.service_account, "namespace": namespace}],
        }
        denied = [
            ("GET", "/api/v1/pods", None),
            ("GET", f"/api/v1/namespaces/{app_ns}/pods", None),
            ("DELETE", f"/api/v1/namespaces/{app_ns}", None),
            ("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding),
        ]
        statuses = {f"{m} {p}": _as_token(control_plane, token, m, p, b) for m, p, b in denied}
        assert statuses == {k: 403 for k in statuses}
    finally:
        if op is not None:
            op.stop()
        control_plane.kubectl("delete", "namespace", app_ns, "--wait=false", check=False)
    if op is not None:
        harness.assert_no_values_leaked(control_plane, op)


def _lease(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    return (harness.get(cp, "lease", name, namespace) or {}).get("spec") or {}


def test_leader_election_release_elects_and_syncs_with_its_own_token(
    control_plane: ControlPlane,
    service: DevServer,
    install: Callable[..., Installed],
    namespace: str,
    tmp_path: Path,
) -> None:
    """HA: the Lease Role (create; get/update on the one Lease) is enough to lead and to stand by."""
    (app_ns,) = _namespaces(control_plane, 1)
    ops: list[OperatorProcess] = []
    try:
        release = install(
            namespace,
            f"scope.namespaces={{{app_ns}}}",
            "replicaCount=2",
            "leaderElection.enabled=true",
            f"config.defaultHostAPI={service.base_url}",
        )
        lease = release.deployment_env["SECRETFERRY_PEERING"]
        assert lease == release.service_account  # defaults to the release's full name
        for replica in ("replica-a", "replica-b"):
            release.deployment_env["SECRETFERRY_POD_NAME"] = replica  # the pod name: the Lease holder
            workdir = tmp_path / replica
            workdir.mkdir()
            op, token = _start_as_chart_sa(control_plane, release, workdir)
            ops.append(op)
            if replica == "replica-a":  # the first one leads (creates the Lease) and syncs
                harness.eventually(
                    lambda: _lease(control_plane, namespace, lease).get("holderIdentity") == "replica-a",
                    what="replica-a to hold the Lease",
                )
                _sync_end_to_end(control_plane, service, app_ns)
        # The leader renews (GET + PUT on its Lease); the other reads it and stands by.
        first = _lease(control_plane, namespace, lease)["renewTime"]
        harness.eventually(
            lambda: _lease(control_plane, namespace, lease)["renewTime"] != first,
            what="a Lease renewal",
            timeout=20,
        )
        assert _lease(control_plane, namespace, lease)["holderIdentity"] == "replica-a"
        harness.eventually(
            lambda: "waiting for leadership" in ops[1].log_text(), what="replica-b standing by"
        )
        assert "became the leader" not in ops[1].log_text()
        for op in ops:
            assert _refused_lines(op) == []
        # Only that one Lease: no other Lease may be read or rewritten with the chart's token.
        leases = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        assert _as_token(control_plane, token, "GET", f"{leases}/{lease}") == 200
        assert _as_token(control_plane, token, "GET", f"{leases}/someone-elses") == 403
        assert _as_token(control_plane, token, "GET", leases) == 403
        assert _as_token(control_plane, token, "DELETE", f"{leases}/{lease}") == 403
    finally:
        for op in ops:
            op.stop()
        control_plane.kubectl("delete", "namespace", app_ns, "--wait=false", check=False)
    for op in ops:
        harness.assert_no_values_leaked(control_plane, op)

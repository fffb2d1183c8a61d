"""kstatus and Argo CD read our live objects as they should, through a SecretSync's life.

kstatus (sigs.k8s.io/cli-utils/pkg/kstatus/status) is what Flux's `wait: true` and healthChecks,
and cli-utils' applier, decide readiness with; hack/kstatus runs the real library on the object as
the apiserver returns it. The Argo CD health check (docs/argocd/) runs beside it in Argo CD's Lua
interpreter (hack/luacheck), and `kubectl wait --for=condition=Ready` (README, "GitOps") at the
moments it must return or time out.

Phases, each on the live object: new (before any operator has looked: InProgress), synced
(Current), failed (a project that does not exist: Failed through Stalled=True; a missing identity:
InProgress, it may still come), fixed (Current), spec changed while the operator is stopped
(InProgress until it observes the new generation). The test starts and stops its own operator.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import harness
import pytest
from harness import PROJECT_ID, eventually

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
UNKNOWN_PROJECT = "0f000000-0000-4000-8000-00000000dead"


def _tool(name: str) -> Path:
    if shutil.which("go") is None:
        pytest.skip(f"Go is not installed: hack/{name} cannot be built")
    proc = subprocess.run(
        ["bash", str(REPO / "hack" / "build-go-tool.sh"), f"hack/{name}"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip())


@pytest.fixture(scope="module")
def kstatus() -> Path:
    return _tool("kstatus")


@pytest.fixture(scope="module")
def luacheck() -> Path:
    return _tool("luacheck")


@pytest.fixture
def stopped_operator(
    control_plane: ControlPlane, crds: None, service: DevServer, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """An operator not started yet: the test decides when it looks."""
    proc = OperatorProcess(
        kubeconfig=control_plane.kubeconfig,
        log_path=tmp_path / "operator.log",
        env={
            "SECRETFERRY_NAMESPACE": harness.OPERATOR_NAMESPACE,
            "SECRETFERRY_DEFAULT_HOST_API": service.base_url,
            "SECRETFERRY_LOG_LEVEL": "DEBUG",
            "SECRETFERRY_BACKOFF_INITIAL_SECONDS": "0.5",
            "SECRETFERRY_BACKOFF_MAX_SECONDS": "3",
        },
    )
    try:
        yield proc
    finally:
        proc.stop()
    harness.assert_no_values_leaked(control_plane, proc)


def live(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    obj = harness.get(cp, "secretsync", name, namespace)
    assert obj is not None
    return obj


def kstatus_of(tool: Path, obj: dict[str, Any]) -> dict[str, str]:
    proc = subprocess.run(
        [str(tool)], input=json.dumps(obj), capture_output=True, text=True, timeout=30, check=True
    )
    result: dict[str, str] = json.loads(proc.stdout)
    return result


def argo_health_of(tool: Path, obj: dict[str, Any]) -> dict[str, str]:
    script = REPO / "docs" / "argocd" / "secretferry.io" / obj["kind"] / "health.lua"
    proc = subprocess.run(
        [str(tool), "health", str(script)],
        input=json.dumps(obj) + "\n",
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    result: dict[str, str] = json.loads(proc.stdout)
    assert "error" not in result, result
    return result


def kubectl_wait(cp: ControlPlane, namespace: str, name: str, timeout: str) -> bool:
    proc = cp.kubectl_run(
        "wait", "--for=condition=Ready", f"secretsync/{name}", "-n", namespace, f"--timeout={timeout}"
    )
    return proc.returncode == 0


def sync_body(
    namespace: str, name: str, *, project: str, identity: str = "ferry", path: str = "/kstatus"
) -> dict[str, Any]:
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "identityRef": {"kind": "MachineIdentity", "name": identity},
            "sources": [{"projectId": project, "environment": "dev", "path": path}],
        },
    }


def test_kstatus_and_argo_cd_through_a_secretsyncs_life(
    control_plane: ControlPlane,
    namespace: str,
    service: DevServer,
    stopped_operator: OperatorProcess,
    kstatus: Path,
    luacheck: Path,
) -> None:
    cp = control_plane
    service.set_secret(PROJECT_ID, "dev", "/kstatus", "DB_USER", "u-kstatus-1")
    service.set_secret(PROJECT_ID, "dev", "/kstatus-2", "DB_USER", "u-kstatus-2")
    harness.kubernetes_identity(cp, namespace, "ferry")
    cp.apply(sync_body(namespace, "app", project=PROJECT_ID))
    cp.apply(sync_body(namespace, "waits", project=PROJECT_ID, identity="later"))

    # New: no operator has looked. The CRD's status default makes kstatus see an unobserved
    # generation (without it kstatus calls an object with no status Current at once).
    new = live(cp, namespace, "app")
    assert new["status"] == {"observedGeneration": 0} and new["metadata"]["generation"] == 1
    assert kstatus_of(kstatus, new)["status"] == "InProgress"
    assert argo_health_of(luacheck, new)["status"] == "Progressing"
    assert not kubectl_wait(cp, namespace, "app", "1s")

    # Synced.
    stopped_operator.start()
    assert kubectl_wait(cp, namespace, "app", "60s")
    synced = live(cp, namespace, "app")
    assert kstatus_of(kstatus, synced) == {"status": "Current", "message": "Resource is Ready"}
    assert argo_health_of(luacheck, synced)["status"] == "Healthy"
    identity = harness.get(cp, "machineidentity", "ferry", namespace)
    assert identity is not None and kstatus_of(kstatus, identity)["status"] == "Current"
    assert argo_health_of(luacheck, identity)["status"] == "Healthy"

    # A reference that may still come: InProgress (Flux keeps waiting), Progressing in Argo CD.
    harness.wait_reason(cp, namespace, "waits", "IdentityNotFound")
    waits = live(cp, namespace, "waits")
    assert kstatus_of(kstatus, waits)["status"] == "InProgress"
    assert argo_health_of(luacheck, waits)["status"] == "Progressing"

    # Failed: a project that does not exist. Stalled=True: kstatus Failed, Flux stops waiting.
    cp.apply(sync_body(namespace, "app", project=UNKNOWN_PROJECT))
    harness.wait_reason(cp, namespace, "app", "SourceNotFound")
    failed = live(cp, namespace, "app")
    assert failed["status"]["observedGeneration"] == failed["metadata"]["generation"] == 2
    got = kstatus_of(kstatus, failed)
    assert got == {"status": "Failed", "message": harness.ready(cp, namespace, "app")["message"]}
    assert argo_health_of(luacheck, failed)["status"] == "Degraded"
    assert not kubectl_wait(cp, namespace, "app", "1s")

    # Fixed.
    cp.apply(sync_body(namespace, "app", project=PROJECT_ID))
    harness.wait_reason(cp, namespace, "app", "Synced")
    fixed = live(cp, namespace, "app")
    assert "Stalled" not in {c["type"] for c in fixed["status"]["conditions"]}
    assert kstatus_of(kstatus, fixed)["status"] == "Current"
    assert argo_health_of(luacheck, fixed)["status"] == "Healthy"

    # Spec changed while no operator runs: Ready is still True, but for the old generation.
    stopped_operator.stop()
    cp.apply(sync_body(namespace, "app", project=PROJECT_ID, path="/kstatus-2"))
    changed = live(cp, namespace, "app")
    assert changed["metadata"]["generation"] == changed["status"]["observedGeneration"] + 1
    got = kstatus_of(kstatus, changed)
    assert got["status"] == "InProgress" and "latest observed generation" in got["message"], got
    assert argo_health_of(luacheck, changed)["status"] == "Progressing"
    assert not kubectl_wait(cp, namespace, "app", "1s")  # the condition's observedGeneration is old

    stopped_operator.start()
    assert kubectl_wait(cp, namespace, "app", "60s")
    eventually(
        lambda: kstatus_of(kstatus, live(cp, namespace, "app"))["status"] == "Current" or None,
        timeout=30,
        what="kstatus Current after the new generation",
    )
    assert harness.secret_data(cp, namespace, "app") == {"DB_USER": "u-kstatus-2"}

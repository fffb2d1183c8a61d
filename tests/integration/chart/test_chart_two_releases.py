"""Two releases of the chart on one control plane, split by namespace label (scope.namespaceSelector).

Both releases are real ``helm install``s (the CRDs with the first one only), each in its own
release namespace; each operator runs as a local process AUTHENTICATED AS ITS RELEASE'S
ServiceAccount with the environment its Deployment sets (as test_chart_e2e.py does: no kubelet
runs here). Their selectors are disjoint (``secretferry.test/release=a-…`` and ``=b-…``, unique
per run, so no other test's namespace matches).

Proven: each release syncs only the namespaces of its label; an unlabelled namespace and the other
release's namespaces get nothing from it (no Secret, no status, no Event, no finalizer, no list
at the service, and — in managedFields — no field written before the other release started),
not even through the ClusterMachineIdentity both share; a
namespace that gains a label is picked up within seconds; one relabelled from A to B is let go by
A and served by B, and its Secret is never deleted or emptied on the way.
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import Installed, operator_harness
from test_chart_e2e import _FAST, _LOCAL_ONLY, _refused_lines, _whoami

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

harness = operator_harness()
PROJECT_ID: str = harness.PROJECT_ID
HOURS = "3h"  # refresh interval far beyond the test: only a stream (or a pickup) explains a write
LABEL = "secretferry.test/release"
# How long a release that does not serve a namespace is given to (wrongly) do something there:
# a served one is synced within about a second here, streamed changes within a second.
QUIET_SECONDS = 4.0


def _start(cp: ControlPlane, release: Installed, pod: str, workdir: Path) -> OperatorProcess:
    token = cp.token_for(release.namespace, release.service_account, expiration_seconds=3600)
    assert _whoami(cp, token) == f"system:serviceaccount:{release.namespace}:{release.service_account}"
    workdir.mkdir(exist_ok=True)
    kubeconfig = cp.token_kubeconfig(token, workdir / "sa.kubeconfig")
    env = {k: v for k, v in release.deployment_env.items() if k not in _LOCAL_ONLY}
    env["SECRETFERRY_POD_NAME"] = pod  # reportingInstance of its Events: which release wrote them
    op = OperatorProcess(kubeconfig=kubeconfig, log_path=workdir / f"{pod}.log", env={**env, **_FAST})
    op.start()
    return op


def _app(cp: ControlPlane, service: DevServer, namespace: str, value: str, *, cluster_identity: str) -> None:
    """What a namespace user creates: an identity and a SecretSync of the path ``/<namespace>``,
    one naming an identity that does not exist (its first failure is an Event: whose?), and one
    through the ClusterMachineIdentity both releases share."""
    service.set_secret(PROJECT_ID, "dev", f"/{namespace}", "DB_PASS", value)
    harness.kubernetes_identity(cp, namespace)
    source = [harness.source(f"/{namespace}")]
    harness.secret_sync(cp, namespace, "app", sources=source, refreshInterval=HOURS)
    harness.secret_sync(cp, namespace, "broken", sources=source, identity="nobody", refreshInterval=HOURS)
    harness.secret_sync(
        cp,
        namespace,
        "shared",
        sources=source,
        identity=cluster_identity,
        identity_kind="ClusterMachineIdentity",
        refreshInterval=HOURS,
    )


def _cluster_identity(cp: ControlPlane, name: str, sa_namespace: str) -> None:
    """A ClusterMachineIdentity for every namespace (the admin's), logging in as a ServiceAccount."""
    cp.kubectl("create", "serviceaccount", "cluster-sa", "-n", sa_namespace)
    cp.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "ClusterMachineIdentity",
            "metadata": {"name": name},
            "spec": {
                "auth": {
                    "kubernetes": {
                        "identityId": harness.IDENTITY_ID,
                        "audiences": [harness.AUDIENCE],
                        "serviceAccountRef": {"name": "cluster-sa", "namespace": sa_namespace},
                    }
                }
            },
        }
    )


def _synced(cp: ControlPlane, namespace: str, value: str, *, timeout: float = 30) -> float:
    """Seconds until the Secret holds ``value``."""
    started = time.monotonic()
    harness.eventually(
        lambda: harness.secret_data(cp, namespace, "app") == {"DB_PASS": value},
        what=f"{namespace}/app to hold its value",
        timeout=timeout,
        interval=0.05,
    )
    return time.monotonic() - started


def _get(cp: ControlPlane, kind: str, name: str, namespace: str) -> dict[str, Any]:
    """The object with its managedFields (kubectl hides them unless asked)."""
    out = cp.kubectl("get", kind, name, "-n", namespace, "-o", "json", "--show-managed-fields")
    found: dict[str, Any] = json.loads(out)
    return found


def _get_cluster(cp: ControlPlane, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(cp.kubectl("get", "clustermachineidentity", name, "-o", "json"))
    return found


def _events(cp: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    out = cp.kubectl("get", "events.events.k8s.io", "-n", namespace, "-o", "json")
    return [e for e in json.loads(out)["items"] if e.get("reportingController", "").startswith("secretferry")]


def _untouched(cp: ControlPlane, service: DevServer, namespace: str) -> None:
    """Nothing of ours happened in ``namespace``: no Secret, no status, no Event, no finalizer, no
    list of its path at the service."""
    assert harness.get(cp, "secret", "app", namespace) is None
    assert harness.get(cp, "secret", "shared", namespace) is None
    syncs = (("secretsync", "app"), ("secretsync", "broken"), ("secretsync", "shared"))
    for kind, name in (*syncs, ("machineidentity", "ferry")):
        obj = _get(cp, kind, name, namespace)
        # Only the CRD's status default (kstatus reads observedGeneration 0 as "not yet seen").
        status = obj.get("status")
        assert status == {"observedGeneration": 0}, f"{kind} {namespace}/{name}: {status}"
        assert not obj["metadata"].get("finalizers"), obj["metadata"]
        managers = {m["manager"] for m in obj["metadata"].get("managedFields") or []}
        assert managers == {"kubectl-client-side-apply"}, managers  # only its author's apply
    assert _events(cp, namespace) == []
    assert f"dev:/{namespace}" not in service.stats()["listSecretsByScope"]


def _written_since(obj: dict[str, Any], since: datetime) -> bool:
    """Every managedFields entry but the author's was written at or after ``since`` (1 s slack)."""
    for entry in obj["metadata"].get("managedFields") or []:
        if entry["manager"] == "kubectl-client-side-apply":
            continue
        written = datetime.strptime(entry["time"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        if written.timestamp() < since.timestamp() - 1:
            return False
    return True


def _versions(cp: ControlPlane, namespace: str) -> dict[str, str]:
    found = {}
    for kind, name in (
        ("secret", "app"),
        ("secret", "shared"),
        ("secretsync", "app"),
        ("secretsync", "shared"),
        ("machineidentity", "ferry"),
    ):
        obj = harness.get(cp, kind, name, namespace)
        assert obj is not None
        found[f"{kind}/{name}"] = obj["metadata"]["resourceVersion"]
    return found


class SecretWatch:
    """``kubectl get --watch`` of one Secret: every version it went through, in order."""

    def __init__(self, cp: ControlPlane, namespace: str, name: str) -> None:
        argv = [str(cp.bin_dir / "kubectl"), "--kubeconfig", str(cp.kubeconfig), "get", "secret", name]
        argv += ["-n", namespace, "--watch", "--output-watch-events", "-o", "json"]
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.events: list[tuple[str, dict[str, str], str]] = []  # type, data keys → values, uid
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        decoder, buffer = json.JSONDecoder(), ""
        for line in self._proc.stdout:
            buffer += line
            try:
                event, end = decoder.raw_decode(buffer.strip())
            except ValueError:
                continue
            buffer = buffer.strip()[end:]
            obj = event["object"]
            data = {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}
            self.events.append((event["type"], data, obj["metadata"]["uid"]))

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
        self._reader.join(timeout=5)


@pytest.fixture
def app_namespaces(control_plane: ControlPlane) -> Iterator[Callable[..., str]]:
    made: list[str] = []

    def make(**labels: str) -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        control_plane.kubectl("create", "namespace", name)
        if labels:
            control_plane.kubectl("label", "namespace", name, *[f"{k}={v}" for k, v in labels.items()])
        made.append(name)
        return name

    yield make
    for name in made:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_two_releases_split_the_cluster_by_namespace_label_and_never_touch_each_others_objects(
    control_plane: ControlPlane,
    service: DevServer,
    install: Callable[..., Installed],
    app_namespaces: Callable[..., str],
    namespace: str,
    tmp_path: Path,
) -> None:
    cp = control_plane
    run = uuid.uuid4().hex[:8]
    label_a, label_b = f"a-{run}", f"b-{run}"
    (release_ns_b,) = [app_namespaces()]  # the second release's own namespace
    a1 = app_namespaces(**{LABEL: label_a})
    moved = app_namespaces(**{LABEL: label_a})  # relabelled from A to B below
    b1 = app_namespaces(**{LABEL: label_b})
    unlabelled = app_namespaces()  # nobody's, until it is labelled for A below

    ops: list[OperatorProcess] = []
    watch: SecretWatch | None = None
    try:
        host = f"config.defaultHostAPI={service.base_url}"
        release_a = install(namespace, f"scope.namespaceSelector={LABEL}={label_a}", host)
        release_b = install(
            release_ns_b, f"scope.namespaceSelector={LABEL}={label_b}", host, "crds.enabled=false"
        )
        assert release_a.deployment_env["SECRETFERRY_WATCH_NAMESPACE_SELECTOR"] == f"{LABEL}={label_a}"
        assert release_b.deployment_env["SECRETFERRY_WATCH_NAMESPACE_SELECTOR"] == f"{LABEL}={label_b}"
        values = {ns: f"two-releases-{ns}-v1" for ns in (a1, moved, b1, unlabelled)}
        shared = f"shared-{run}"
        _cluster_identity(cp, shared, namespace)
        for ns, value in values.items():
            _app(cp, service, ns, value, cluster_identity=shared)
        # Nothing per release collides: the Lease names (were election on), HMAC keys, RBAC names.
        assert release_a.service_account != release_b.service_account

        # --- A alone: its two namespaces, nothing else -----------------------------------------
        op_a = _start(cp, release_a, "release-a-pod", tmp_path / "a")
        ops.append(op_a)
        _synced(cp, a1, values[a1])
        _synced(cp, moved, values[moved])
        for ns in (a1, moved):
            harness.eventually(
                lambda ns=ns: (
                    (harness.ready(cp, ns, "ferry", kind="machineidentity") or {}).get("status") == "True"
                ),
                what=f"{ns} identity Ready",
            )
            harness.eventually(  # the shared identity, used by A for its namespaces only
                lambda ns=ns: harness.secret_data(cp, ns, "shared") == {"DB_PASS": values[ns]},
                what=f"{ns}/shared through the ClusterMachineIdentity",
            )
            for name in ("app", "shared"):
                harness.eventually(
                    lambda ns=ns, name=name: (
                        ((harness.get(cp, "secretsync", name, ns) or {}).get("status") or {}).get(
                            "updateMode"
                        )
                        == "Streaming"
                    ),
                    what=f"{ns}/{name} streaming",
                )
        time.sleep(QUIET_SECONDS)
        assert f"dev:/{a1}" in service.stats()["listSecretsByScope"]  # the key _untouched looks for
        _untouched(cp, service, b1)
        _untouched(cp, service, unlabelled)
        harness.wait_reason(cp, a1, "broken", "IdentityNotFound")
        assert {e["reportingInstance"] for ns in (a1, moved) for e in _events(cp, ns)} == {"release-a-pod"}

        # --- B joins: its namespace only; A's objects stay exactly as they were ------------------
        before_a = {ns: _versions(cp, ns) for ns in (a1, moved)}
        b_started = datetime.now(UTC)
        op_b = _start(cp, release_b, "release-b-pod", tmp_path / "b")
        ops.append(op_b)
        _synced(cp, b1, values[b1])
        harness.eventually(
            lambda: (harness.ready(cp, b1, "ferry", kind="machineidentity") or {}).get("status") == "True",
            what="b1 identity Ready",
        )
        harness.wait_reason(cp, b1, "broken", "IdentityNotFound")
        harness.eventually(
            lambda: harness.secret_data(cp, b1, "shared") == {"DB_PASS": values[b1]},
            what="b1/shared through the same ClusterMachineIdentity, by B",
        )
        shared_status = _get_cluster(cp, shared).get("status") or {}
        assert [c["status"] for c in shared_status.get("conditions", []) if c["type"] == "Ready"] == ["True"]
        time.sleep(QUIET_SECONDS)
        assert {ns: _versions(cp, ns) for ns in (a1, moved)} == before_a  # B wrote nothing there
        assert {e["reportingInstance"] for e in _events(cp, b1)} == {"release-b-pod"}
        for kind, name in (
            ("secret", "app"),
            ("secret", "shared"),
            ("secretsync", "app"),
            ("secretsync", "broken"),
            ("secretsync", "shared"),
            ("machineidentity", "ferry"),
        ):
            obj = _get(cp, kind, name, b1)
            assert _written_since(obj, b_started), f"A wrote {kind} {b1}/{name}"
            assert not obj["metadata"].get("finalizers")
        _untouched(cp, service, unlabelled)

        # --- a namespace labelled for A is picked up within seconds ------------------------------
        cp.kubectl("label", "namespace", unlabelled, f"{LABEL}={label_a}")
        # No timing threshold (tests stay free of them): the figure is printed; the generous
        # timeout only bounds a hang. A namespace is picked up from the namespace watch, not a resync
        # (the refresh interval is hours), so any pickup at all proves the label was followed.
        pickup_seconds = _synced(cp, unlabelled, values[unlabelled], timeout=60)
        print(f"\nlabelled namespace picked up in {pickup_seconds * 1000:.0f} ms")
        harness.wait_reason(cp, unlabelled, "broken", "IdentityNotFound")
        assert {e["reportingInstance"] for e in _events(cp, unlabelled)} == {"release-a-pod"}

        # --- relabelled from A to B: A lets go, B serves; the Secret is never deleted or emptied ---
        uid = (harness.get(cp, "secret", "app", moved) or {})["metadata"]["uid"]
        watch = SecretWatch(cp, moved, "app")
        harness.eventually(lambda: watch is not None and len(watch.events) >= 1, what="the Secret watch")
        relabelled = time.monotonic()
        cp.kubectl("label", "namespace", moved, f"{LABEL}={label_b}", "--overwrite")
        harness.eventually(
            lambda: f"namespace {moved} let go" in op_a.log_text(), what="A letting go", timeout=60
        )
        harness.eventually(
            lambda: f"namespace {moved} matches the namespace selector" in op_b.log_text(),
            what="B taking over",
            timeout=60,
        )
        handover_seconds = time.monotonic() - relabelled
        print(f"relabelled namespace let go by A and taken in by B in {handover_seconds * 1000:.0f} ms")
        service.set_secret(PROJECT_ID, "dev", f"/{moved}", "DB_PASS", f"two-releases-{moved}-v2")
        _synced(cp, moved, f"two-releases-{moved}-v2", timeout=60)

        # A no longer serves it: with B stopped, a change at the service reaches nobody ...
        op_b.stop()
        service.set_secret(PROJECT_ID, "dev", f"/{moved}", "DB_PASS", f"two-releases-{moved}-v3")
        time.sleep(QUIET_SECONDS)
        assert harness.secret_data(cp, moved, "app") == {"DB_PASS": f"two-releases-{moved}-v2"}
        # ... while A still serves its own namespace (the stream is live).
        service.set_secret(PROJECT_ID, "dev", f"/{a1}", "DB_PASS", f"two-releases-{a1}-v2")
        _synced(cp, a1, f"two-releases-{a1}-v2", timeout=60)
        # B back: it serves the moved namespace from the start.
        op_b.start()
        _synced(cp, moved, f"two-releases-{moved}-v3", timeout=30)
        watch.stop()
        assert watch.events, "the watch saw nothing"
        assert all(kind in ("ADDED", "MODIFIED") for kind, _, _ in watch.events), watch.events
        assert all(data.get("DB_PASS", "").startswith("two-releases-") for _, data, _ in watch.events)
        assert {u for _, _, u in watch.events} == {uid}  # never deleted and recreated
        assert (harness.get(cp, "secret", "app", moved) or {})["metadata"]["uid"] == uid

        for op in ops:
            assert _refused_lines(op) == []
            assert "Traceback" not in op.log_text()
    finally:
        if watch is not None:
            watch.stop()
        for op in ops:
            op.stop()
    for op in ops:
        harness.assert_no_values_leaked(cp, op)

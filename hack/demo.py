"""`make demo`: the whole product on a local cluster with a real node, start to finish.

1. start a real control plane (etcd, kube-apiserver, kube-controller-manager) and join a kubelet
   node (containerd, runc, kube-scheduler) with the images built from our Dockerfile;
2. start the dev server (the reference secrets service) seeded with examples/demo-seed.yaml, its
   Kubernetes-auth identity pointed at that control plane (a real TokenReview);
3. `helm install` the chart with the locally built image: the operator runs as a pod;
4. apply examples/*.yaml, wait for every SecretSync, print the Secrets and `kubectl get`;
5. a consumer Deployment mounts demo/shop-config and prints what it reads from the file;
6. change secrets at the service and time their arrival in the Secret and in the pod's file;
7. check that no secret value reached the operator log, Events or custom resources; tear down
   (or, with --keep / `make demo KEEP=1`, leave it all running and say how to look around).

Where the host cannot run a node (not root, no overlayfs, no cgroups) the demo says so in one
line and runs the operator as a local process under the chart's ServiceAccount token instead.
`make demo-down` (``--down``) stops whatever a run left, from the state in .demo/.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import signal
import sys
import threading
import time
import urllib.error
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from secretferry.devcluster import cluster, consumer, node
from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_pod import OperatorPod
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer, free_port

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
CHART = REPO / "charts" / "secretferry"
DEMO_DIR = REPO / ".demo"
STATE = DEMO_DIR / "state.json"

RELEASE = "secretferry"
OPERATOR_NAMESPACE = "secretferry-system"
OPERATOR_SA = "secretferry"  # the chart's fullname for release "secretferry"
PROJECT_ID = "5ec7f000-0000-4000-8000-0000000000a1"  # project "shop" in examples/demo-seed.yaml
K8S_IDENTITY_ID = "5ec7f000-0000-4000-8000-0000000000b1"

# Applied in this order; the namespaces first, identities before the SecretSyncs that use them.
EXAMPLE_FILES = (
    "namespaces.yaml",
    "machineidentity.yaml",
    "secretsync.yaml",
    "secretsync-template-tls.yaml",
    "clustermachineidentity.yaml",
    "universal-auth.yaml",
    "pushsecret.yaml",
)
# (namespace, name) -> the Ready reason the demo expects.
EXPECTED = {
    ("demo", "shop-config"): "Synced",
    ("demo", "web-tls"): "Synced",
    ("demo", "shop-frontend-prod"): "Synced",
    ("team-a", "payments"): "Synced",
    ("team-b", "payments"): "Synced",
    ("sandbox", "payments"): "IdentityNotAllowed",
    ("demo", "shared-from-team-a"): "Synced",
}

T0 = time.monotonic()


def step(text: str) -> None:
    print(f"\n==> [{time.monotonic() - T0:5.1f}s] {text}", flush=True)


def info(text: str = "") -> None:
    print(f"    {text}" if text else "", flush=True)


def block(text: str) -> None:
    for line in text.rstrip("\n").splitlines():
        print(f"    {line}")
    sys.stdout.flush()


# --- state: what an interrupted run leaves, for `make demo-down` ------------------------------
def save_state(**pids: int) -> None:
    state = load_state()
    state.update(pids)
    STATE.write_text(json.dumps(state))


def load_state() -> dict[str, int]:
    try:
        data: dict[str, int] = json.loads(STATE.read_text())
        return data
    except (FileNotFoundError, ValueError):
        return {}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _stop_pid(pid: int, marker: str) -> bool:
    """SIGTERM (then SIGKILL) a process we started, after checking that the pid is still ours."""
    if marker not in _cmdline(pid):
        return False  # gone, or the pid was reused by something else: leave it alone
    group = os.getpgid(pid) == pid  # the operator runs in a session of its own
    kill = os.killpg if group else os.kill
    with contextlib.suppress(ProcessLookupError):
        kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and marker in _cmdline(pid):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    if marker in _cmdline(pid):
        with contextlib.suppress(ProcessLookupError):
            kill(pid, signal.SIGKILL)
    return True


def down() -> int:
    stopped = []
    state = load_state()
    if "operator" in state and _stop_pid(state["operator"], "secretferry.cli"):
        stopped.append("operator")
    if "devserver" in state and _stop_pid(state["devserver"], "secretferry.devserver"):
        stopped.append("dev server")
    with contextlib.suppress(FileNotFoundError):  # a run tearing itself down at the same moment
        if cluster.stop_from_state(DEMO_DIR / "cluster"):
            stopped.append("control plane")
    shutil.rmtree(DEMO_DIR, ignore_errors=True)
    print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")
    return 0


def start_recording_pid(name: str, start: Callable[[], None], process: Callable[[], Any]) -> None:
    """Run a blocking ``start()`` (spawn, then wait until ready), saving the child's pid the moment
    it exists, so that `make demo-down` finds it even when the demo dies during the wait."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            start()
        except BaseException as exc:  # handed to the main thread below
            errors.append(exc)

    thread = threading.Thread(target=target, name=f"start-{name}", daemon=True)
    thread.start()
    saved = None
    while True:
        proc = process()
        if proc is not None and proc.pid != saved:
            save_state(**{name: proc.pid})
            saved = proc.pid
        if not thread.is_alive():
            break
        thread.join(0.05)
    if errors:
        raise errors[0]


# --- helpers ------------------------------------------------------------------------------------
def helm(cp: ControlPlane, *args: str) -> str:
    return cp.helm(*args, home=DEMO_DIR / "helm")


def service_account_kubeconfig(cp: ControlPlane, token: str) -> Path:
    """A kubeconfig that authenticates as the chart's ServiceAccount, as the in-cluster pod would."""
    return cp.token_kubeconfig(token, DEMO_DIR / "operator-kubeconfig")


def secret_data(cp: ControlPlane, namespace: str, name: str) -> dict[str, str] | None:
    """A Secret's decoded data, read straight from the apiserver (no kubectl start-up per poll)."""
    try:
        obj = json.loads(cp.get(f"/api/v1/namespaces/{namespace}/secrets/{name}"))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise
    return {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}


def ready_reasons(cp: ControlPlane) -> dict[tuple[str, str], tuple[str, str]]:
    """(namespace, name) -> (Ready status, reason) for every SecretSync."""
    items = json.loads(cp.get("/apis/secretferry.io/v1alpha1/secretsyncs"))["items"]
    out = {}
    for item in items:
        key = (item["metadata"]["namespace"], item["metadata"]["name"])
        conds = (item.get("status") or {}).get("conditions") or []
        ready: dict[str, str] = next((c for c in conds if c.get("type") == "Ready"), {})
        out[key] = (ready.get("status", ""), ready.get("reason", ""))
    return out


def wait_for(check: Any, *, timeout: float, what: str, interval: float = 0.01) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")


def show_secret(cp: ControlPlane, namespace: str, name: str, *, width: int = 70) -> None:
    data = secret_data(cp, namespace, name) or {}
    obj = json.loads(cp.get(f"/api/v1/namespaces/{namespace}/secrets/{name}"))
    keys = f"{len(data)} key{'s' if len(data) != 1 else ''}"
    info(f"Secret {namespace}/{name}  type={obj.get('type')}  ({keys}; fake demo values)")
    for key in sorted(data):
        value = data[key].replace("\n", "\\n")
        info(f"  {key:<26} = {value if len(value) <= width else value[: width - 3] + '...'}")


def measure_update(
    cp: ControlPlane,
    server: DevServer,
    what: str,
    key: str,
    value: str,
    *,
    watch_key: str,
    expect: str,
    reader: str | None = None,
) -> float:
    """Write at the service; return ms until the Secret demo/shop-config shows it (and, with a
    ``reader`` pod, print when the pod's mounted file shows it too)."""
    start = time.monotonic()
    server.set_secret(PROJECT_ID, "dev", "/", key, value)

    def arrived() -> bool:
        data = secret_data(cp, "demo", "shop-config") or {}
        return expect in data.get(watch_key, "")

    wait_for(arrived, timeout=30, what=f"{what} to reach the Secret")
    ms = (time.monotonic() - start) * 1000
    if reader is None:
        info(f"{what}: in the Secret after {ms:.0f} ms")
        return ms
    wait_for(
        lambda: expect in (consumer.read_file(cp, "demo", reader, watch_key) or ""),
        timeout=60,
        what=f"{what} to reach the file in pod {reader}",
        interval=0.05,
    )
    file_ms = (time.monotonic() - start) * 1000
    info(f"{what}: in the Secret after {ms:.0f} ms, in the pod's file after {file_ms:.0f} ms")
    return ms


PUSHED_VALUES = (
    "fake-admin-password-1",
    "fake-admin-password-2",
)  # examples/pushsecret.yaml, then the demo's


def measure_push(cp: ControlPlane, server: DevServer) -> float:
    """Change team-a/db-admin (pushed by examples/pushsecret.yaml); return ms until the SecretSync
    demo/shared-from-team-a, which pulls the same folder, shows it. Both must be settled first."""

    def pulled() -> str:
        return (secret_data(cp, "demo", "shared-from-team-a") or {}).get("DB_ADMIN_PASSWORD", "")

    wait_for(
        lambda: pulled() == PUSHED_VALUES[0], timeout=30, what="the first push to be pulled", interval=0.1
    )
    wait_for(
        lambda: (
            json.loads(cp.kubectl("get", "ssync", "-n", "demo", "shared-from-team-a", "-o", "json"))
            .get("status", {})
            .get("updateMode")
            == "Streaming"
        ),
        timeout=30,
        what="shared-from-team-a to stream",
        interval=0.2,
    )
    patch = json.dumps({"stringData": {"password": PUSHED_VALUES[1]}})
    start = time.monotonic()
    cp.kubectl("patch", "secret", "db-admin", "-n", "team-a", "--type=merge", "-p", patch)
    wait_for(
        lambda: pulled() == PUSHED_VALUES[1], timeout=30, what="the push to reach the pull", interval=0.01
    )
    return (time.monotonic() - start) * 1000


def metric_sum(op: OperatorProcess | OperatorPod, prefix: str) -> float:
    """Sum of the samples whose name (and labels) start with ``prefix``."""
    total = 0.0
    for line in op.metrics().splitlines():
        if line.startswith(prefix) and "_created" not in line.split(" ")[0]:
            total += float(line.rsplit(" ", 1)[1])
    return total


def seed_values() -> list[str]:
    seed = yaml.safe_load((EXAMPLES / "demo-seed.yaml").read_text())
    values = [s["value"] for p in seed["projects"] for s in p.get("secrets", [])]
    return [v for v in values if len(v) >= 8 and "${" not in v]


# --- the demo -----------------------------------------------------------------------------------
def run(*, keep_logs: bool = False, keep: bool = False) -> int:  # a linear script reads best as one function
    if load_state() or (DEMO_DIR / "cluster" / "state.json").exists():
        step("stopping what an interrupted run left behind")
        down()
    shutil.rmtree(DEMO_DIR, ignore_errors=True)
    DEMO_DIR.mkdir(parents=True)
    STATE.write_text("{}")

    step("starting the local control plane (etcd, kube-apiserver, kube-controller-manager)")
    cp = cluster.start(DEMO_DIR / "cluster")
    server: DevServer | None = None
    op: OperatorProcess | OperatorPod | None = None
    ok = False
    try:
        info(f"ready at {cp.server} (kubeconfig: {cp.kubeconfig.relative_to(REPO)})")
        no_node = node.unavailable_reason()
        if no_node:
            step(f"no local node: {no_node}; the operator will run as a local process instead")
        else:
            step("joining a kubelet node (containerd + runc, kubelet, kube-scheduler; images built locally)")
            started = time.monotonic()
            cp.start_node()
            info(f"node {node.NODE_NAME} Ready after {time.monotonic() - started:.1f} s; images on the node:")
            assert cp.node is not None
            block("\n".join(i for i in cp.node.images() if i.startswith("localhost/")))

        step("starting the dev server (reference secrets service) with examples/demo-seed.yaml")
        seed = yaml.safe_load((EXAMPLES / "demo-seed.yaml").read_text())
        reviewer = cp.reviewer_token(expiration_seconds=4 * 3600)
        for ident in seed["identities"]:
            if "kubernetesAuth" in ident:  # a real TokenReview against this control plane
                ident["kubernetesAuth"].update(
                    kubernetesHost=cp.server, caCert=cp.ca_pem, tokenReviewerJwt=reviewer
                )
        data_dir = DEMO_DIR / "devserver"
        data_dir.mkdir()
        (data_dir / "seed.yaml").write_text(yaml.safe_dump(seed, sort_keys=False))
        server = DevServer(
            seed_path=data_dir / "seed.yaml",
            data_dir=data_dir,
            port=free_port(),
            extra_args=["--heartbeat-seconds", "5"],
        )
        start_recording_pid(
            "devserver",
            lambda: server.start_with_retries(allow_new_port=True),
            lambda: getattr(server, "_process", None),
        )
        info(f"listening on {server.base_url}; the Kubernetes-auth identity reviews tokens at {cp.server}")

        op = install_on_node(cp, server) if cp.node is not None else install_as_process(cp, server)

        step("kubectl apply -f examples/... (Kubernetes and universal auth identities, six SecretSyncs)")
        applied = time.monotonic()
        for name in EXAMPLE_FILES:
            block(cp.kubectl("apply", "-f", str(EXAMPLES / name)))

        step("waiting for every SecretSync to settle")

        def settled() -> dict[tuple[str, str], tuple[str, str]] | None:
            now = ready_reasons(cp)
            return now if all(now.get(k, ("", ""))[1] == r for k, r in EXPECTED.items()) else None

        try:
            wait_for(settled, timeout=60, what="the SecretSyncs", interval=0.1)
        except RuntimeError:
            block(cp.kubectl("get", "ssync", "-A", "-o", "wide"))
            raise
        info(f"all {len(EXPECTED)} settled {(time.monotonic() - applied) * 1000:.0f} ms after kubectl apply")

        step("kubectl get ssync,mid -A   and   kubectl get cmid")
        block(cp.kubectl("get", "ssync,mid", "-A"))
        info()
        block(cp.kubectl("get", "cmid"))
        info()
        block(
            cp.kubectl(
                "get",
                "ssync",
                "-n",
                "sandbox",
                "payments",
                "-o",
                "jsonpath={.status.conditions[0].reason}: {.status.conditions[0].message}",
            )
        )

        step("the synced Secrets")
        show_secret(cp, "demo", "shop-config")
        info()
        show_secret(cp, "demo", "web-tls", width=50)
        info()
        show_secret(cp, "demo", "shop-frontend-prod")
        info()
        show_secret(cp, "team-b", "payments")
        status = json.loads(cp.kubectl("get", "ssync", "-n", "demo", "shop-config", "-o", "json"))["status"]
        info()
        info(
            f"shop-config status: updateMode={status.get('updateMode')} ({status.get('updateModeReason')}), "
            f"syncedKeys={status.get('syncedKeys')}, dataHMAC={str(status.get('dataHMAC'))[:22]}..."
        )

        reader = None
        if cp.node is not None:
            step("a consumer Deployment mounts Secret demo/shop-config and prints the file DB_HOST")
            cp.apply(consumer.deployment("demo", "shop-web", secret="shop-config", show_key="DB_HOST"))
            reader = consumer.running_pod(cp, "demo", "shop-web")
            wait_for(
                lambda: "DB_HOST=" in cp.kubectl("logs", "-n", "demo", reader), timeout=30, what="its log"
            )
            info(f"kubectl logs -n demo {reader}  (busybox, isolated pod network, read-only Secret volume)")
            block(cp.kubectl("logs", "-n", "demo", reader, "--tail=2"))

        step("changing secrets at the service; the event stream brings them in")
        wait_for(
            lambda: (
                json.loads(cp.kubectl("get", "ssync", "-n", "demo", "shop-config", "-o", "json"))
                .get("status", {})
                .get("updateMode")
                == "Streaming"
            ),
            timeout=30,
            what="shop-config to stream",
            interval=0.2,
        )
        delays = [
            measure_update(
                cp,
                server,
                "update DB_PASSWORD (and the DATABASE_URL that references it)",
                "DB_PASSWORD",
                "fake-rotated-password-2",
                watch_key="DATABASE_URL",
                expect="fake-rotated-password-2",
                reader=reader,
            ),
            measure_update(
                cp,
                server,
                "create DB_POOL_SIZE",
                "DB_POOL_SIZE",
                "20",
                watch_key="DB_POOL_SIZE",
                expect="20",
                reader=reader,
            ),
            measure_update(
                cp,
                server,
                "update DB_HOST",
                "DB_HOST",
                "db2.dev.example",
                watch_key="DB_HOST",
                expect="db2.dev.example",
                reader=reader,
            ),
        ]
        info(f"stream delay: min {min(delays):.0f} ms, max {max(delays):.0f} ms")
        if reader is not None:
            period = node.KUBELET_SYNC_SECONDS
            info(f"(a mounted file follows its Secret at the kubelet's next pod sync: every {period} s")
            info(" here, every minute with the kubelet's default syncFrequency); the pod's own log:")
            wait_for(
                lambda: "db2.dev.example" in cp.kubectl("logs", "-n", "demo", reader, "--tail=1"),
                timeout=30,
                what="the consumer to print the new DB_HOST",
                interval=0.2,
            )
            block(cp.kubectl("logs", "-n", "demo", reader, "--tail=3"))
        show_secret(cp, "demo", "shop-config")

        step("a push in team-a reaches a pull in demo (PushSecret → service → event stream → SecretSync)")
        push_ms = measure_push(cp, server)
        info(f"team-a/db-admin changed: in demo/shared-from-team-a after {push_ms:.0f} ms")
        block(cp.kubectl("get", "psec", "-n", "team-a"))

        step("a write at the service that changes nothing: no Secret write, so no rollout")
        writes_before = metric_sum(op, "secretferry_target_writes_total")
        unchanged_before = metric_sum(op, 'secretferry_syncs_total{result="unchanged"}')
        server.set_secret(PROJECT_ID, "dev", "/", "DB_USER", "shop_app")  # the same value again
        wait_for(
            lambda: metric_sum(op, 'secretferry_syncs_total{result="unchanged"}') > unchanged_before,
            timeout=10,
            what="the no-op event to be handled",
            interval=0.05,
        )
        time.sleep(0.5)
        info(
            f"event handled, data compared: Secret writes before {writes_before:.0f}, "
            f"after {metric_sum(op, 'secretferry_target_writes_total'):.0f}"
        )

        step("what the service saw, and the operator's own metrics")
        stats = server.stats()
        info(
            f"logins: {stats['logins']} for 3 identities (reused jwts: {stats['reusedJwts']}), "
            f"list calls: {stats['listSecrets']}, streams opened: {stats['streamsOpened']}, "
            f"open now: {stats['openStreams']}, events delivered: {stats['eventsDelivered']}"
        )
        wanted = (
            "secretferry_syncs_total",
            "secretferry_target_writes_total",
            "secretferry_open_streams",
            "secretferry_active_scopes",
            "secretferry_stream_events_total",
            "secretferry_secretsyncs",
        )
        for line in op.metrics().splitlines():
            if line.startswith(wanted) and "_created" not in line:
                info(line)

        step("checking that no secret value is in the operator log, Events or custom resources")
        haystack = op.log_text()
        for resource in (
            "events",
            "secretsyncs",
            "machineidentities",
            "clustermachineidentities",
            "pushsecrets",
        ):
            haystack += cp.kubectl("get", resource, "-A", "-o", "json")
        values = [*seed_values(), "fake-rotated-password-2", "db2.dev.example", *PUSHED_VALUES]
        leaked = [v for v in values if v in haystack]
        if leaked:
            raise RuntimeError(f"{len(leaked)} secret value(s) found outside Secrets")
        info(f"none of {len(values)} values found in {len(haystack) // 1024} KiB of logs, Events and status")
        ok = True
        if keep:
            keep_running(cp, server, op)
            return 0
    finally:
        if not (ok and keep):
            step(f"tearing down (operator, dev server, control plane{' and node' if cp.node else ''})")
            if isinstance(op, OperatorProcess):
                op.stop()
            if server is not None:
                server.close()
            cp.stop()
            if ok and not keep_logs:
                shutil.rmtree(DEMO_DIR, ignore_errors=True)
            else:
                STATE.unlink(missing_ok=True)
                info(
                    f"logs kept under {DEMO_DIR.relative_to(REPO)}/: operator.log, devserver/, cluster/logs/"
                )
    print(f"\ndemo finished in {time.monotonic() - T0:.1f} s")
    return 0


def install_on_node(cp: ControlPlane, server: DevServer) -> OperatorPod:
    step(f"helm install {RELEASE} charts/secretferry, image localhost/secretferry:dev (our Dockerfile)")
    pod = OperatorPod(cp, workdir=DEMO_DIR, default_host_api=server.base_url, release=RELEASE)
    started = time.monotonic()
    pod.install()
    info(f"operator pod Running and Ready {time.monotonic() - started:.1f} s after helm install")
    block(cp.kubectl("get", "pods", "-n", OPERATOR_NAMESPACE, "-o", "wide"))
    (operator_pod,) = pod.pods()
    (pod.workdir / "operator.log").write_text("")  # for the "logs kept" hint; the pod log is read live
    info(f"image {operator_pod['spec']['containers'][0]['image']}, node {operator_pod['spec']['nodeName']}")
    return pod


def install_as_process(cp: ControlPlane, server: DevServer) -> OperatorProcess:
    step(f"helm install {RELEASE} charts/secretferry (CRDs, ServiceAccount, RBAC; 0 replicas)")
    helm(
        cp,
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        OPERATOR_NAMESPACE,
        "--create-namespace",
        "--set",
        "replicaCount=0",  # no node on this host: the operator runs as a process below
        "--set",
        f"config.defaultHostAPI={server.base_url}",
    )
    block(
        cp.kubectl(
            "get",
            "serviceaccount,clusterrole,clusterrolebinding,role,rolebinding",
            "-A",
            "-l",
            f"app.kubernetes.io/instance={RELEASE}",
        )
    )
    step(f"starting the operator as ServiceAccount {OPERATOR_NAMESPACE}/{OPERATOR_SA}")
    token = cp.token_for(OPERATOR_NAMESPACE, OPERATOR_SA, expiration_seconds=4 * 3600)
    op = OperatorProcess(
        kubeconfig=service_account_kubeconfig(cp, token),
        log_path=DEMO_DIR / "operator.log",
        env={
            "SECRETFERRY_NAMESPACE": OPERATOR_NAMESPACE,
            "SECRETFERRY_DEFAULT_HOST_API": server.base_url,
            "SECRETFERRY_STREAM_HEARTBEAT_SECONDS": "5",
            "SECRETFERRY_LOG_FORMAT": "json",
            "SECRETFERRY_LOG_LEVEL": "INFO",
        },
    )
    start_recording_pid("operator", op.start, lambda: getattr(op, "_proc", None))
    info(f"live (metrics on :{op.metrics_port}, log: {op.log_path.relative_to(REPO)})")
    return op


def keep_running(cp: ControlPlane, server: DevServer, op: OperatorProcess | OperatorPod) -> None:
    """KEEP=1: leave everything up, and say how to look around and how to stop it."""
    cp.save_state()
    step("KEEP=1: everything stays up; look around with")
    block(
        f"""export KUBECONFIG={cp.kubeconfig}
alias kubectl='{cp.bin_dir / "kubectl"}'
kubectl get ssync,mid -A                 # the SecretSyncs and identities
kubectl get pods -A -o wide              # the operator pod and the consumer
kubectl logs -n {OPERATOR_NAMESPACE} deploy/secretferry      # the operator's JSON log
kubectl logs -n demo deploy/shop-web -f   # the consumer printing DB_HOST from its file
# change a value at the dev server, then watch the consumer's log pick it up:
curl -s -X PUT {server.base_url}/_admin/secrets -H 'X-Admin-Token: {server.admin_token}' \\
  -H 'content-type: application/json' -d '{{"projectId": "{PROJECT_ID}", "environment": "dev",
  "secretPath": "/", "secretKey": "DB_HOST", "secretValue": "db3.dev.example"}}'
make demo-down                            # stop it all and leave the host as it was"""
    )
    if isinstance(op, OperatorProcess):
        info(f"the operator runs as local process {op.pid} (log: {op.log_path.relative_to(REPO)})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo")
    parser.add_argument("--down", action="store_true", help="stop what an interrupted demo left running")
    parser.add_argument("--keep-logs", action="store_true", help="keep .demo/ (logs) after a successful run")
    parser.add_argument("--keep", action="store_true", help="leave everything running (make demo KEEP=1)")
    args = parser.parse_args(argv)
    if args.down:
        return down()
    return run(keep_logs=args.keep_logs, keep=args.keep)


if __name__ == "__main__":
    sys.exit(main())

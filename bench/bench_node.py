"""Change at the service → Secret → file in a pod, on the real local node; and a leader takeover.

The operator runs as a pod from the image built from our Dockerfile (helm-installed chart), a
busybox Deployment mounts the synced Secret, and each change is written at the dev server and
timed until the Secret holds it (the operator's part) and until the pod's file holds it (the
kubelet's part: it refreshes Secret volumes at each pod sync, ``syncFrequency``, stated in the
output). With ``--failover`` it also installs two replicas with leader election, kills the leader
and times until the standby holds the Lease.

    .venv/bin/python bench/bench_node.py [--changes 20] [--failover] [--control-plane production]

Skips with a one-line reason on a host that cannot run a node. It starts its own control plane
(``tuned`` unless ``--control-plane production``); the output starts with the machine, its load,
the commit and the control plane's profile and flags.

Clocks (``time.monotonic()`` in this process; polling, so each figure is an upper bound by up to
one poll):

- change -> Secret: from just before the admin write of the new value (the dev server's
  ``PUT /_admin/secrets``, so its round trip is included) to the end of the first GET of the
  Secret from the apiserver that returns it (one GET 20 ms after the previous one returned).
- change -> file in pod: from the same point to the end of the first ``kubectl exec … cat`` of the
  mounted file that prints it (one exec 50 ms after the previous one returned; an exec itself
  takes tens of ms).
- leader killed -> standby holds the Lease: from just before ``kubectl delete pod <leader>
  --grace-period=0 --force`` to the end of the first ``kubectl get lease`` (one 0.1 s after the
  previous one returned) naming another of the pods as holder.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.error
from collections.abc import Callable
from pathlib import Path

from _common import (
    AUDIENCE,
    IDENTITY_ID,
    PROJECT_ID,
    RunInfo,
    add_control_plane_option,
    decode,
    log,
    percentile,
    seed_doc,
    start_control_plane,
)
from secretferry.devcluster import cluster, consumer, node
from secretferry.devcluster.operator_pod import OperatorPod
from secretferry.devserver.testing import DevServer, run_dev_server

NAMESPACE = "bench-node"


def _wait(check: Callable[[], object], *, timeout: float, what: str, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")


def _secret_value(cp: cluster.ControlPlane, key: str) -> str | None:
    try:
        return decode(json.loads(cp.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/app-config")), key)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:  # not written yet
            return None
        raise


def changes(cp: cluster.ControlPlane, server: DevServer, work: Path, count: int) -> None:
    pod = OperatorPod(cp, workdir=work / "op", default_host_api=server.base_url)
    t0 = time.monotonic()
    pod.install()
    log(f"operator pod Ready {time.monotonic() - t0:.1f} s after helm install")
    cp.kubectl("create", "namespace", NAMESPACE)
    cp.kubectl("create", "serviceaccount", "ferry-sa", "-n", NAMESPACE)
    # The ServiceAccount opts in to the MachineIdentity below (reconcile/tenancy.py).
    cp.kubectl(
        "annotate", "serviceaccount", "ferry-sa", "-n", NAMESPACE, "secretferry.io/allowed-identities=ferry"
    )
    server.set_secret(PROJECT_ID, "dev", "/node", "ROTATED", "v-000")
    cp.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "MachineIdentity",
            "metadata": {"name": "ferry", "namespace": NAMESPACE},
            "spec": {
                "auth": {
                    "kubernetes": {
                        "identityId": IDENTITY_ID,
                        "serviceAccountRef": {"name": "ferry-sa"},
                        "audiences": [AUDIENCE],
                    }
                }
            },
        }
    )
    cp.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "SecretSync",
            "metadata": {"name": "app-config", "namespace": NAMESPACE},
            "spec": {
                "identityRef": {"kind": "MachineIdentity", "name": "ferry"},
                "sources": [{"projectId": PROJECT_ID, "environment": "dev", "path": "/node"}],
                "refreshInterval": "3h",
            },
        }
    )
    _wait(lambda: _secret_value(cp, "ROTATED") == "v-000", timeout=90, what="the first sync")
    cp.apply(consumer.deployment(NAMESPACE, "reader", secret="app-config"))
    reader = consumer.running_pod(cp, NAMESPACE, "reader")
    time.sleep(2)  # let the stream settle after the first sync
    to_secret: list[float] = []
    to_file: list[float] = []
    for i in range(1, count + 1):
        value = f"v-{i:03d}"
        start = time.monotonic()
        server.set_secret(PROJECT_ID, "dev", "/node", "ROTATED", value)
        _wait(lambda v=value: _secret_value(cp, "ROTATED") == v, timeout=30, what=f"change {i} in the Secret")
        to_secret.append((time.monotonic() - start) * 1000)
        _wait(
            lambda v=value: consumer.read_file(cp, NAMESPACE, reader, "ROTATED") == v,
            timeout=60,
            what=f"change {i} in the file",
            interval=0.05,
        )
        to_file.append((time.monotonic() - start) * 1000)
    print(f"kubelet syncFrequency: {node.KUBELET_SYNC_SECONDS} s (Secret volumes refresh at each pod sync)")
    print(f"changes: {count}")
    for name, values in (("change -> Secret", to_secret), ("change -> file in pod", to_file)):
        print(
            f"{name:<24} p50 {statistics.median(values):7.0f} ms   p95 {percentile(values, 95):7.0f} ms"
            f"   max {max(values):7.0f} ms"
        )
    pod.uninstall()


def failover(cp: cluster.ControlPlane, server: DevServer, work: Path) -> None:
    pair = OperatorPod(cp, workdir=work / "ha", default_host_api=server.base_url, release="ha", replicas=2)
    pair.install()

    def holder() -> str:
        out = cp.kubectl("get", "lease", "ha-secretferry", "-n", pair.namespace, "-o", "json", check=False)
        return str(json.loads(out)["spec"].get("holderIdentity") or "") if out else ""  # not created yet

    names = {p["metadata"]["name"] for p in pair.pods()}
    _wait(lambda: holder() in names, timeout=60, what="a leader")
    leader = holder()
    start = time.monotonic()
    cp.kubectl("delete", "pod", leader, "-n", pair.namespace, "--grace-period=0", "--force")
    _wait(lambda: holder() in names - {leader}, timeout=90, what="the takeover", interval=0.1)
    print(
        f"leader killed -> standby holds the Lease: {time.monotonic() - start:.1f} s (Lease 15 s, renew 5 s)"
    )
    pair.uninstall()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--changes", type=int, default=20)
    p.add_argument("--failover", action="store_true", help="also time a leader takeover")
    add_control_plane_option(p)
    args = p.parse_args()
    run = RunInfo(args.control_plane)
    reason = node.unavailable_reason()
    if reason:
        print(f"bench_node: skipped, no local node on this host: {reason}")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-node-") as tmp:
        work = Path(tmp)
        cp = start_control_plane(work / "cluster", run)
        try:
            t0 = time.monotonic()
            cp.start_node()
            log(f"node Ready in {time.monotonic() - t0:.1f} s")
            print(run.header())
            reviewer = cp.reviewer_token(expiration_seconds=3600)
            with run_dev_server(
                seed=seed_doc(cp, reviewer_token=reviewer, secrets=[]), data_dir=work / "devserver"
            ) as server:
                changes(cp, server, work, args.changes)
                if args.failover:
                    failover(cp, server, work)
        finally:
            cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

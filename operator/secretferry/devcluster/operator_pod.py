"""The operator as users run it: the chart installed by helm, the image built from our Dockerfile,
a pod on the local kubelet node.

The counterpart of ``operator_process`` (the operator as a local process, for hosts that cannot
run a node). Both offer ``metrics()`` and ``log_text()``, so the demo and the tests read either
the same way. Only what the local node needs is set here (``hack/local-node-values.yaml`` plus
the per-run ports and API server address); everything else is the chart's default.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from secretferry.devcluster import binaries
from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.net import free_port

NODE_VALUES = binaries.repo_root() / "hack" / "local-node-values.yaml"
CHART = binaries.repo_root() / "charts" / "secretferry"
_READY_TIMEOUT_SECONDS = 180.0  # image already imported: ~4 s measured; a loaded host needs more


class OperatorPod:
    """``helm install`` of the chart on the local node, and the handles tests and the demo need."""

    def __init__(
        self,
        cp: ControlPlane,
        *,
        workdir: Path,
        default_host_api: str,
        release: str = "secretferry",
        namespace: str = "secretferry-system",
        replicas: int = 1,
        values: dict[str, Any] | None = None,
    ) -> None:
        self.cp = cp
        self.workdir = workdir
        self.release = release
        self.namespace = namespace
        self.replicas = replicas
        self.default_host_api = default_host_api
        self.extra_values = values or {}
        # Several replicas share the node's network: they cannot all bind one port, so they go
        # without the metrics, liveness and readiness endpoints (the scheduler would refuse the hostPorts).
        self.metrics_port = free_port() if replicas == 1 else 0
        self.liveness_port = free_port() if replicas == 1 else 0
        self.readiness_port = free_port() if replicas == 1 else 0
        workdir.mkdir(parents=True, exist_ok=True)

    @property
    def selector(self) -> str:
        return f"app.kubernetes.io/instance={self.release},app.kubernetes.io/name=secretferry"

    def helm(self, *args: str) -> str:
        return self.cp.helm(*args, home=self.workdir / "helm")

    def _run_values(self) -> Path:
        api = urllib.parse.urlsplit(self.cp.server)
        values: dict[str, Any] = {
            "replicaCount": self.replicas,
            "config": {"defaultHostAPI": self.default_host_api},
            "metrics": {"enabled": bool(self.metrics_port), "port": self.metrics_port or 8080},
            "livenessPort": self.liveness_port,
            "readinessPort": self.readiness_port,
            "extraEnv": [
                {"name": "KUBERNETES_SERVICE_HOST", "value": api.hostname},
                {"name": "KUBERNETES_SERVICE_PORT", "value": str(api.port)},
            ],
            **({"leaderElection": {"enabled": True}} if self.replicas > 1 else {}),
        }
        for key, value in self.extra_values.items():
            if isinstance(value, dict) and isinstance(values.get(key), dict):
                values[key] = {**values[key], **value}
            elif key == "extraEnv":
                values[key] = [*values[key], *value]
            else:
                values[key] = value
        path = self.workdir / f"{self.release}-run-values.yaml"
        path.write_text(yaml.safe_dump(values))
        return path

    def install(self, *, wait: bool = True) -> None:
        self.helm(
            "install",
            self.release,
            str(CHART),
            "--namespace",
            self.namespace,
            "--create-namespace",
            # CRDs outlive a release (crds.keep): a later release on the same cluster adopts them.
            "--take-ownership",
            "--values",
            str(NODE_VALUES),
            "--values",
            str(self._run_values()),
        )
        if wait:
            self.wait_ready(self.replicas)

    def upgrade(self, values: dict[str, Any], *, wait_seconds: int | None = None) -> None:
        """``helm upgrade`` the release with ``values`` added, as a user changing a setting would;
        the Deployment rolls (Recreate with one replica), and the caller waits for the new pods, or,
        with ``wait_seconds``, helm does (``--wait``: until the new pods are Ready)."""
        self.extra_values = {**self.extra_values, **values}
        wait = ["--wait", f"--timeout={wait_seconds}s"] if wait_seconds is not None else []
        self.helm(
            "upgrade",
            self.release,
            str(CHART),
            "--namespace",
            self.namespace,
            "--values",
            str(NODE_VALUES),
            "--values",
            str(self._run_values()),
            *wait,
        )

    def uninstall(self) -> None:
        self.helm("uninstall", self.release, "--namespace", self.namespace, "--wait")

    def pods(self) -> list[dict[str, Any]]:
        out = self.cp.kubectl("get", "pods", "-n", self.namespace, "-l", self.selector, "-o", "json")
        items: list[dict[str, Any]] = json.loads(out)["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    @staticmethod
    def is_ready(pod: dict[str, Any]) -> bool:
        conditions = pod.get("status", {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    @staticmethod
    def restarts(pod: dict[str, Any]) -> int:
        return sum(
            int(c.get("restartCount", 0)) for c in pod.get("status", {}).get("containerStatuses") or []
        )

    def wait_ready(
        self, count: int, *, exclude: Sequence[str] = (), timeout: float = _READY_TIMEOUT_SECONDS
    ) -> list[str]:
        """Wait until ``count`` pods (not named in ``exclude``) are Ready; return their names."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready = [p["metadata"]["name"] for p in self.pods() if self.is_ready(p)]
            ready = [n for n in ready if n not in exclude]
            if len(ready) >= count:
                return ready
            time.sleep(0.2)
        raise RuntimeError(f"operator pods not Ready after {timeout:.0f} s:\n{self.describe()}")

    def describe(self) -> str:
        """What a human would look at: pod phases, container states, Events and the last log lines."""
        text = self.cp.kubectl("get", "pods", "-n", self.namespace, "-o", "wide", check=False)
        text += self.cp.kubectl(
            "get", "events", "-n", self.namespace, "--sort-by=.lastTimestamp", check=False
        )[-3000:]
        return text + self.log_text()[-3000:]

    def metrics(self) -> str:
        """The active pod's /metrics (the pod shares the host's network, so it is on loopback)."""
        if not self.metrics_port:
            raise RuntimeError("metrics are off for several replicas on one node")
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            text: str = r.read().decode()
            return text

    def log_text(self) -> str:
        """Every current operator pod's log, and the previous container's where it restarted."""
        text = ""
        for pod in self.pods():
            name = pod["metadata"]["name"]
            if self.restarts(pod):
                text += self.cp.kubectl("logs", "-n", self.namespace, name, "--previous", check=False)
            text += self.cp.kubectl("logs", "-n", self.namespace, name, check=False)
        return text

"""A workload that consumes a synced Secret the ordinary way: a Secret volume, read as files.

The last clause of what the operator promises is "consumed by pods as mounted secrets"; the demo,
the node tests and the node benchmark all prove it with this Deployment (busybox, built locally,
on the isolated pod network, restricted security context) and read its files with ``kubectl exec``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.images import BUSYBOX, REFERENCES

MOUNT = "/etc/secret"


def deployment(namespace: str, name: str, *, secret: str, show_key: str = "") -> dict[str, Any]:
    """A Deployment mounting ``secret`` at ``MOUNT``; with ``show_key`` it also prints that file's
    content to its log once a second (for the demo: the values there are fake demo values)."""
    loop = f'echo "$(date +%T) {show_key}=$(cat {MOUNT}/{show_key})"; ' if show_key else ""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 1,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65534,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "app",
                            "image": REFERENCES[BUSYBOX],
                            "imagePullPolicy": "Never",
                            "command": ["/bin/sh", "-c", f"while true; do {loop}sleep 1; done"],
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": [{"name": "secret", "mountPath": MOUNT, "readOnly": True}],
                        }
                    ],
                    "volumes": [{"name": "secret", "secret": {"secretName": secret}}],
                },
            },
        },
    }


def running_pod(cp: ControlPlane, namespace: str, name: str, *, timeout: float = 120.0) -> str:
    """The name of the Deployment's Running, Ready pod."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = cp.kubectl("get", "pods", "-n", namespace, "-l", f"app={name}", "-o", "json", check=False)
        for pod in json.loads(out or '{"items": []}')["items"]:
            conditions = pod.get("status", {}).get("conditions") or []
            if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                return str(pod["metadata"]["name"])
        time.sleep(0.2)
    raise RuntimeError(
        f"no Ready pod for Deployment {namespace}/{name} after {timeout:.0f} s:\n"
        + cp.kubectl("describe", "pods", "-n", namespace, "-l", f"app={name}", check=False)[-3000:]
    )


def read_file(cp: ControlPlane, namespace: str, pod: str, key: str) -> str | None:
    """The content of ``MOUNT/key`` as the pod sees it; None while the file does not exist."""
    out = cp.kubectl_run("exec", "-n", namespace, pod, "--", "cat", f"{MOUNT}/{key}")
    return out.stdout if out.returncode == 0 else None

"""A consumer pod on the node logs in to PostgreSQL with leased credentials; after revoke it cannot.

Everything is real: the operator runs as users run it (the chart, the image built from our
Dockerfile), the dev server's dynamic secret makes PostgreSQL roles in a throwaway cluster, and the
consumer is a pod on the local node running a real PostgreSQL client (``pg8000``, pure Python, with
its SCRAM library ``scramp``) on the Debian python base image. The client packages come from the
test environment (PyPI, the dev extra) as one zip in a ConfigMap, put on ``PYTHONPATH``: the pod
imports them from the zip, nothing is installed in the image. The pod uses the host network to
reach the cluster on 127.0.0.1 (as the operator pod reaches the dev server). Its credentials come
from the leased Secret through ``secretKeyRef``; it prints only OK / REFUSED and an error class.
"""

from __future__ import annotations

import base64
import importlib.metadata
import io
import json
import subprocess
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from node_helpers import operator_harness

from secretferry.devcluster import binaries
from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_pod import OperatorPod
from secretferry.devserver import pgcluster
from secretferry.devserver.testing import DevServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        pgcluster.unavailable_reason() is not None, reason=str(pgcluster.unavailable_reason())
    ),
]
harness = operator_harness()
PYTHON_IMAGE = "localhost/debian-python:bookworm"
CLIENT_DISTRIBUTIONS = ("pg8000", "scramp", "asn1crypto", "python-dateutil", "six")
CONSUMER = """
import os, sys, time
import pg8000.native
while True:
    try:
        conn = pg8000.native.Connection(
            os.environ["DB_USERNAME"], password=os.environ["DB_PASSWORD"], host="127.0.0.1",
            port=int(os.environ["PGPORT"]), database="postgres", timeout=5)
        ok = conn.run("SELECT current_user")[0][0] == os.environ["DB_USERNAME"]
        conn.close()
        print("OK" if ok else "WRONG-USER", flush=True)
    except Exception as exc:
        print("REFUSED", type(exc).__name__, flush=True)
    time.sleep(1)
"""


def client_zip() -> bytes:
    """pg8000 and its dependencies from this environment's site-packages, with their dist-info
    (scramp reads its own version from it), as one importable zip."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for dist_name in CLIENT_DISTRIBUTIONS:
            dist = importlib.metadata.distribution(dist_name)
            for entry in dist.files or []:
                path = Path(str(dist.locate_file(entry)))
                if path.is_file() and "__pycache__" not in entry.parts and not str(entry).startswith(".."):
                    zf.write(path, str(entry))
    return buf.getvalue()


def python_base_archive() -> Path:
    script = binaries.repo_root() / "hack" / "build-node-images.sh"
    out = subprocess.run(
        ["bash", str(script), "--only", "python-base"], check=True, stdout=subprocess.PIPE, text=True
    )
    for line in out.stdout.splitlines():
        name, sep, path = line.partition("=")
        if sep and name == "python-base":
            return Path(path.strip())
    raise RuntimeError("no python-base archive")


@pytest.fixture(scope="module")
def pg() -> Iterator[pgcluster.PgCluster]:
    with pgcluster.throwaway_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="module")
def operator(
    node_cluster: ControlPlane,
    node_service: DevServer,
    pg: pgcluster.PgCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorPod]:
    node_service.add_seed(
        {
            "projects": [
                {
                    "slug": harness.PROJECT_SLUG,
                    "dynamicSecrets": [
                        {
                            "name": "node-db",
                            "environment": "dev",
                            "path": "/",
                            "type": "sql-database",
                            "defaultTTL": "5m",
                            "maxTTL": "1h",
                            "inputs": pg.inputs(),
                        }
                    ],
                }
            ]
        }
    )
    assert node_cluster.node is not None
    node_cluster.node.load_image(python_base_archive())
    pods = OperatorPod(
        node_cluster,
        workdir=tmp_path_factory.mktemp("operator-leases"),
        default_host_api=node_service.base_url,
        release="ferry-leases",
    )
    pods.install()
    try:
        yield pods
    finally:
        pods.uninstall()


def consumer_pod(namespace: str, port: int) -> dict[str, Any]:
    def from_secret(key: str) -> dict[str, Any]:
        return {"name": key, "valueFrom": {"secretKeyRef": {"name": "db", "key": key}}}

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pg-consumer", "namespace": namespace},
        "spec": {
            "hostNetwork": True,
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65534,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "client",
                    "image": PYTHON_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["python3", "-c", CONSUMER],
                    "env": [
                        from_secret("DB_USERNAME"),
                        from_secret("DB_PASSWORD"),
                        {"name": "PGPORT", "value": str(port)},
                        {"name": "PYTHONPATH", "value": "/pylib/pgclient.zip"},
                        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                    ],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "volumeMounts": [{"name": "pylib", "mountPath": "/pylib", "readOnly": True}],
                }
            ],
            "volumes": [{"name": "pylib", "configMap": {"name": "pgclient"}}],
        },
    }


def last_line(cp: ControlPlane, namespace: str) -> str:
    out = cp.kubectl("logs", "pg-consumer", "-n", namespace, "--tail=1", check=False)
    return out.strip()


@pytest.fixture
def namespace(node_cluster: ControlPlane) -> Iterator[str]:
    name = f"lease-{uuid.uuid4().hex[:8]}"
    node_cluster.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        node_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_a_pod_logs_in_with_leased_credentials_and_not_after_revoke(
    node_cluster: ControlPlane, operator: OperatorPod, pg: pgcluster.PgCluster, namespace: str
) -> None:
    harness.kubernetes_identity(node_cluster, namespace)
    node_cluster.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "DynamicSecretLease",
            "metadata": {"name": "db", "namespace": namespace},
            "spec": {
                "identityRef": {"name": "ferry"},
                "dynamicSecret": {
                    "name": "node-db",
                    "projectSlug": harness.PROJECT_SLUG,
                    "environment": "dev",
                },
            },
        }
    )
    data = harness.eventually(
        lambda: harness.secret_data(node_cluster, namespace, "db"), timeout=120, what="the leased Secret"
    )
    assert set(data) == {"DB_USERNAME", "DB_PASSWORD"}
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "pgclient", "namespace": namespace},
        "binaryData": {"pgclient.zip": base64.b64encode(client_zip()).decode()},
    }
    # create, not apply: apply would copy the 400 KiB into an annotation (at most 256 KiB).
    node_cluster.kubectl("create", "-f", "-", input=json.dumps(config_map))
    node_cluster.apply(consumer_pod(namespace, pg.port))
    harness.eventually(
        lambda: last_line(node_cluster, namespace) == "OK", timeout=120, what="the pod logged in"
    )

    node_cluster.kubectl("delete", "dynamicsecretlease", "db", "-n", namespace, "--timeout=60s")
    harness.eventually(
        lambda: last_line(node_cluster, namespace).startswith("REFUSED"),
        timeout=60,
        what="the pod refused after revoke",
    )
    logs = node_cluster.kubectl("logs", "pg-consumer", "-n", namespace)
    assert data["DB_PASSWORD"] not in logs and data["DB_USERNAME"] not in logs
    pod = json.loads(node_cluster.kubectl("get", "pod", "pg-consumer", "-n", namespace, "-o", "json"))
    assert pod["spec"]["nodeName"], "the consumer ran on the node"
    node_cluster.kubectl("delete", "pod", "pg-consumer", "-n", namespace, "--wait=false")

"""Binary values on a real node: a PKCS#12 keystore, generated here and stored base64 at the dev
server, is synced by the operator pod (helm, the image from our Dockerfile) with a Base64
decoding rule; a pod on the kubelet node mounts the Secret and OpenSSL opens the keystore with
the password from the same Secret.

Which tool opens it in the pod: the operator image has no ``cryptography`` (the Dockerfile
installs the wheel without extras; cryptography is the dev cluster's, not the operator's), but
its Debian base has ``/usr/bin/openssl`` (ca-certificates depends on it, in the upstream
python:3.11-slim image too). So the pod runs the operator image with ``openssl pkcs12``: it
verifies the MAC and decrypts the certificate bag and the shrouded key bag with the password,
and refuses a wrong one. The pod also prints the file's SHA-256, compared here with the keystore's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from node_helpers import installed_operator, operator_harness

from secretferry.devcluster import images
from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_pod import OperatorPod
from secretferry.devserver.testing import DevServer

sys.path.append(str(Path(__file__).resolve().parents[1] / "operator"))
from test_operator_binary import make_keystore

pytestmark = pytest.mark.integration

harness = operator_harness()
PASSWORD = b"node-keystore-pass-5e2c"
MOUNT = "/etc/keystore"
# Runs in the operator image as uid 65532, read-only root: opens the keystore, prints nothing secret.
CHECK = f"""
set -u
openssl pkcs12 -info -nokeys -in {MOUNT}/keystore.p12 -passin file:{MOUNT}/KEYSTORE_PASSWORD || exit 11
openssl pkcs12 -nocerts -nodes -in {MOUNT}/keystore.p12 -passin file:{MOUNT}/KEYSTORE_PASSWORD \\
  | openssl pkey -noout || exit 12
echo KEY-DECRYPTED
if openssl pkcs12 -info -nokeys -in {MOUNT}/keystore.p12 -passin pass:wrong-password >/dev/null 2>&1; then
  exit 13
fi
echo WRONG-PASSWORD-REFUSED
sha256sum {MOUNT}/keystore.p12
"""


@pytest.fixture(scope="module")
def operator(
    node_cluster: ControlPlane, node_service: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorPod]:
    with installed_operator(
        node_cluster, node_service, workdir=tmp_path_factory.mktemp("operator-pod-binary")
    ) as pod:
        yield pod


def opener_pod(namespace: str, secret: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "keystore-opener", "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65532,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "open",
                    "image": images.REFERENCES[images.OPERATOR],
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", CHECK],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "volumeMounts": [{"name": "keystore", "mountPath": MOUNT, "readOnly": True}],
                }
            ],
            "volumes": [{"name": "keystore", "secret": {"secretName": secret}}],
        },
    }


def pod_phase(cp: ControlPlane, namespace: str, name: str) -> str:
    out = cp.kubectl("get", "pod", name, "-n", namespace, "-o", "json", check=False)
    return str(json.loads(out or "{}").get("status", {}).get("phase", "")) if out else ""


def test_a_pod_opens_the_synced_keystore_with_its_password(
    node_cluster: ControlPlane, node_service: DevServer, operator: OperatorPod
) -> None:
    bundle, _ = make_keystore(PASSWORD)
    namespace = f"node-bin-{uuid.uuid4().hex[:8]}"
    node_cluster.kubectl("create", "namespace", namespace)
    try:
        path = "/node-binary"
        node_service.set_secret(
            harness.PROJECT_ID, "dev", path, "keystore.p12", base64.encodebytes(bundle).decode()
        )
        node_service.set_secret(harness.PROJECT_ID, "dev", path, "KEYSTORE_PASSWORD", PASSWORD.decode())
        harness.kubernetes_identity(node_cluster, namespace)
        harness.secret_sync(
            node_cluster,
            namespace,
            "keystore",
            sources=[harness.source(path, decoding=[{"keys": "*.p12", "strategy": "Base64"}])],
        )
        harness.wait_reason(node_cluster, namespace, "keystore", "Synced", timeout=90)
        secret = harness.get(node_cluster, "secret", "keystore", namespace) or {}
        assert base64.b64decode(secret["data"]["keystore.p12"]) == bundle

        node_cluster.apply(opener_pod(namespace, "keystore"))
        started = time.monotonic()
        phase = harness.eventually(
            lambda: (
                pod_phase(node_cluster, namespace, "keystore-opener") in ("Succeeded", "Failed")
                and pod_phase(node_cluster, namespace, "keystore-opener")
            ),
            timeout=180,
            what="the opener pod to finish",
        )
        elapsed = time.monotonic() - started
        log = node_cluster.kubectl("logs", "keystore-opener", "-n", namespace, check=False)
        assert phase == "Succeeded", (
            log[-3000:]
            + node_cluster.kubectl("describe", "pod", "keystore-opener", "-n", namespace, check=False)[-3000:]
        )
        assert re.search(r"subject=\s*CN\s*=\s*binary\.secretferry\.test", log), log
        assert "KEY-DECRYPTED" in log and "WRONG-PASSWORD-REFUSED" in log, log
        assert f"{hashlib.sha256(bundle).hexdigest()}  {MOUNT}/keystore.p12" in log, log
        print(f"keystore opened in the pod {elapsed:.1f} s after it was applied")
        harness.assert_no_values_leaked(node_cluster, operator)
    finally:
        node_cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)

"""A tenant in a namespace a ClusterSecretSync selects gains nothing from it.

The tenant (``hostile``: may only create our namespaced kinds in its namespace) cannot create,
read or change ClusterSecretSyncs; cannot relabel its namespace into (or out of) a selection
(namespace labels are a cluster-scoped right); cannot take the ClusterSecretSync's target with a
SecretSync of its own (even one of the same name); cannot keep a hand edit of the target (made by
someone with Secret write: repaired); and cannot read another selected namespace's result.
"""

from __future__ import annotations

import json
import time
import uuid

import harness
import pytest
import tenant
from cluster_helpers import CSS, cluster_identity, counts, delete_namespaces, labelled_namespace, manifest
from harness import PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration
LABEL = "css-tenant"
# The test operator retries after at most 3 s (SECRETFERRY_BACKOFF_MAX_SECONDS): a little longer
# lets a retry pass before "unchanged" is judged.
RETRY_WINDOW_SECONDS = 4.0


def _forbidden(t: tenant.Tenant, *args: str, input: str | None = None) -> None:
    try:
        t.kubectl(*args, input=input)
    except RuntimeError as exc:
        assert "forbidden" in str(exc).lower(), str(exc)
    else:
        raise AssertionError(f"tenant: kubectl {' '.join(args)} was allowed")


def test_a_tenant_gains_nothing_from_a_cluster_secretsync(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    cp = control_plane
    tag = uuid.uuid4().hex[:8]
    path = f"/css-tenant-{tag}"
    value = f"css-tenant-value-{tag}"
    service.set_secret(PROJECT_ID, "dev", path, "TOKEN", value)
    cp.kubectl("label", "namespace", namespace, f"{LABEL}={tag}")  # the admin selects it
    other = labelled_namespace(cp, {LABEL: tag})
    admin_ns = labelled_namespace(cp, {}, prefix="css-admin")
    name = f"css-{tag}"
    try:
        cluster_identity(cp, f"cid-{tag}", sa_namespace=admin_ns)
        body = manifest(name, identity=f"cid-{tag}", path=path, selector={"matchLabels": {LABEL: tag}})
        cp.apply(body)
        for ns in (namespace, other):
            eventually(
                lambda ns=ns: secret_data(cp, ns, "shared") == {"TOKEN": value}, what=f"synced in {ns}"
            )

        # 1. ClusterSecretSyncs are not the tenant's: no create, get, list, patch, delete.
        for verb in ("create", "get", "list", "patch", "delete"):
            assert not hostile.can(verb, "clustersecretsyncs.secretferry.io"), verb
        _forbidden(hostile, "get", CSS, name)
        _forbidden(
            hostile, "patch", CSS, name, "--type=merge", "-p", '{"spec":{"namespaces":["kube-system"]}}'
        )
        mine = manifest(f"{name}-mine", identity=f"cid-{tag}", path=path, namespaces=["kube-system"])
        _forbidden(hostile, "apply", "-f", "-", input=json.dumps(mine))

        # 2. Namespace labels are not the tenant's: it cannot relabel into or out of a selection.
        assert not hostile.can("patch", "namespaces") and not hostile.can("update", "namespaces")
        _forbidden(hostile, "label", "namespace", namespace, f"{LABEL}-", "--overwrite")
        _forbidden(hostile, "label", "namespace", namespace, "team=payments", "--overwrite")

        # 3. A SecretSync of the tenant's, named like the ClusterSecretSync, aimed at its target:
        # TargetConflict, and the Secret is not written (not even once) over a retry.
        harness.kubernetes_identity(cp, namespace)  # the namespace's own identity (admin-made)
        own_path = f"/tenant-{tag}"
        service.set_secret(PROJECT_ID, "dev", own_path, "TOKEN", f"tenant-owned-{tag}")
        before = harness.get(cp, "secret", "shared", namespace)
        assert before is not None
        hostile.apply(
            {
                "apiVersion": "secretferry.io/v1alpha1",
                "kind": "SecretSync",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "identityRef": {"name": "ferry"},
                    "sources": [source(own_path)],
                    "target": {"name": "shared"},
                },
            }
        )
        harness.wait_reason(cp, namespace, name, "TargetConflict")
        time.sleep(RETRY_WINDOW_SECONDS)
        after = harness.get(cp, "secret", "shared", namespace)
        assert after is not None
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        assert secret_data(cp, namespace, "shared") == {"TOKEN": value}
        assert counts(cp, name) == (2, 2, 0)

        # 4. A hand edit of the target (by someone with Secret write) is repaired.
        harness.VALUES.add(f"hand-edit-{tag}")
        edit = json.dumps({"stringData": {"TOKEN": f"hand-edit-{tag}", "EXTRA": "x"}})
        cp.kubectl("patch", "secret", "shared", "-n", namespace, "--type=merge", "-p", edit)
        eventually(
            lambda: secret_data(cp, namespace, "shared") == {"TOKEN": value}, what="the hand edit repaired"
        )

        # 5. Another namespace's result is not the tenant's to read, nor is the object listing it.
        assert not hostile.can("get", "secrets")
        _forbidden(hostile, "get", "secret", "shared", "-n", other)
        _forbidden(hostile, "get", CSS)
    finally:
        cp.kubectl("delete", "secretsync", name, "-n", namespace, check=False)
        cp.kubectl("delete", CSS, name, check=False)
        cp.kubectl("delete", "clustermachineidentity", f"cid-{tag}", check=False)
        delete_namespaces(cp, other, admin_ns)

"""End to end: SecretSyncs reconciled into Secrets against the real control plane and the
dev server, with Kubernetes auth through a real TokenReview."""

from __future__ import annotations

import json

import harness
import pytest
from harness import PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration


def test_create_change_delete_follow_the_service(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "DB_USER", "u-create-1")
    service.set_secret(PROJECT_ID, "dev", path, "DB_PASS", "p-create-1")
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(
        control_plane,
        namespace,
        "app",
        sources=[source(path)],
        target={"deletionPolicy": "Delete"},
        refreshInterval="2s",
        instantUpdates=False,
    )
    eventually(
        lambda: (
            secret_data(control_plane, namespace, "app") == {"DB_USER": "u-create-1", "DB_PASS": "p-create-1"}
        ),
        what="the first sync",
    )
    cond = harness.wait_reason(control_plane, namespace, "app", "Synced")
    assert cond["status"] == "True"

    service.set_secret(PROJECT_ID, "dev", path, "DB_PASS", "p-change-2")
    service.set_secret(PROJECT_ID, "dev", path, "NEW_KEY", "n-create-3")
    eventually(
        lambda: (
            secret_data(control_plane, namespace, "app")
            == {"DB_USER": "u-create-1", "DB_PASS": "p-change-2", "NEW_KEY": "n-create-3"}
        ),
        what="the change after a refresh",
    )
    service.delete_secret(PROJECT_ID, "dev", path, "DB_USER")
    eventually(
        lambda: (
            secret_data(control_plane, namespace, "app") == {"DB_PASS": "p-change-2", "NEW_KEY": "n-create-3"}
        ),
        what="the deleted key to disappear (deletionPolicy Delete)",
    )
    status = (harness.get(control_plane, "secretsync", "app", namespace) or {})["status"]
    assert status["syncedKeys"] == ["DB_PASS", "NEW_KEY"]
    assert status["observedGeneration"] == 1
    identity = harness.ready(control_plane, namespace, "ferry", kind="machineidentity")
    assert identity is not None and identity["status"] == "True"


def test_retain_keeps_keys_removed_at_the_service(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "KEEP", "k-retain-1")
    service.set_secret(PROJECT_ID, "dev", path, "GONE", "g-retain-1")
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(
        control_plane, namespace, "app", sources=[source(path)], refreshInterval="2s", instantUpdates=False
    )
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"KEEP": "k-retain-1", "GONE": "g-retain-1"},
        what="the first sync",
    )
    service.delete_secret(PROJECT_ID, "dev", path, "GONE")
    service.set_secret(PROJECT_ID, "dev", path, "KEEP", "k-retain-2")
    eventually(
        lambda: (secret_data(control_plane, namespace, "app") or {}).get("KEEP") == "k-retain-2",
        what="the change",
    )
    assert secret_data(control_plane, namespace, "app") == {"KEEP": "k-retain-2", "GONE": "g-retain-1"}


def test_recursive_imports_tags_and_metadata(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    base = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", base, "TOP", "top-value-1", tags=["web"])
    service.set_secret(PROJECT_ID, "dev", f"{base}/sub", "NESTED", "nested-value-1", tags=["web"])
    service.set_secret(
        PROJECT_ID, "dev", base, "META", "meta-value-1", metadata=[{"key": "team", "value": "pay"}]
    )
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(control_plane, namespace, "flat", sources=[source(base)])
    harness.secret_sync(control_plane, namespace, "deep", sources=[source(base, recursive=True)])
    harness.secret_sync(
        control_plane, namespace, "tagged", sources=[source(base, recursive=True, tagSlugs=["web"])]
    )
    harness.secret_sync(
        control_plane,
        namespace,
        "meta",
        sources=[source(base, metadataFilter=[{"key": "team", "value": "pay"}])],
    )
    eventually(
        lambda: (
            secret_data(control_plane, namespace, "flat") == {"TOP": "top-value-1", "META": "meta-value-1"}
        ),
        what="flat",
    )
    eventually(
        lambda: (
            secret_data(control_plane, namespace, "deep")
            == {"TOP": "top-value-1", "META": "meta-value-1", "NESTED": "nested-value-1"}
        ),
        what="recursive",
    )
    eventually(
        lambda: (
            secret_data(control_plane, namespace, "tagged")
            == {"TOP": "top-value-1", "NESTED": "nested-value-1"}
        ),
        what="tag filter",
    )
    eventually(
        lambda: secret_data(control_plane, namespace, "meta") == {"META": "meta-value-1"},
        what="metadata filter",
    )


def test_templates_types_and_render_errors(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "CERT", "cert-pem-1")
    service.set_secret(PROJECT_ID, "dev", path, "KEY", "key-pem-1")
    service.set_secret(PROJECT_ID, "dev", path, "USER", "template-user-1")
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    harness.secret_sync(
        control_plane,
        namespace,
        "tls",
        sources=[source(path)],
        target={
            "type": "kubernetes.io/tls",
            "template": {"data": {"tls.crt": "{{ CERT }}", "tls.key": "{{ KEY }}"}},
        },
    )
    harness.secret_sync(
        control_plane,
        namespace,
        "dsn",
        sources=[source(path)],
        target={"template": {"data": {"dsn": "postgres://{{ USER }}@db/app"}, "includeAll": True}},
    )
    harness.secret_sync(
        control_plane,
        namespace,
        "broken",
        sources=[source(path)],
        target={"template": {"data": {"x": "{{ MISSING_NAME }}"}}},
    )
    harness.secret_sync(
        control_plane, namespace, "wrongtype", sources=[source(path)], target={"type": "kubernetes.io/tls"}
    )
    eventually(
        lambda: (
            secret_data(control_plane, namespace, "tls") == {"tls.crt": "cert-pem-1", "tls.key": "key-pem-1"}
        ),
        what="tls secret",
    )
    tls = harness.get(control_plane, "secret", "tls", namespace)
    assert tls is not None and tls["type"] == "kubernetes.io/tls"
    eventually(
        lambda: (
            (secret_data(control_plane, namespace, "dsn") or {}).get("dsn")
            == "postgres://template-user-1@db/app"
        ),
        what="includeAll template",
    )
    assert set(secret_data(control_plane, namespace, "dsn") or {}) == {"dsn", "CERT", "KEY", "USER"}
    broken = harness.wait_reason(control_plane, namespace, "broken", "TemplateError")
    assert "MISSING_NAME" in broken["message"]
    harness.wait_reason(control_plane, namespace, "wrongtype", "InvalidSecretType")
    assert secret_data(control_plane, namespace, "broken") is None
    assert secret_data(control_plane, namespace, "wrongtype") is None


def test_creation_policies(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "OURS", "ours-value-1")
    harness.kubernetes_identity(control_plane, namespace)
    control_plane.kubectl(
        "create", "secret", "generic", "shared", "-n", namespace, "--from-literal=foreign=theirs"
    )
    # Its owner lets the SecretSync "merge" (and no other) write into it.
    control_plane.kubectl("annotate", "secret", "shared", "-n", namespace, "secretferry.io/merge-from=merge")
    harness.secret_sync(control_plane, namespace, "owned", sources=[source(path)])
    harness.secret_sync(
        control_plane, namespace, "orphan", sources=[source(path)], target={"creationPolicy": "Orphan"}
    )
    harness.secret_sync(
        control_plane,
        namespace,
        "merge",
        sources=[source(path)],
        target={"name": "shared", "creationPolicy": "Merge"},
    )
    harness.secret_sync(control_plane, namespace, "clash", sources=[source(path)], target={"name": "shared"})
    for name in ("owned", "orphan"):
        eventually(
            lambda n=name: secret_data(control_plane, namespace, n) == {"OURS": "ours-value-1"}, what=name
        )
    eventually(
        lambda: (
            secret_data(control_plane, namespace, "shared") == {"foreign": "theirs", "OURS": "ours-value-1"}
        ),
        what="merge into the existing Secret",
    )
    harness.wait_reason(control_plane, namespace, "clash", "TargetConflict")

    control_plane.kubectl("delete", "secretsync", "owned", "orphan", "merge", "-n", namespace)
    eventually(
        lambda: secret_data(control_plane, namespace, "owned") is None,
        what="garbage collection (Owner)",
        timeout=60,
    )
    assert secret_data(control_plane, namespace, "orphan") == {"OURS": "ours-value-1"}
    assert (secret_data(control_plane, namespace, "shared") or {}).get("foreign") == "theirs"


def test_drift_is_repaired(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "drift-value-1")
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(control_plane, namespace, "app", sources=[source(path)], refreshInterval="1h")
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"K": "drift-value-1"}, what="first sync"
    )
    control_plane.kubectl(
        "patch",
        "secret",
        "app",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"stringData": {"K": "hand-edited"}}),
    )
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"K": "drift-value-1"},
        what="edit repaired",
        timeout=10,
    )
    control_plane.kubectl("delete", "secret", "app", "-n", namespace)
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"K": "drift-value-1"},
        what="deletion repaired",
        timeout=10,
    )


def test_isolation(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "isolated-value-1")
    other = f"{namespace}-other"
    control_plane.kubectl("create", "namespace", other)
    try:
        harness.kubernetes_identity(control_plane, other)  # lives in another namespace
        harness.secret_sync(control_plane, namespace, "cross", sources=[source(path)])
        cond = harness.wait_reason(control_plane, namespace, "cross", "IdentityNotFound")
        assert namespace in cond["message"]

        control_plane.kubectl("create", "serviceaccount", "cluster-sa", "-n", other)
        control_plane.apply(
            {
                "apiVersion": "secretferry.io/v1alpha1",
                "kind": "ClusterMachineIdentity",
                "metadata": {"name": f"only-{other}"},
                "spec": {
                    "auth": {
                        "kubernetes": {
                            "identityId": harness.IDENTITY_ID,
                            "audiences": [harness.AUDIENCE],
                            "serviceAccountRef": {"name": "cluster-sa", "namespace": other},
                        }
                    },
                    "allowedNamespaces": {"names": [other]},
                },
            }
        )
        harness.secret_sync(
            control_plane,
            namespace,
            "denied",
            sources=[source(path)],
            identity=f"only-{other}",
            identity_kind="ClusterMachineIdentity",
        )
        harness.wait_reason(control_plane, namespace, "denied", "IdentityNotAllowed")
        harness.secret_sync(
            control_plane,
            other,
            "allowed",
            sources=[source(path)],
            identity=f"only-{other}",
            identity_kind="ClusterMachineIdentity",
        )
        eventually(
            lambda: secret_data(control_plane, other, "allowed") == {"K": "isolated-value-1"},
            what="the admitted namespace to sync",
        )
        assert secret_data(control_plane, namespace, "denied") is None
    finally:
        control_plane.kubectl("delete", "clustermachineidentity", f"only-{other}", check=False)
        control_plane.kubectl("delete", "namespace", other, "--wait=false", check=False)


def test_one_login_serves_every_secretsync_of_an_identity(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    """Universal auth end to end, and the shared session: 20 SecretSyncs arriving at once, 1 login."""
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "shared-login-value-1")
    route = "POST /api/v1/auth/universal-auth/login"
    before = service.stats()["routes"].get(route, 0)
    harness.universal_identity(control_plane, namespace, "uni")
    items = [
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "SecretSync",
            "metadata": {"name": f"s{i:02d}", "namespace": namespace},
            "spec": {"identityRef": {"kind": "MachineIdentity", "name": "uni"}, "sources": [source(path)]},
        }
        for i in range(20)
    ]
    control_plane.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    for i in range(20):
        eventually(
            lambda i=i: secret_data(control_plane, namespace, f"s{i:02d}") == {"K": "shared-login-value-1"},
            what=f"s{i:02d}",
        )
    assert service.stats()["routes"].get(route, 0) - before == 1
    identity = harness.ready(control_plane, namespace, "uni", kind="machineidentity")
    assert identity is not None and identity["status"] == "True"

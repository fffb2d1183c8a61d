"""A tenant who may only create our kinds writes through the operator
into no Secret they could not write themselves, and no mistake at the service empties a Secret.

The tenant (``hostile``) has exactly a namespace user's rights: it cannot read or write Secrets.
The Secrets it aims at are created by the admin. Each case compares the target's
resourceVersion and data before and after: "unchanged" means not written at all.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import harness
import pytest
import tenant
from harness import OPERATOR_NAMESPACE, PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

MERGE_FROM = "secretferry.io/merge-from"
HMAC_KEY_SECRET = "secretferry-hmac-key"  # the operator's default settings.hmac_key_secret
# The test operator retries refused targets after at most 3 s (SECRETFERRY_BACKOFF_MAX_SECONDS):
# waiting a little longer than that lets at least one retry pass before "unchanged" is judged.
RETRY_WINDOW_SECONDS = 4.0


def sync_manifest(
    namespace: str, name: str, *, sources: list[dict[str, Any]], target: dict[str, Any], **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"identityRef": {"name": "ferry"}, "sources": sources, "target": target, **spec},
    }


def admin_secret(
    cp: ControlPlane,
    namespace: str,
    name: str,
    data: dict[str, str],
    *,
    type_: str = "Opaque",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Secret the admin creates (the tenant cannot); its values are watched for leaks."""
    harness.VALUES.update(v for v in data.values() if len(v) >= 6)
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": type_,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels or {},
                "annotations": annotations or {},
            },
            "stringData": data,
        }
    )
    return snapshot(cp, namespace, name)


def snapshot(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    obj = harness.get(cp, "secret", name, namespace)
    assert obj is not None, f"Secret {namespace}/{name} is missing"
    meta = obj["metadata"]
    return {
        "uid": meta["uid"],
        "resourceVersion": meta["resourceVersion"],
        "type": obj.get("type"),
        "data": obj.get("data") or {},
    }


def assert_untouched(cp: ControlPlane, namespace: str, name: str, before: dict[str, Any]) -> None:
    assert snapshot(cp, namespace, name) == before, f"Secret {namespace}/{name} was written"


def refused(cp: ControlPlane, namespace: str, name: str, reason: str) -> dict[str, Any]:
    cond = harness.wait_reason(cp, namespace, name, reason)
    assert cond["status"] == "False"
    return cond


def test_merge_into_a_secret_that_did_not_opt_in_writes_nothing(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "HEAP", "heap-size-value-1")
    # Templates allowed: the worst case, and the Merge opt-in is what must refuse.
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    before = admin_secret(
        control_plane, namespace, "db-creds", {"username": "app", "password": "db-password-not-ours-1"}
    )
    inject = {
        "name": "db-creds",
        "creationPolicy": "Merge",
        "template": {"data": {"JAVA_TOOL_OPTIONS": "-javaagent:/tmp/evil.jar"}},
    }
    hostile.apply(sync_manifest(namespace, "inject", sources=[source(path)], target=inject))
    cond = refused(control_plane, namespace, "inject", "TargetNotOptedIn")
    assert MERGE_FROM in cond["message"] and "inject" in cond["message"]
    time.sleep(RETRY_WINDOW_SECONDS)
    assert_untouched(control_plane, namespace, "db-creds", before)

    # An opt-in for another SecretSync admits no other: not even one of the same namespace.
    control_plane.kubectl("annotate", "secret", "db-creds", "-n", namespace, f"{MERGE_FROM}=app-config")
    before = snapshot(control_plane, namespace, "db-creds")
    hostile.apply(
        sync_manifest(
            namespace, "inject", sources=[source(path)], target=inject, refreshInterval="2s"
        )  # a spec change: a fresh reconcile that sees the annotation
    )
    eventually(
        lambda: (harness.ready(control_plane, namespace, "inject") or {}).get("observedGeneration") == 2,
        what="the changed SecretSync to be reconciled",
    )
    refused(control_plane, namespace, "inject", "TargetNotOptedIn")
    time.sleep(RETRY_WINDOW_SECONDS)
    assert_untouched(control_plane, namespace, "db-creds", before)


def test_merge_into_a_secret_whose_owner_opted_in(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "HEAP", "heap-size-value-2")
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    admin_secret(
        control_plane, namespace, "db-creds", {"username": "app", "password": "db-password-not-ours-2"}
    )
    hostile.apply(
        sync_manifest(
            namespace,
            "inject",
            sources=[source(path)],
            target={
                "name": "db-creds",
                "creationPolicy": "Merge",
                "template": {"data": {"JAVA_TOOL_OPTIONS": "-Xmx{{ HEAP }}"}},
            },
        )
    )
    refused(control_plane, namespace, "inject", "TargetNotOptedIn")
    # Whoever may write db-creds opts it in, naming this SecretSync among others.
    control_plane.kubectl("annotate", "secret", "db-creds", "-n", namespace, f"{MERGE_FROM}=other, inject")
    eventually(
        lambda: (
            secret_data(control_plane, namespace, "db-creds")
            == {
                "username": "app",
                "password": "db-password-not-ours-2",
                "JAVA_TOOL_OPTIONS": "-Xmxheap-size-value-2",
            }
        ),
        what="the merge after the opt-in",
    )
    cond = harness.wait_reason(control_plane, namespace, "inject", "Synced")
    assert cond["status"] == "True"
    obj = harness.get(control_plane, "secret", "db-creds", namespace)
    assert obj is not None and obj["type"] == "Opaque"
    assert "ownerReferences" not in obj["metadata"]


def test_a_missing_path_leaves_a_full_secret_as_it_is(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "DB_USER", "empty-guard-user-1")
    service.set_secret(PROJECT_ID, "dev", path, "DB_PASS", "empty-guard-pass-1")
    harness.kubernetes_identity(control_plane, namespace)
    target = {"deletionPolicy": "Delete"}
    hostile.apply(
        sync_manifest(namespace, "app", sources=[source(path)], target=target, refreshInterval="2s")
    )
    full = {"DB_USER": "empty-guard-user-1", "DB_PASS": "empty-guard-pass-1"}
    eventually(lambda: secret_data(control_plane, namespace, "app") == full, what="the first sync")
    before = snapshot(control_plane, namespace, "app")

    # A path that does not exist answers like an empty folder: the Secret stays as it is.
    missing = [source(f"{path}-does-not-exist")]
    hostile.apply(sync_manifest(namespace, "app", sources=missing, target=target, refreshInterval="2s"))
    cond = refused(control_plane, namespace, "app", "SourceEmpty")
    assert "lists no secrets" in cond["message"] and "allowEmpty" in cond["message"]
    time.sleep(RETRY_WINDOW_SECONDS)
    assert_untouched(control_plane, namespace, "app", before)
    status = (harness.get(control_plane, "secretsync", "app", namespace) or {})["status"]
    assert status["syncedKeys"] == ["DB_PASS", "DB_USER"]  # still what the Secret holds

    # Back to the real path; then every secret there is deleted: the same, no emptying.
    hostile.apply(
        sync_manifest(namespace, "app", sources=[source(path)], target=target, refreshInterval="2s")
    )
    harness.wait_reason(control_plane, namespace, "app", "Synced")
    # Deleting one key is an ordinary change (deletionPolicy: Delete removes it); the last one
    # would empty the scope, and that is refused.
    service.delete_secret(PROJECT_ID, "dev", path, "DB_USER")
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"DB_PASS": "empty-guard-pass-1"},
        what="the first deletion to be synced",
    )
    one_left = snapshot(control_plane, namespace, "app")
    service.delete_secret(PROJECT_ID, "dev", path, "DB_PASS")
    refused(control_plane, namespace, "app", "SourceEmpty")
    time.sleep(RETRY_WINDOW_SECONDS)
    assert_untouched(control_plane, namespace, "app", one_left)

    # Only an explicit allowEmpty empties it.
    hostile.apply(
        sync_manifest(
            namespace, "app", sources=[source(path)], target=target, refreshInterval="2s", allowEmpty=True
        )
    )
    eventually(lambda: secret_data(control_plane, namespace, "app") == {}, what="allowEmpty to empty it")
    assert harness.wait_reason(control_plane, namespace, "app", "Synced")["status"] == "True"


def test_a_first_sync_of_a_missing_path_creates_nothing(
    control_plane: ControlPlane, operator: OperatorProcess, namespace: str, hostile: tenant.Tenant
) -> None:
    harness.kubernetes_identity(control_plane, namespace)
    hostile.apply(sync_manifest(namespace, "app", sources=[source(f"/{namespace}-nothing-here")], target={}))
    refused(control_plane, namespace, "app", "SourceEmpty")
    assert harness.get(control_plane, "secret", "app", namespace) is None


def test_a_listing_cut_at_the_depth_limit_is_not_synced(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "TOP", "depth-top-value-1")
    harness.kubernetes_identity(control_plane, namespace)
    manifest = sync_manifest(
        namespace,
        "tree",
        sources=[source(path, recursive=True)],
        target={"deletionPolicy": "Delete"},
        refreshInterval="2s",
    )
    hostile.apply(manifest)
    eventually(
        lambda: secret_data(control_plane, namespace, "tree") == {"TOP": "depth-top-value-1"},
        what="first sync",
    )
    before = snapshot(control_plane, namespace, "tree")
    # 20 folders below the source's path is as deep as the service lists; 21 is cut silently.
    deep = path + "".join(f"/l{i}" for i in range(1, 21))
    service.set_secret(PROJECT_ID, "dev", deep, "AT_LIMIT", "depth-limit-value-1")
    service.set_secret(PROJECT_ID, "dev", deep + "/l21", "CUT", "depth-cut-value-1")
    cond = refused(control_plane, namespace, "tree", "SourceTooDeep")
    assert "depth limit of 20" in cond["message"]
    assert_untouched(control_plane, namespace, "tree", before)


def test_a_secret_of_another_type_labelled_as_ours_is_not_replaced(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "type-guard-value-1")
    harness.kubernetes_identity(control_plane, namespace)
    before = admin_secret(
        control_plane,
        namespace,
        "legacy",
        {"username": "admin", "password": "basic-auth-not-ours-1"},
        type_="kubernetes.io/basic-auth",
        labels={"app.kubernetes.io/managed-by": "secretferry", "secretferry.io/sync": "legacy"},
    )
    hostile.apply(sync_manifest(namespace, "legacy", sources=[source(path)], target={}))
    cond = refused(control_plane, namespace, "legacy", "TargetConflict")
    assert "kubernetes.io/basic-auth" in cond["message"] and "password" not in cond["message"]
    time.sleep(RETRY_WINDOW_SECONDS)
    assert_untouched(control_plane, namespace, "legacy", before)


def test_a_type_change_replaces_a_secret_holding_only_our_keys(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    """The guard above does not stop a legitimate type change of a Secret we wrote entirely."""
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "username", "retype-user-1")
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(control_plane, namespace, "retype", sources=[source(path)])
    eventually(
        lambda: secret_data(control_plane, namespace, "retype") == {"username": "retype-user-1"}, what="first"
    )
    before = snapshot(control_plane, namespace, "retype")
    harness.secret_sync(
        control_plane,
        namespace,
        "retype",
        sources=[source(path)],
        target={"type": "kubernetes.io/basic-auth"},
    )
    eventually(
        lambda: (
            (harness.get(control_plane, "secret", "retype", namespace) or {}).get("type")
            == "kubernetes.io/basic-auth"
        ),
        what="the Secret replaced with the new type",
    )
    after = snapshot(control_plane, namespace, "retype")
    assert after["uid"] != before["uid"] and after["data"] == before["data"]


@pytest.fixture
def operator_namespace_sync(control_plane: ControlPlane) -> Iterator[str]:
    """An identity in the operator's own namespace (only an admin could put one there)."""
    name = "guard-ferry"
    harness.kubernetes_identity(control_plane, OPERATOR_NAMESPACE, name=name, sa=f"{name}-sa")
    try:
        yield name
    finally:
        for kind, obj in (
            ("secretsync", "guard-owner"),
            ("secretsync", "guard-merge"),
            ("machineidentity", name),
            ("serviceaccount", f"{name}-sa"),
        ):
            control_plane.kubectl("delete", kind, obj, "-n", OPERATOR_NAMESPACE, "--ignore-not-found")


def test_protected_secrets_are_refused(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
    operator_namespace_sync: str,
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "protected-guard-value-1")
    harness.kubernetes_identity(control_plane, namespace)
    ours = {"app.kubernetes.io/managed-by": "secretferry", "secretferry.io/sync": "token"}

    # A ServiceAccount token Secret, labelled as ours and opted in to Merge: neither counts. (The
    # local control plane runs no token controller, so nothing else fills it in meanwhile.)
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": {
                "name": "token",
                "namespace": namespace,
                "labels": ours,
                "annotations": {
                    "kubernetes.io/service-account.name": tenant.TENANT_SA,
                    MERGE_FROM: "token-merge",
                },
            },
        }
    )
    # A Helm release record, opted in too.
    admin_secret(
        control_plane,
        namespace,
        "sh.helm.release.v1.web.v1",
        {"release": "helm-release-record-1"},
        type_="helm.sh/release.v1",
        labels={"owner": "helm"},
        annotations={MERGE_FROM: "helm-merge"},
    )
    token_before = snapshot(control_plane, namespace, "token")
    helm_before = snapshot(control_plane, namespace, "sh.helm.release.v1.web.v1")
    hostile.apply(sync_manifest(namespace, "token", sources=[source(path)], target={}))
    hostile.apply(
        sync_manifest(
            namespace,
            "token-merge",
            sources=[source(path)],
            target={"name": "token", "creationPolicy": "Merge"},
        )
    )
    hostile.apply(
        sync_manifest(
            namespace,
            "helm-merge",
            sources=[source(path)],
            target={"name": "sh.helm.release.v1.web.v1", "creationPolicy": "Merge"},
        )
    )
    for name in ("token", "token-merge", "helm-merge"):
        refused(control_plane, namespace, name, "TargetProtected")

    # The operator's HMAC key, named by SecretSyncs in the operator's namespace.
    key_before = snapshot(control_plane, OPERATOR_NAMESPACE, HMAC_KEY_SECRET)
    for name, target in (
        ("guard-owner", {"name": HMAC_KEY_SECRET}),
        ("guard-merge", {"name": HMAC_KEY_SECRET, "creationPolicy": "Merge"}),
    ):
        harness.secret_sync(
            control_plane,
            OPERATOR_NAMESPACE,
            name,
            sources=[source(path)],
            target=target,
            identity=operator_namespace_sync,
        )
    for name in ("guard-owner", "guard-merge"):
        cond = refused(control_plane, OPERATOR_NAMESPACE, name, "TargetProtected")
        assert "HMAC key" in cond["message"]

    time.sleep(RETRY_WINDOW_SECONDS)
    assert_untouched(control_plane, namespace, "token", token_before)
    assert_untouched(control_plane, namespace, "sh.helm.release.v1.web.v1", helm_before)
    assert_untouched(control_plane, OPERATOR_NAMESPACE, HMAC_KEY_SECRET, key_before)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ({"type": "kubernetes.io/service-account-token"}, "cannot be synced"),
        ({"type": "helm.sh/release.v1"}, "cannot be synced"),
        ({"annotations": {MERGE_FROM: "inject"}}, "is set by the target's owner"),
    ],
)
def test_the_schema_refuses_protected_types_and_a_self_made_opt_in(
    namespace: str, hostile: tenant.Tenant, target: dict[str, Any], message: str
) -> None:
    """The apiserver itself refuses these (CEL), before the operator sees anything."""
    manifest = sync_manifest(namespace, "refused", sources=[source("/")], target=target)
    with pytest.raises(RuntimeError, match=message):
        hostile.apply(manifest)

"""PushSecret on the real control plane and the dev server: push, update, conflicts under
IfNotExists and Replace, deletionPolicy for a removed key and for the deleted PushSecret, the
tenant's two exfiltration attacks replayed, and a push and a pull of one folder that settle.

Writes are counted at the service (the dev server's per-route stats), never assumed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import harness
import httpx
import pytest
import tenant
from harness import IDENTITY_ID, PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
ALLOW_PUSH = "secretferry.io/allow-push"
ALLOW_PUSH_TO = "secretferry.io/allow-push-to"
WRITE_ROUTES = (
    "POST /api/v4/secrets/{secretName}",
    "PATCH /api/v4/secrets/{secretName}",
    "DELETE /api/v4/secrets/{secretName}",
    "POST /api/v3/secrets/raw/{secretName}",
    "PATCH /api/v3/secrets/raw/{secretName}",
    "DELETE /api/v3/secrets/raw/{secretName}",
)
QUIET_SECONDS = 3.0  # "at rest": long enough for any echo (watch, stream, retry) to have shown


# --- helpers --------------------------------------------------------------------------------------


def remote(service: DevServer, path: str) -> dict[str, str]:
    """The folder's own secrets as the service holds them (read with a token of the seed's admin
    identity: not through the operator)."""
    token = service.issue_token(IDENTITY_ID)
    answer = httpx.get(
        f"{service.base_url}/api/v4/secrets",
        params={
            "projectId": PROJECT_ID,
            "environment": "dev",
            "secretPath": path,
            "viewSecretValue": "true",
            "expandSecretReferences": "false",
            "includeImports": "false",
            "include_imports": "false",
        },
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    answer.raise_for_status()
    return {s["secretKey"]: s["secretValue"] for s in answer.json()["secrets"]}


def writes(service: DevServer) -> dict[str, int]:
    routes: dict[str, int] = service.stats()["routes"]
    return {r: n for r, n in routes.items() if r in WRITE_ROUTES and n}


def api_calls(service: DevServer) -> int:
    routes: dict[str, int] = service.stats()["routes"]
    return sum(n for r, n in routes.items() if " /api/" in r)


def folder(service: DevServer, path: str) -> None:
    """Make the folder exist (a push writes into an existing folder) with a key of its own."""
    service.set_secret(PROJECT_ID, "dev", path, "UNRELATED", "placeholder-value-0")


def place(path: str, project: str = PROJECT_ID) -> str:
    """An ``allow-push-to`` entry: ``<project>/dev<path>``."""
    return f"{project}/dev{path}"


def source_secret(
    cp: ControlPlane,
    namespace: str,
    name: str,
    data: dict[str, str],
    *,
    allow: str | None,
    to: str | None = None,
) -> None:
    """A Secret the admin creates, opted in to PushSecrets ``allow`` (names or ``*``) for the
    places ``to`` (``allow-push-to``)."""
    harness.VALUES.update(v for v in data.values() if len(v) >= 6)
    annotations = {ALLOW_PUSH: allow} if allow is not None else {}
    if to is not None:
        annotations[ALLOW_PUSH_TO] = to
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
            "stringData": data,
        }
    )


def push_manifest(namespace: str, name: str, path: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "identityRef": {"name": "ferry"},
        "selector": {"secret": {"name": name}},
        "destination": {"projectId": PROJECT_ID, "environment": "dev", "path": path},
    }
    body.update(spec)
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "PushSecret",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


def condition(cp: ControlPlane, namespace: str, name: str, type_: str = "Ready") -> dict[str, Any]:
    obj = harness.get(cp, "pushsecret", name, namespace) or {}
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return {}


def wait_push_reason(
    cp: ControlPlane, namespace: str, name: str, reason: str, type_: str = "Ready"
) -> dict[str, Any]:
    return eventually(
        lambda: (c := condition(cp, namespace, name, type_)) and c.get("reason") == reason and c,
        what=f"PushSecret {namespace}/{name} {type_} reason {reason}",
        timeout=30,
    )


def set_value(cp: ControlPlane, namespace: str, name: str, key: str, value: str) -> None:
    harness.VALUES.add(value)
    cp.kubectl(
        "patch",
        "secret",
        name,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        f'{{"stringData":{{"{key}":"{value}"}}}}',
    )


# --- behaviour ------------------------------------------------------------------------------------


def test_push_then_one_write_per_changed_key_and_no_calls_at_rest(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    folder(service, path)
    harness.kubernetes_identity(control_plane, namespace)
    source_secret(
        control_plane,
        namespace,
        "db",
        {"user": "app-user-1", "password": "push-password-1", "skip": "not-pushed-1"},
        allow="db",
        to=place(path),
    )
    control_plane.apply(
        push_manifest(
            namespace,
            "db",
            path,
            keys=["user", "password"],
            rewrite=[{"transform": "Upper"}, {"addPrefix": "DB_"}],
        )
    )
    wait_push_reason(control_plane, namespace, "db", "Pushed")
    assert remote(service, path) == {
        "UNRELATED": "placeholder-value-0",
        "DB_USER": "app-user-1",
        "DB_PASSWORD": "push-password-1",
    }
    obj = harness.get(control_plane, "pushsecret", "db", namespace) or {}
    status = obj["status"]
    assert status["pushedKeyCount"] == 2 and {p["key"] for p in status["pushedKeys"]} == {
        "DB_USER",
        "DB_PASSWORD",
    }
    assert status["destination"] == f"{PROJECT_ID}/dev{path}"

    time.sleep(1)
    service.reset_stats()
    started = time.monotonic()
    set_value(control_plane, namespace, "db", "password", "push-password-2")
    eventually(
        lambda: remote(service, path).get("DB_PASSWORD") == "push-password-2",
        what="the change",
        interval=0.05,
    )
    took = time.monotonic() - started
    # No timing threshold: this PushSecret has no refreshInterval, so only the Secret watch can
    # have carried the change; the figure is printed.
    print(f"Secret change -> service: {took:.2f} s")
    time.sleep(QUIET_SECONDS)
    assert writes(service) == {"PATCH /api/v4/secrets/{secretName}": 1}

    # At rest: no call at all (remote() itself is the only caller; measured before and after).
    service.reset_stats()
    time.sleep(QUIET_SECONDS)
    assert api_calls(service) == 0

    # Changes faster than our status patch echoes back: still ours, never a conflict.
    for i in range(3, 6):
        set_value(control_plane, namespace, "db", "password", f"push-password-{i}")
    eventually(lambda: remote(service, path).get("DB_PASSWORD") == "push-password-5", what="the last change")
    time.sleep(1)
    assert condition(control_plane, namespace, "db", "Conflict").get("status") == "False"
    assert condition(control_plane, namespace, "db")["reason"] == "Pushed"


def test_ifnotexists_leaves_a_changed_value_and_replace_overwrites_it(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    folder(service, path)
    harness.kubernetes_identity(control_plane, namespace)
    source_secret(control_plane, namespace, "api", {"TOKEN": "ours-token-value-1"}, allow="*", to=place(path))
    control_plane.apply(push_manifest(namespace, "api", path, updatePolicy="IfNotExists"))
    wait_push_reason(control_plane, namespace, "api", "Pushed")
    service.set_secret(PROJECT_ID, "dev", path, "TOKEN", "theirs-token-value-1")  # behind our back
    set_value(control_plane, namespace, "api", "TOKEN", "ours-token-value-2")  # wakes the PushSecret
    cond = wait_push_reason(control_plane, namespace, "api", "PushConflict")
    assert cond["status"] == "False" and "TOKEN" in cond["message"]
    assert condition(control_plane, namespace, "api", "Conflict")["status"] == "True"
    assert remote(service, path)["TOKEN"] == "theirs-token-value-1"
    eventually(
        lambda: "PushConflict" in control_plane.kubectl("get", "events", "-n", namespace, "-o", "json"),
        what="a Warning Event PushConflict",
    )

    control_plane.apply(push_manifest(namespace, "api", path, updatePolicy="Replace"))
    wait_push_reason(control_plane, namespace, "api", "PushConflictReplaced", type_="Conflict")
    wait_push_reason(control_plane, namespace, "api", "Pushed")
    assert remote(service, path)["TOKEN"] == "ours-token-value-2"


def test_deletion_policy_for_a_removed_key_and_the_deleted_pushsecret(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    harness.kubernetes_identity(control_plane, namespace)
    for policy in ("Delete", "Retain"):
        path = f"/{namespace}-{policy.lower()}"
        folder(service, path)
        name = f"p-{policy.lower()}"
        source_secret(
            control_plane,
            namespace,
            name,
            {"A": f"a-{policy}-value", "B": f"b-{policy}-value"},
            allow=name,
            to=place(path),
        )
        control_plane.apply(push_manifest(namespace, name, path, deletionPolicy=policy))
        wait_push_reason(control_plane, namespace, name, "Pushed")
        finalizers = (harness.get(control_plane, "pushsecret", name, namespace) or {})["metadata"].get(
            "finalizers"
        )
        assert ("secretferry.io/push-finalizer" in (finalizers or [])) is (policy == "Delete")
        assert {"A", "B"} <= set(remote(service, path))

        control_plane.kubectl(
            "patch",
            "secret",
            name,
            "-n",
            namespace,
            "--type=json",
            "-p",
            '[{"op":"remove","path":"/data/B"}]',
        )
        if policy == "Delete":
            eventually(lambda p=path: "B" not in remote(service, p), what="B deleted at the service")
        else:
            eventually(
                lambda n=name: (
                    (harness.get(control_plane, "pushsecret", n, namespace) or {})
                    .get("status", {})
                    .get("pushedKeyCount")
                    == 1
                ),
                what="B forgotten",
            )
            assert "B" in remote(service, path)

        control_plane.kubectl("delete", "pushsecret", name, "-n", namespace, "--wait=true", "--timeout=30s")
        left = remote(service, path)
        assert ("A" in left) is (policy == "Retain")
        assert "UNRELATED" in left  # never ours


def test_push_by_project_slug_right_after_its_identity(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    """The identity and the PushSecret created together: the identity's arrival queues the
    PushSecret at once (not after a backoff), and the slug is resolved like a SecretSync's."""
    harness.kubernetes_identity(control_plane, namespace)
    source_secret(
        control_plane,
        namespace,
        "slug",
        {"S": "slug-push-value-1"},
        allow="slug",
        to=place(f"/{namespace}-slug", harness.PROJECT_SLUG),
    )
    path = f"/{namespace}-slug"
    folder(service, path)
    manifest = push_manifest(namespace, "slug", path)
    manifest["spec"]["destination"] = {
        "projectSlug": harness.PROJECT_SLUG,
        "environment": "dev",
        "path": path,
    }
    started = time.monotonic()
    control_plane.apply(manifest)
    cond = wait_push_reason(control_plane, namespace, "slug", "Pushed")
    assert time.monotonic() - started < 5
    assert cond["message"] == f"1 keys at {harness.PROJECT_SLUG}/dev{path}"
    assert remote(service, path)["S"] == "slug-push-value-1"


def test_refresh_interval_repairs_a_value_changed_at_the_service(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    """With spec.refreshInterval the destination is compared again on a timer (one list), and a
    value changed there is put back under Replace, without any change of the source."""
    path = f"/{namespace}-refresh"
    folder(service, path)
    harness.kubernetes_identity(control_plane, namespace)
    source_secret(control_plane, namespace, "fresh", {"F": "refresh-ours-1"}, allow="fresh", to=place(path))
    control_plane.apply(push_manifest(namespace, "fresh", path, refreshInterval="2s"))
    wait_push_reason(control_plane, namespace, "fresh", "Pushed")
    service.set_secret(PROJECT_ID, "dev", path, "F", "refresh-theirs-1")
    eventually(lambda: remote(service, path).get("F") == "refresh-ours-1", what="the repair", timeout=15)
    # The Conflict condition says so until the next pass (2 s later) finds nothing; the Event stays.
    eventually(
        lambda: (
            "PushConflictReplaced" in control_plane.kubectl("get", "events", "-n", namespace, "-o", "json")
        ),
        what="a Warning Event PushConflictReplaced",
    )


STAND_IN_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "passwordgenerators.secretferry.io"},
    "spec": {
        "group": "secretferry.io",
        "scope": "Namespaced",
        "names": {
            "kind": "PasswordGenerator",
            "plural": "passwordgenerators",
            "singular": "passwordgenerator",
        },
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}


def test_push_from_a_generator(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    """The generators contract (brief): the generator's ``status.secretName`` names a Secret with
    key ``password``. Without the `gen` branch's CRD a stand-in plays the generator (its status
    set by hand); with it, the real generator does, and only the opt-in is added here."""
    real = (REPO / "crds" / "passwordgenerators.secretferry.io.yaml").exists()
    if not real:
        control_plane.apply(STAND_IN_CRD)
        control_plane.kubectl("wait", "--for=condition=Established", "crd/passwordgenerators.secretferry.io")
    path = f"/{namespace}-gen"
    folder(service, path)
    harness.kubernetes_identity(control_plane, namespace)
    control_plane.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "PasswordGenerator",
            "metadata": {"name": "bootstrap", "namespace": namespace},
            "spec": {},
        }
    )
    push = push_manifest(namespace, "gen-push", path)
    push["spec"]["selector"] = {"generatorRef": {"kind": "PasswordGenerator", "name": "bootstrap"}}
    control_plane.apply(push)
    if not real:
        wait_push_reason(control_plane, namespace, "gen-push", "PushGeneratorNotReady")
        source_secret(
            control_plane, namespace, "bootstrap-password", {"password": "generated-value-1"}, allow=None
        )
        control_plane.kubectl(
            "patch",
            "passwordgenerator",
            "bootstrap",
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            '{"status":{"secretName":"bootstrap-password"}}',
        )
    secret_name = eventually(
        lambda: (
            (harness.get(control_plane, "passwordgenerator", "bootstrap", namespace) or {}).get("status")
            or {}
        ).get("secretName"),
        what="the generator's Secret",
    )
    # Not opted in yet: refused like any Secret; then its owner opts in.
    wait_push_reason(control_plane, namespace, "gen-push", "PushSourceNotOptedIn")
    control_plane.kubectl(
        "annotate",
        "secret",
        secret_name,
        "-n",
        namespace,
        f"{ALLOW_PUSH}=gen-push",
        f"{ALLOW_PUSH_TO}={place(path)}",
    )
    wait_push_reason(control_plane, namespace, "gen-push", "Pushed")
    value = (secret_data(control_plane, namespace, secret_name) or {})["password"]
    assert remote(service, path)["password"] == value


# --- tenant attacks ------------------------------------------------------------------------------


def test_tenant_cannot_push_a_secret_that_did_not_opt_in(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    path = f"/{namespace}-loot"
    folder(service, path)
    harness.kubernetes_identity(control_plane, namespace)
    assert not hostile.can("get", "secrets")
    source_secret(control_plane, namespace, "admin-db", {"password": "admin-only-password-1"}, allow=None)
    source_secret(
        control_plane,
        namespace,
        "other",
        {"password": "other-only-password-1"},
        allow="someone-else",
        to=place(path),
    )
    service.reset_stats()
    hostile.apply(push_manifest(namespace, "admin-db", path))
    hostile.apply(push_manifest(namespace, "other", path))
    hostile.apply(push_manifest(namespace, "missing", path))
    for name in ("admin-db", "other", "missing"):
        cond = wait_push_reason(control_plane, namespace, name, "PushSourceNotOptedIn")
        assert "does not exist or has not opted in" in cond["message"]
    time.sleep(QUIET_SECONDS)
    assert writes(service) == {}
    assert set(remote(service, path)) == {"UNRELATED"}


def test_tenant_cannot_retarget_a_pushsecret_the_secret_opted_in_to(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    """The Secret's owner opted in to PushSecret ``publish`` writing to ``/<ns>-approved``. The tenant
    may edit that PushSecret: pointed at a folder they can read, it is refused; nothing is sent."""
    approved, loot = f"/{namespace}-approved", f"/{namespace}-tenant-readable"
    folder(service, approved)
    folder(service, loot)
    harness.kubernetes_identity(control_plane, namespace)
    source_secret(
        control_plane,
        namespace,
        "publish",
        {"key": "approved-only-value-1"},
        allow="publish",
        to=place(approved),
    )
    control_plane.apply(push_manifest(namespace, "publish", approved))
    wait_push_reason(control_plane, namespace, "publish", "Pushed")
    service.reset_stats()
    hostile.apply(push_manifest(namespace, "publish", loot))
    cond = wait_push_reason(control_plane, namespace, "publish", "PushSourceNotOptedIn")
    assert "allow-push-to" in cond["message"]
    # "/<ns>-approved-x" shares the approved prefix's text, not its segment.
    hostile.apply(push_manifest(namespace, "publish", approved + "-x"))
    eventually(
        lambda: (
            (c := condition(control_plane, namespace, "publish")).get("observedGeneration") == 3
            and c.get("reason") == "PushSourceNotOptedIn"
        ),
        what="the second retarget refused",
    )
    time.sleep(QUIET_SECONDS)
    assert writes(service) == {}
    assert set(remote(service, loot)) == {"UNRELATED"}


def test_tenant_cannot_push_with_a_cluster_identity_outside_its_allow_list(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    allowed, outside = f"/{namespace}-allowed", f"/{namespace}-outside"
    folder(service, allowed)
    folder(service, outside)
    token_secret = f"push-token-{namespace}"
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": token_secret, "namespace": harness.OPERATOR_NAMESPACE},
            "stringData": {"token": service.issue_token(IDENTITY_ID, accessTokenTTL=3600)},
        }
    )
    cmid = f"pusher-{namespace}"
    control_plane.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "ClusterMachineIdentity",
            "metadata": {"name": cmid},
            "spec": {
                "auth": {
                    "accessToken": {
                        "secretRef": {
                            "name": token_secret,
                            "key": "token",
                            "namespace": harness.OPERATOR_NAMESPACE,
                        }
                    }
                },
                "pushAllowed": [{"projectId": PROJECT_ID, "environment": "dev", "pathPrefix": allowed}],
            },
        }
    )
    try:
        # The Secret opted in: only the allow-list can refuse.
        source_secret(
            control_plane,
            namespace,
            "cert",
            {"tls.key": "cluster-push-value-1"},
            allow="*",
            to=place(allowed),
        )
        service.reset_stats()
        ref = {"kind": "ClusterMachineIdentity", "name": cmid}
        hostile.apply(push_manifest(namespace, "cert", outside, identityRef=ref))
        cond = wait_push_reason(control_plane, namespace, "cert", "PushNotAllowed")
        assert "pushAllowed" in cond["message"]
        time.sleep(QUIET_SECONDS)
        assert writes(service) == {}
        assert set(remote(service, outside)) == {"UNRELATED"}
        # "/<ns>-allowed-x" shares the prefix's text, not its segment.
        hostile.apply(push_manifest(namespace, "cert", allowed + "-x", identityRef=ref))
        eventually(
            lambda: (
                (c := condition(control_plane, namespace, "cert")).get("observedGeneration") == 2
                and c.get("reason") == "PushNotAllowed"
            ),
            what="the second destination refused",
        )
        # Inside the list the same PushSecret works.
        hostile.apply(push_manifest(namespace, "cert", allowed, identityRef=ref))
        wait_push_reason(control_plane, namespace, "cert", "Pushed")
        assert remote(service, allowed)["tls.key"] == "cluster-push-value-1"
    finally:
        control_plane.kubectl("delete", "clustermachineidentity", cmid, check=False)


# --- a push and a pull of one folder ---------------------------------------------------------------


def test_a_push_and_a_pull_of_one_folder_settle(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    """One change in the pushed Secret: one write at the service, one write of the pulled Secret
    (through the event stream: refreshInterval is hours), then nothing."""
    path = f"/{namespace}-pp"
    folder(service, path)
    harness.kubernetes_identity(control_plane, namespace)
    source_secret(
        control_plane, namespace, "shared", {"SHARED": "ping-pong-value-1"}, allow="shared", to=place(path)
    )
    control_plane.apply(push_manifest(namespace, "shared", path))
    wait_push_reason(control_plane, namespace, "shared", "Pushed")
    harness.secret_sync(control_plane, namespace, "pulled", sources=[source(path)], refreshInterval="3h")
    eventually(
        lambda: (secret_data(control_plane, namespace, "pulled") or {}).get("SHARED") == "ping-pong-value-1",
        what="the pull",
    )
    eventually(
        lambda: (
            ((harness.get(control_plane, "secretsync", "pulled", namespace) or {}).get("status") or {}).get(
                "updateMode"
            )
            == "Streaming"
        ),
        what="the pull to stream",
    )
    time.sleep(1)
    service.reset_stats()
    before = _target_writes(operator)
    started = time.monotonic()
    set_value(control_plane, namespace, "shared", "SHARED", "ping-pong-value-2")
    eventually(
        lambda: (secret_data(control_plane, namespace, "pulled") or {}).get("SHARED") == "ping-pong-value-2",
        what="push → service → stream → pull",
        interval=0.05,
    )
    round_trip = time.monotonic() - started
    rv = (harness.get(control_plane, "secret", "pulled", namespace) or {})["metadata"]["resourceVersion"]
    time.sleep(QUIET_SECONDS)
    assert writes(service) == {"PATCH /api/v4/secrets/{secretName}": 1}
    assert _target_writes(operator) - before == 1
    assert (harness.get(control_plane, "secret", "pulled", namespace) or {})["metadata"][
        "resourceVersion"
    ] == rv
    assert round_trip < 2.0, f"round trip {round_trip:.2f} s"


def _target_writes(op: OperatorProcess) -> float:
    total = 0.0
    for line in op.metrics().splitlines():
        if line.startswith("secretferry_target_writes_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_a_push_of_the_secret_a_sync_writes_from_the_same_folder_is_refused(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}-loop"
    folder(service, path)
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(control_plane, namespace, "looped", sources=[source(path)], refreshInterval="3h")
    eventually(lambda: secret_data(control_plane, namespace, "looped") is not None, what="the pull")
    control_plane.kubectl(
        "annotate",
        "secret",
        "looped",
        "-n",
        namespace,
        f"{ALLOW_PUSH}=looped",
        f"{ALLOW_PUSH_TO}={place(path)}",
    )
    service.reset_stats()
    control_plane.apply(push_manifest(namespace, "looped", path))
    cond = wait_push_reason(control_plane, namespace, "looped", "PushLoop")
    assert f"SecretSync {namespace}/looped" in cond["message"]
    time.sleep(QUIET_SECONDS)
    assert writes(service) == {}

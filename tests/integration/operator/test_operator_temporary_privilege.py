"""TemporaryPrivilege end to end: the real control plane, the operator process, the dev server.

The dev server enforces additional privileges on every permission check, temporary windows
included (devserver/permissions.py), so what these tests watch is the grant itself working: a
SecretSync of an identity without access goes from Forbidden to Ready once a TemporaryPrivilege
grants it the path, and back to Forbidden when the grant's window ends.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import harness
import httpx
import pytest
import tenant
import yaml
from harness import eventually

from secretferry.devcluster import binaries
from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

READER_ID = "0f000000-0000-4000-8000-0000000000c1"
READER_CLIENT = "reader-client"
READER_SECRET = "reader-client-secret"
GRANTER = "tp-granter"
# Drift (a privilege deleted at the service) is repaired within this many seconds in these tests.
CHECK_INTERVAL_SECONDS = "2"


@pytest.fixture(scope="module")
def reader(service: DevServer) -> None:
    """An identity that is a member of the project with the no-access role: it reads nothing
    unless a privilege grants it."""
    service.add_seed(
        {
            "identities": [
                {
                    "id": READER_ID,
                    "name": "reader",
                    "organization": "test-org",
                    "universalAuth": {"clientId": READER_CLIENT, "clientSecret": READER_SECRET},
                    "projects": [{"project": harness.PROJECT_SLUG, "role": "no-access"}],
                }
            ]
        }
    )


@pytest.fixture(scope="module")
def tp_operator(
    control_plane: ControlPlane,
    crds: None,
    service: DevServer,
    reader: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorProcess]:
    op = harness.start_operator(
        control_plane,
        service,
        tmp_path_factory.mktemp("operator") / "operator.log",
        SECRETFERRY_PRIVILEGE_CHECK_INTERVAL_SECONDS=CHECK_INTERVAL_SECONDS,
    )
    _granter(control_plane)
    try:
        yield op
    finally:
        op.stop()
        _clean_up(control_plane)
    harness.assert_no_values_leaked(control_plane, op)


def _clean_up(cp: ControlPlane) -> None:
    """Nothing of this module outlives it in the shared control plane: a ClusterMachineIdentity
    left behind would be seen (and checked) by every later operator, e.g. the chart's."""
    listing = json.loads(cp.kubectl("get", "temporaryprivileges", "-o", "json"))
    for item in listing["items"]:
        name = item["metadata"]["name"]
        cp.kubectl(
            "patch", "temporaryprivilege", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
        )
        cp.kubectl("delete", "temporaryprivilege", name, "--wait=false", check=False)
    cp.kubectl("delete", "clustermachineidentity", GRANTER, "--wait=false", check=False)
    cp.kubectl("delete", "secret", "tp-granter-creds", "-n", harness.OPERATOR_NAMESPACE, check=False)


def _granter(cp: ControlPlane) -> None:
    """A ClusterMachineIdentity logging in as the seed's admin identity (universal auth)."""
    ns = harness.OPERATOR_NAMESPACE
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "tp-granter-creds", "namespace": ns},
            "stringData": {"clientSecret": "test-client-secret"},
        }
    )
    cp.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "ClusterMachineIdentity",
            "metadata": {"name": GRANTER},
            "spec": {
                "auth": {
                    "universal": {
                        "clientId": "test-client",
                        "clientSecretRef": {
                            "name": "tp-granter-creds",
                            "key": "clientSecret",
                            "namespace": ns,
                        },
                    }
                }
            },
        }
    )


def _reader_identity(cp: ControlPlane, namespace: str) -> None:
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "reader-creds",
                "namespace": namespace,
                "annotations": harness.opt_ins("reader", templates=False),
            },
            "stringData": {"clientSecret": READER_SECRET},
        }
    )
    cp.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "MachineIdentity",
            "metadata": {"name": "reader", "namespace": namespace},
            "spec": {
                "auth": {
                    "universal": {
                        "clientId": READER_CLIENT,
                        "clientSecretRef": {"name": "reader-creds", "key": "clientSecret"},
                    }
                }
            },
        }
    )


def _privilege(name: str, path: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "TemporaryPrivilege",
        "metadata": {"name": name},
        "spec": {
            "granterRef": {"name": GRANTER},
            "identityId": READER_ID,
            "projectSlug": harness.PROJECT_SLUG,
            "permissions": [
                {
                    "actions": ["read"],
                    "subject": "secrets",
                    "conditions": {"environment": "dev", "secretPath": path},
                }
            ],
            **spec,
        },
    }


def _tp(cp: ControlPlane, name: str) -> dict[str, Any] | None:
    proc = cp.kubectl_run("get", "temporaryprivilege", name, "-o", "json")
    if proc.returncode != 0:
        if "NotFound" in proc.stderr:
            return None
        raise RuntimeError(proc.stderr)
    obj: dict[str, Any] = json.loads(proc.stdout)
    return obj


def _condition(cp: ControlPlane, name: str, type_: str, reason: str) -> dict[str, Any] | None:
    obj = _tp(cp, name)
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("reason") == reason:
            return obj
    return None


def _wait(cp: ControlPlane, name: str, type_: str, reason: str, *, timeout: float = 30.0) -> dict[str, Any]:
    return eventually(
        lambda: _condition(cp, name, type_, reason), timeout=timeout, what=f"{name} {type_}={reason}"
    )


def _service_privileges(service: DevServer) -> list[dict[str, Any]]:
    """What the service holds for the reader, read as the admin identity."""
    token = service.issue_token(harness.UNIVERSAL_ID)
    response = httpx.get(
        f"{service.base_url}/api/v1/additional-privilege/identity",
        params={"identityId": READER_ID, "projectSlug": harness.PROJECT_SLUG},
        headers={"Authorization": f"Bearer {token}"},
    )
    response.raise_for_status()
    privileges: list[dict[str, Any]] = response.json()["privileges"]
    return privileges


def _events(cp: ControlPlane, name: str, wanted: set[str]) -> dict[str, str] | None:
    """Reason → note of the Events regarding TemporaryPrivilege ``name``, once all ``wanted`` are there."""
    listing = json.loads(cp.kubectl("get", "events.events.k8s.io", "-n", "default", "-o", "json"))
    found = {
        e["reason"]: e.get("note", "")
        for e in listing["items"]
        if e.get("regarding", {}).get("kind") == "TemporaryPrivilege" and e["regarding"].get("name") == name
    }
    return found if wanted <= set(found) else None


def _delete(cp: ControlPlane, name: str) -> None:
    cp.kubectl("delete", "temporaryprivilege", name, "--wait=false", check=False)
    eventually(lambda: _tp(cp, name) is None or None, what=f"{name} gone")


def test_a_grant_lets_a_sync_read_then_expires(
    control_plane: ControlPlane, tp_operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    cp = control_plane
    service.set_secret(harness.PROJECT_ID, "dev", "/granted", "TP_KEY", "tp-value-1")
    _reader_identity(cp, namespace)
    harness.secret_sync(
        cp,
        namespace,
        "granted",
        sources=[harness.source("/granted")],
        identity="reader",
        refreshInterval="1s",
        instantUpdates=False,
    )
    harness.wait_reason(cp, namespace, "granted", "Forbidden")

    # A window long enough for the sync to be seen Ready; its end is waited for on the condition.
    cp.apply(_privilege("grant-read", "/granted", temporaryRange="20s"))
    obj = _wait(cp, "grant-read", "Active", "Active")
    eventually(
        lambda: 'secretferry_temporary_privileges{state="active"} 1.0' in tp_operator.metrics() or None,
        what="the gauge counts the active grant",
    )
    status = obj["status"]
    assert status["privilegeId"] and status["expiresAt"] and status["startTime"]
    assert "secretferry.io/temporaryprivilege" in obj["metadata"]["finalizers"]
    held = [p for p in _service_privileges(service) if p["slug"] == "grant-read"]
    assert len(held) == 1 and held[0]["isTemporary"] and held[0]["temporaryRange"] == "20s"
    assert held[0]["id"] == status["privilegeId"]
    harness.wait_reason(cp, namespace, "granted", "Synced")
    assert harness.secret_data(cp, namespace, "granted") == {"TP_KEY": "tp-value-1"}

    # The window ends: the condition turns Expired (a timer, no read needed) and the service no
    # longer counts the privilege, so the next refresh is refused; the Secret is kept.
    _wait(cp, "grant-read", "Active", "Expired", timeout=60)
    harness.wait_reason(cp, namespace, "granted", "Forbidden")
    assert harness.secret_data(cp, namespace, "granted") == {"TP_KEY": "tp-value-1"}

    # Events (in namespace default, as for every cluster-scoped object), one per transition; their
    # notes name neither the identity nor the project.
    notes = eventually(
        lambda: _events(cp, "grant-read", {"Active", "Expired"}), what="Active and Expired Events"
    )
    assert all(READER_ID not in n and harness.PROJECT_SLUG not in n for n in notes.values())
    assert 'secretferry_temporary_privileges{state="expired"} 1.0' in tp_operator.metrics()

    # Deleting the resource deletes the privilege at the service.
    _delete(cp, "grant-read")
    assert not [p for p in _service_privileges(service) if p["slug"] == "grant-read"]


def test_drift_spec_change_and_deletion(
    control_plane: ControlPlane, tp_operator: OperatorProcess, service: DevServer
) -> None:
    cp = control_plane
    cp.apply(_privilege("grant-drift", "/a", temporaryRange="1h"))
    obj = _wait(cp, "grant-drift", "Active", "Active")
    first_id = obj["status"]["privilegeId"]

    # Deleted at the service behind our back: recreated at the next check (CHECK_INTERVAL_SECONDS).
    token = service.issue_token(harness.UNIVERSAL_ID)
    response = httpx.delete(
        f"{service.base_url}/api/v2/identity-project-additional-privilege/{first_id}",
        headers={"Authorization": f"Bearer {token}"},
    )
    response.raise_for_status()

    def recreated() -> dict[str, Any] | None:
        held = [p for p in _service_privileges(service) if p["slug"] == "grant-drift"]
        return held[0] if held and held[0]["id"] != first_id else None

    again = eventually(recreated, timeout=30, what="the privilege recreated at the service")
    assert again["temporaryRange"] == "1h"
    # The window is the first one: a re-creation never extends a grant.
    assert again["temporaryAccessStartTime"].startswith(obj["status"]["startTime"].removesuffix("Z"))

    # A spec change updates the privilege at the service (v2 update by id).
    cp.apply(_privilege("grant-drift", "/b/**", temporaryRange="2h"))

    def updated() -> dict[str, Any] | None:
        held = [p for p in _service_privileges(service) if p["slug"] == "grant-drift"]
        ok = held and held[0]["temporaryRange"] == "2h"
        return held[0] if ok else None

    changed = eventually(updated, timeout=30, what="the privilege updated at the service")
    assert [r["conditions"]["secretPath"] for r in changed["permissions"]] == [{"$glob": "/b/**"}]

    _delete(cp, "grant-drift")
    assert not [p for p in _service_privileges(service) if p["slug"] == "grant-drift"]


def test_permanent_is_refused_without_the_setting(
    control_plane: ControlPlane, tp_operator: OperatorProcess, service: DevServer
) -> None:
    cp = control_plane
    cp.apply(_privilege("grant-forever", "/a", permanent=True))
    obj = _wait(cp, "grant-forever", "Ready", "PermanentNotAllowed")
    assert "privilegeId" not in obj["status"]
    assert not [p for p in _service_privileges(service) if p["slug"] == "grant-forever"]
    _delete(cp, "grant-forever")


def test_a_tenant_cannot_create_temporary_privileges(
    control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> None:
    """Cluster-scoped and never aggregated into view/edit/admin: a namespace user holding the
    built-in ``admin`` role and the chart's view/edit/admin roles in their namespace (the most a
    real install gives a namespace owner) can neither create nor read one."""
    cp = control_plane
    hostile = tenant.make_tenant(cp, namespace, tmp_path)
    roles = _aggregated_roles(tmp_path)
    try:
        for role in roles:
            cp.apply(role)
        # Bound to the built-in admin role and, since this control plane runs no aggregation
        # controller, to each of the chart's roles directly (what aggregation would merge in).
        for role_name in ["admin", *(r["metadata"]["name"] for r in roles)]:
            cp.apply(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": f"tenant-{role_name}", "namespace": namespace},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": role_name,
                    },
                    "subjects": [
                        {"kind": "ServiceAccount", "name": tenant.TENANT_SA, "namespace": namespace}
                    ],
                }
            )

        def bound() -> bool | None:
            out = hostile.kubectl(
                "auth",
                "can-i",
                "get",
                "secretsyncs.secretferry.io",
                "--subresource=status",
                "-n",
                namespace,
                check=False,
            )
            return out.strip() == "yes" or None

        # The chart's roles are in force (status reads come only from its view role)...
        eventually(bound, what="the chart's roles bound")
        # ...and gives nothing on TemporaryPrivileges.
        for verb in ("create", "get", "list", "patch", "delete"):
            out = hostile.kubectl("auth", "can-i", verb, "temporaryprivileges.secretferry.io", check=False)
            assert out.strip() == "no", verb
        out = hostile.kubectl(
            "apply", "-f", "-", input=json.dumps(_privilege("tenant-grant", "/")), check=False
        )
        assert "created" not in out
        assert _tp(cp, "tenant-grant") is None
    finally:
        for role in roles:
            cp.kubectl("delete", "clusterrole", role["metadata"]["name"], check=False)


def _aggregated_roles(workdir: Path) -> list[dict[str, Any]]:
    """The chart's aggregated ClusterRoles, rendered by the pinned helm under a test release name."""
    env = dict(os.environ)
    for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        env[var] = str(workdir / var.lower())
    env.pop("KUBECONFIG", None)
    proc = subprocess.run(
        [
            str(binaries.ensure() / "helm"),
            "template",
            "tp-tenant",
            str(harness_chart()),
            "--show-only",
            "templates/rbac-aggregated.yaml",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def harness_chart() -> Path:
    return Path(__file__).resolve().parents[3] / "charts" / "secretferry"

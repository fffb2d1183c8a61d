"""PasswordGenerator and UUIDGenerator on the real control plane: generated once, kept across an
operator restart, regenerated only on a new regenerate token, a spec change reported but not
acted on, a foreign Secret never overwritten, and a SecretSync reading a generator's value."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import harness
import pytest
import tenant
from harness import eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration
REGENERATE = "secretferry.io/regenerate"


def generator(
    cp: ControlPlane, namespace: str, name: str, kind: str = "PasswordGenerator", **spec: Any
) -> None:
    cp.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": kind,
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
    )


def reason(cp: ControlPlane, namespace: str, name: str, kind: str = "passwordgenerator") -> str | None:
    cond = harness.ready(cp, namespace, name, kind=kind)
    return None if cond is None else str(cond.get("reason"))


def value(cp: ControlPlane, namespace: str, name: str, key: str = "password") -> str | None:
    data = secret_data(cp, namespace, name)
    found = None if data is None else data.get(key)
    if found:
        harness.VALUES.add(found)  # checked against logs, Events and statuses at the end
    return found


def test_generated_once_kept_across_a_restart_regenerated_on_request_only(
    control_plane: ControlPlane, operator: OperatorProcess, namespace: str
) -> None:
    cp = control_plane
    generator(cp, namespace, "db", length=20, digits=3, symbols=2, symbolCharacters="-_")
    first = eventually(lambda: value(cp, namespace, "db"), what="the first password")
    assert len(first) == 20
    assert sum(c.isdigit() for c in first) == 3 and sum(c in "-_" for c in first) == 2
    eventually(lambda: reason(cp, namespace, "db") == "Generated", what="Ready Generated")
    obj = harness.get(cp, "passwordgenerator", "db", namespace) or {}
    assert obj["status"]["secretName"] == "db" and obj["status"]["generations"] == 1
    secret = harness.get(cp, "secret", "db", namespace) or {}
    owner = secret["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "PasswordGenerator",
        obj["metadata"]["uid"],
        True,
    )
    printed = cp.kubectl("get", "passwordgenerators", "-n", namespace)
    assert all(column in printed for column in ("READY", "SECRET", "GENERATED", "AGE"))

    # A restart reads the Secret again: the value stays. The spec change made after it proves the
    # new process has looked (it reports the change) and still did not regenerate.
    operator.restart()
    cp.kubectl(
        "patch", "passwordgenerator", "db", "-n", namespace, "--type=merge", "-p", '{"spec":{"length":30}}'
    )
    eventually(
        lambda: reason(cp, namespace, "db") == "SpecChangedSinceGenerated", what="the spec change reported"
    )
    assert value(cp, namespace, "db") == first

    cp.kubectl("annotate", "passwordgenerator", "db", "-n", namespace, f"{REGENERATE}=rotate-1")
    second = eventually(
        lambda: v if (v := value(cp, namespace, "db")) not in (None, first) else None, what="a new value"
    )
    assert len(second) == 30
    eventually(lambda: reason(cp, namespace, "db") == "Generated", what="Ready Generated again")
    status = (harness.get(cp, "passwordgenerator", "db", namespace) or {})["status"]
    assert status["regenerateToken"] == "rotate-1" and status["generations"] == 2

    # The same token again (another restart, an unrelated annotation): no second regeneration.
    operator.restart()
    cp.kubectl("annotate", "passwordgenerator", "db", "-n", namespace, "unrelated=1")
    time.sleep(2)  # nothing to wait for: proving that nothing happens
    assert value(cp, namespace, "db") == second
    events = cp.kubectl("get", "events", "-n", namespace, "-o", "json")
    assert '"Generated"' in events and '"Regenerated"' in events
    assert first not in events and second not in events


def test_uuid_generator(control_plane: ControlPlane, operator: OperatorProcess, namespace: str) -> None:
    generator(control_plane, namespace, "ids", kind="UUIDGenerator", target={"name": "app-id"})
    got = eventually(lambda: value(control_plane, namespace, "app-id", key="uuid"), what="the uuid")
    assert uuid.UUID(got).version == 4
    eventually(
        lambda: reason(control_plane, namespace, "ids", kind="uuidgenerator") == "Generated", what="Ready"
    )
    # Deleted by hand: the value is gone either way, and consumers need one (the Secret watch sees it).
    control_plane.kubectl("delete", "secret", "app-id", "-n", namespace)
    again = eventually(
        lambda: (
            v if (v := value(control_plane, namespace, "app-id", key="uuid")) not in (None, got) else None
        ),
        what="a new uuid after the Secret was deleted",
    )
    assert uuid.UUID(again).version == 4


def test_cel_refuses_counts_over_the_length(control_plane: ControlPlane, crds: None, namespace: str) -> None:
    manifest = {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "PasswordGenerator",
        "metadata": {"name": "bad", "namespace": namespace},
        "spec": {"length": 8, "digits": 6, "symbols": 6, "allowRepeat": True},
    }
    proc = control_plane.kubectl_run("apply", "-f", "-", input=json.dumps(manifest))
    assert proc.returncode != 0 and "digits + symbols must not exceed length" in proc.stderr


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            {"projectId": "p", "environment": "dev", "generatorRef": {"kind": "UUIDGenerator", "name": "g"}},
            "a generatorRef source names no projectId, projectSlug or environment",
        ),
        ({"projectId": "p"}, "set exactly one of projectId and projectSlug, and environment"),
        # A generator of another namespace cannot even be named (kubectl's strict field validation).
        (
            {"generatorRef": {"kind": "UUIDGenerator", "name": "g", "namespace": "other"}},
            'unknown field "spec.sources[0].generatorRef.namespace"',
        ),
        ({"generatorRef": {"kind": "UUIDGenerator", "name": "g"}}, None),
    ],
)
def test_cel_takes_either_a_scope_or_a_generator(
    control_plane: ControlPlane, crds: None, namespace: str, source: dict[str, Any], message: str | None
) -> None:
    manifest = {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "metadata": {"name": "s", "namespace": namespace},
        "spec": {"identityRef": {"name": "x"}, "sources": [source]},
    }
    proc = control_plane.kubectl_run("apply", "-o", "json", "-f", "-", input=json.dumps(manifest))
    if message is not None:
        assert proc.returncode != 0 and message in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    stored = json.loads(proc.stdout)["spec"]["sources"][0]["generatorRef"]
    assert stored == {"kind": "UUIDGenerator", "name": "g"}


def test_a_tenant_cannot_make_a_generator_overwrite_a_secret_it_cannot_write(
    control_plane: ControlPlane, operator: OperatorProcess, hostile: tenant.Tenant, namespace: str
) -> None:
    cp = control_plane
    cp.kubectl(
        "create", "secret", "generic", "victim", "-n", namespace, "--from-literal=password=admins-own-1"
    )
    harness.VALUES.add("admins-own-1")
    assert not hostile.can("update", "secrets")
    hostile.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "PasswordGenerator",
            "metadata": {"name": "grab", "namespace": namespace, "annotations": {REGENERATE: "now"}},
            "spec": {"target": {"name": "victim"}},
        }
    )
    eventually(lambda: reason(cp, namespace, "grab") == "TargetConflict", what="TargetConflict")
    secret = harness.get(cp, "secret", "victim", namespace) or {}
    assert secret_data(cp, namespace, "victim") == {"password": "admins-own-1"}
    assert "ownerReferences" not in secret["metadata"]
    # A SecretSync naming that generator cannot read the foreign Secret through it either.
    harness.kubernetes_identity(cp, namespace)
    hostile.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "SecretSync",
            "metadata": {"name": "leak", "namespace": namespace},
            "spec": {
                "identityRef": {"name": "ferry"},
                "sources": [{"generatorRef": {"kind": "PasswordGenerator", "name": "grab"}}],
                "target": {"kind": "ConfigMap"},
            },
        }
    )
    harness.wait_reason(cp, namespace, "leak", "GeneratorNotReady")
    assert harness.get(cp, "configmap", "leak", namespace) is None


def test_a_secretsync_reads_a_generator_and_follows_its_regeneration(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    cp = control_plane
    path = f"/{namespace}"
    service.set_secret(harness.PROJECT_ID, "dev", path, "DB_USER", "u-gen-1")
    harness.kubernetes_identity(cp, namespace)
    generator(cp, namespace, "db-pass", length=16, digits=2, symbols=0)
    harness.secret_sync(
        cp,
        namespace,
        "app",
        sources=[
            source(path),
            {
                "generatorRef": {"kind": "PasswordGenerator", "name": "db-pass"},
                "rewrite": [{"from": "password", "to": "DB_PASS"}],
            },
        ],
    )
    first = eventually(lambda: value(cp, namespace, "db-pass"), what="the generated password")
    eventually(
        lambda: secret_data(cp, namespace, "app") == {"DB_USER": "u-gen-1", "DB_PASS": first},
        what="the SecretSync's target with the generated key",
    )
    harness.wait_reason(cp, namespace, "app", "Synced")

    started = time.monotonic()
    cp.kubectl("annotate", "passwordgenerator", "db-pass", "-n", namespace, f"{REGENERATE}=r1")
    second = eventually(
        lambda: d["DB_PASS"] if (d := secret_data(cp, namespace, "app")) and d["DB_PASS"] != first else None,
        timeout=10,
        what="the regenerated value in the SecretSync's target",
        interval=0.02,
    )
    elapsed = time.monotonic() - started
    harness.VALUES.add(second)
    assert value(cp, namespace, "db-pass") == second
    print(f"regenerate annotation -> SecretSync target: {elapsed:.2f} s (kubectl annotate included)")

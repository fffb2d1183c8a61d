"""DynamicSecretLease on the real control plane, with real PostgreSQL credentials.

The dev server's dynamic secret is backed by a throwaway PostgreSQL cluster: the operator leases,
writes the Secret, renews; the test logs in with the Secret's data; deleting the
DynamicSecretLease revokes the lease and the same credentials are refused. Tenant rules: a lease
goes only through an identity that admits the namespace, and a namespace holds a bounded number.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import harness
import pytest
import tenant
from harness import eventually, secret_data

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver import pgcluster
from secretferry.devserver.testing import DevServer, run_dev_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        pgcluster.unavailable_reason() is not None, reason=str(pgcluster.unavailable_reason())
    ),
]
LIMIT = 2  # SECRETFERRY_MAX_LEASES_PER_NAMESPACE for this module's operator


@pytest.fixture(scope="module")
def pg() -> Iterator[pgcluster.PgCluster]:
    with pgcluster.throwaway_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="module")
def service(
    control_plane: ControlPlane,
    reviewer_token: str,
    pg: pgcluster.PgCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[DevServer]:
    seed = harness.seed(control_plane, reviewer_token=reviewer_token)
    seed["projects"][0]["dynamicSecrets"] = [
        {
            "name": "app-db",
            "environment": "dev",
            "path": "/",
            "type": "sql-database",
            "defaultTTL": "1m",
            "maxTTL": "10m",
            "inputs": pg.inputs(),
        }
    ]
    with run_dev_server(seed=seed, data_dir=tmp_path_factory.mktemp("devserver")) as server:
        yield server


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane, crds: None, service: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    op = harness.start_operator(
        control_plane,
        service,
        tmp_path_factory.mktemp("operator") / "operator.log",
        SECRETFERRY_MAX_LEASES_PER_NAMESPACE=str(LIMIT),
        SECRETFERRY_LEASE_RETRY_SECONDS="1",
    )
    try:
        yield op
    finally:
        op.stop()


def lease_body(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "DynamicSecretLease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "identityRef": {"name": "ferry"},
            "dynamicSecret": {"name": "app-db", "projectSlug": harness.PROJECT_SLUG, "environment": "dev"},
            "ttl": "60s",
            **spec,
        },
    }


def status(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    body = harness.get(cp, "dynamicsecretlease", name, namespace) or {}
    found: dict[str, Any] = body.get("status") or {}
    return found


def reason(cp: ControlPlane, namespace: str, name: str) -> str | None:
    for cond in status(cp, namespace, name).get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("reason"))
    return None


def connect(pg: pgcluster.PgCluster, data: dict[str, str]) -> str:
    async def go() -> str:
        conn = await asyncpg.connect(
            host=pg.host,
            port=pg.port,
            user=data["DB_USERNAME"],
            password=data["DB_PASSWORD"],
            database="postgres",
        )
        try:
            return str(await conn.fetchval("SELECT current_user"))
        finally:
            await conn.close()

    return asyncio.run(go())


def test_lease_secret_connect_renew_revoke(
    control_plane: ControlPlane, operator: OperatorProcess, pg: pgcluster.PgCluster, namespace: str
) -> None:
    harness.kubernetes_identity(control_plane, namespace)
    # renewAtFraction 0.1 of a 60 s term: the first renewal is due 6 s after the lease.
    control_plane.apply(lease_body(namespace, "db", renewAtFraction=0.1))
    data = eventually(
        lambda: secret_data(control_plane, namespace, "db"), timeout=60, what="the lease's Secret"
    )
    assert set(data) == {"DB_USERNAME", "DB_PASSWORD"}
    assert connect(pg, data) == data["DB_USERNAME"]
    st = eventually(
        lambda: (s := status(control_plane, namespace, "db")).get("renewals") and s,
        timeout=40,
        what="a renewal",
    )
    assert st["leaseId"] and st["expiresAt"] and st["target"] == "db"
    assert reason(control_plane, namespace, "db") == "Leased"
    assert secret_data(control_plane, namespace, "db") == data  # a renewal changes no credential
    assert connect(pg, data) == data["DB_USERNAME"]
    printed = control_plane.kubectl("get", "dslease", "-n", namespace)
    assert "Leased" in printed and "RENEWALS" in printed

    control_plane.kubectl("delete", "dynamicsecretlease", "db", "-n", namespace, "--timeout=60s")

    def refused() -> bool:
        try:
            connect(pg, data)
        except asyncpg.InvalidAuthorizationSpecificationError:
            return True
        return False

    eventually(refused, timeout=30, what="the credentials refused after the revocation")
    log = operator.log_text()
    assert data["DB_PASSWORD"] not in log and data["DB_USERNAME"] not in log
    assert st["leaseId"] not in log
    events = control_plane.kubectl("get", "events.events.k8s.io", "-n", namespace, "-o", "json")
    assert data["DB_PASSWORD"] not in events and st["leaseId"] not in events


def test_tenant_leases_only_through_an_identity_admitting_the_namespace(
    control_plane: ControlPlane, operator: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    # The victim's identity lives in another namespace; the tenant names it and gets nothing.
    victim = f"{namespace}-v"
    control_plane.kubectl("create", "namespace", victim)
    try:
        harness.kubernetes_identity(control_plane, victim)
        hostile = tenant.make_tenant(control_plane, namespace, tmp_path)
        assert hostile.can("create", "dynamicsecretleases.secretferry.io")
        hostile.apply(lease_body(namespace, "steal"))
        eventually(
            lambda: reason(control_plane, namespace, "steal") == "IdentityNotFound", what="IdentityNotFound"
        )
        assert "leaseId" not in status(control_plane, namespace, "steal")
        assert secret_data(control_plane, namespace, "steal") is None
    finally:
        control_plane.kubectl("delete", "namespace", victim, "--wait=false", check=False)


def test_a_namespace_holds_a_bounded_number_of_leases(
    control_plane: ControlPlane, operator: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    harness.kubernetes_identity(control_plane, namespace)
    hostile = tenant.make_tenant(control_plane, namespace, tmp_path)
    by_id = {"name": "app-db", "projectId": harness.PROJECT_ID, "environment": "dev"}  # slug looked up
    for i in range(LIMIT + 1):
        hostile.apply(lease_body(namespace, f"l{i}", dynamicSecret=by_id))
    eventually(
        lambda: (
            sorted(reason(control_plane, namespace, f"l{i}") or "" for i in range(LIMIT + 1))
            == sorted(["Leased"] * LIMIT + ["LeaseLimitReached"])
        ),
        timeout=60,
        what=f"{LIMIT} leases and one refused",
    )
    waiting = next(
        f"l{i}" for i in range(LIMIT + 1) if reason(control_plane, namespace, f"l{i}") == "LeaseLimitReached"
    )
    held = next(f"l{i}" for i in range(LIMIT + 1) if f"l{i}" != waiting)
    hostile.kubectl("delete", "dynamicsecretlease", held, "--timeout=60s")
    eventually(
        lambda: reason(control_plane, namespace, waiting) == "Leased",
        timeout=60,
        what="the waiting one leases",
    )
    for i in range(LIMIT + 1):
        hostile.kubectl("delete", "dynamicsecretlease", f"l{i}", "--ignore-not-found", "--timeout=60s")


def test_a_spec_edit_is_acted_on_at_once_not_at_the_next_look(
    control_plane: ControlPlane, operator: OperatorProcess, namespace: str
) -> None:
    """The keeper's loop waits until the renewal (54 s here) or 5 minutes; a spec edit wakes it
    through kopf's watch: a new target.name gets its lease and Secret within a second or two."""
    harness.kubernetes_identity(control_plane, namespace)
    control_plane.apply(lease_body(namespace, "edit", renewAtFraction=0.9))
    eventually(lambda: reason(control_plane, namespace, "edit") == "Leased", timeout=60, what="Leased")
    assert secret_data(control_plane, namespace, "moved") is None

    started = time.monotonic()
    control_plane.kubectl(
        "patch", "dynamicsecretlease", "edit", "-n", namespace, "--type=merge",
        "-p", '{"spec": {"target": {"name": "moved"}}}',
    )  # fmt: skip
    data = eventually(
        lambda: secret_data(control_plane, namespace, "moved"),
        timeout=20,
        interval=0.05,
        what="the new Secret",
    )
    took = time.monotonic() - started
    print(f"spec edit → Secret of the new target: {took:.2f} s")
    assert set(data) == {"DB_USERNAME", "DB_PASSWORD"}
    assert took < 5.0  # before: the next look, 54 s later (renewAtFraction 0.9 of 60 s)
    generation = (harness.get(control_plane, "dynamicsecretlease", "edit", namespace) or {})["metadata"]
    eventually(
        lambda: (
            status(control_plane, namespace, "edit").get("observedGeneration") == generation["generation"]
        ),
        timeout=10,
        what="observedGeneration",
    )
    control_plane.kubectl("delete", "dynamicsecretlease", "edit", "-n", namespace, "--timeout=60s")

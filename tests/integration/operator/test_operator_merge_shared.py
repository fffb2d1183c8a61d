"""Several Merge SecretSyncs into one opted-in Secret keep all their keys together.

Replays issue 20's finding 5: with one field manager for every write, each SecretSync's apply
dropped the other's keys (25 samples, never both). Each SecretSync now applies as itself
(``secretferry/<name>``). The SecretSyncs are the tenant's (its RBAC only); the Secret is the
admin's, who opts them in by name. The Secret is sampled while values change at the service:
every sample must hold every key.
"""

from __future__ import annotations

import json
import time

import harness
import pytest
import tenant
from harness import PROJECT_ID, eventually, secret_data, source
from test_operator_tenant_writes import MERGE_FROM, admin_secret, sync_manifest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

OWNER_DATA = {"username": "app", "password": "owner-password-kept"}
ROUNDS = 3
SAMPLES_PER_ROUND = 10  # reads of the Secret while one round of changes is being synced


def _value(namespace: str, i: int, round_: int, key: str = "K") -> str:
    return f"value-{namespace}-{i}-{key}-{round_}"  # unique per test, long enough for the leak check


def _setup(
    cp: ControlPlane, service: DevServer, namespace: str, hostile: tenant.Tenant, n: int, **target: str
) -> list[str]:
    names = [f"m{i}" for i in range(n)]
    harness.kubernetes_identity(cp, namespace)
    admin_secret(cp, namespace, "shared", OWNER_DATA, annotations={MERGE_FROM: ",".join(names)})
    for i, name in enumerate(names):
        service.set_secret(PROJECT_ID, "dev", f"/{namespace}/{name}", f"K{i}", _value(namespace, i, 0))
        hostile.apply(
            sync_manifest(
                namespace,
                name,
                sources=[source(f"/{namespace}/{name}")],
                target={"name": "shared", "creationPolicy": "Merge", **target},
            )
        )
    return names


def _want(namespace: str, n: int, round_: int) -> dict[str, str]:
    return {**OWNER_DATA, **{f"K{i}": _value(namespace, i, round_) for i in range(n)}}


@pytest.mark.parametrize("n", [2, 5])
def test_merge_secretsyncs_keep_all_their_keys_together(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
    n: int,
) -> None:
    names = _setup(control_plane, service, namespace, hostile, n)
    eventually(
        lambda: secret_data(control_plane, namespace, "shared") == _want(namespace, n, 0),
        what=f"all {n} SecretSyncs' keys beside the owner's",
    )
    for name in names:
        assert harness.wait_reason(control_plane, namespace, name, "Synced")["status"] == "True"

    all_keys = set(_want(namespace, n, 0))
    for round_ in range(1, ROUNDS + 1):
        for i, name in enumerate(names):
            service.set_secret(
                PROJECT_ID, "dev", f"/{namespace}/{name}", f"K{i}", _value(namespace, i, round_)
            )
        for _ in range(SAMPLES_PER_ROUND):
            data = secret_data(control_plane, namespace, "shared") or {}
            assert set(data) == all_keys, f"round {round_}: keys {sorted(data)}"
            time.sleep(0.1)
        eventually(
            lambda r=round_: secret_data(control_plane, namespace, "shared") == _want(namespace, n, r),  # type: ignore[misc]
            what=f"round {round_}'s values in all {n} keys",
        )
    obj = json.loads(
        control_plane.kubectl(
            "get", "secret", "shared", "-n", namespace, "-o", "json", "--show-managed-fields"
        )
    )
    managers = {e["manager"] for e in obj["metadata"].get("managedFields") or []}
    assert {f"secretferry/{name}" for name in names} <= managers
    assert "secretferry" not in managers


def test_delete_policy_removes_only_that_secretsyncs_keys(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    n = 3
    names = _setup(control_plane, service, namespace, hostile, n, deletionPolicy="Delete")
    # m0 has a second key; it disappears at the service.
    service.set_secret(PROJECT_ID, "dev", f"/{namespace}/m0", "GONE", _value(namespace, 0, 0, "GONE"))
    both = {**_want(namespace, n, 0), "GONE": _value(namespace, 0, 0, "GONE")}
    eventually(lambda: secret_data(control_plane, namespace, "shared") == both, what="every key")

    service.delete_secret(PROJECT_ID, "dev", f"/{namespace}/m0", "GONE")
    eventually(
        lambda: secret_data(control_plane, namespace, "shared") == _want(namespace, n, 0),
        what="m0's removed key gone, every other key kept",
    )
    # The others keep writing (a value change each) and nothing else goes missing.
    for i, name in enumerate(names):
        service.set_secret(PROJECT_ID, "dev", f"/{namespace}/{name}", f"K{i}", _value(namespace, i, 1))
    eventually(
        lambda: secret_data(control_plane, namespace, "shared") == _want(namespace, n, 1),
        what="the changed values, the owner's keys beside them",
    )

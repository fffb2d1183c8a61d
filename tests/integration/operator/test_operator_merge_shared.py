"""Several Merge SecretSyncs into one opted-in Secret keep all their keys together.

Replays issue 20's finding 5: with one field manager for every write, each SecretSync's apply
dropped the other's keys (25 samples, never both). Each SecretSync now applies as itself
(``secretferry/<name>``). The SecretSyncs are the tenant's (its RBAC only); the Secret is the
admin's, who opts them in by name. The Secret is sampled while values change at the service:
every sample must hold every key.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

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


def _managers(cp: ControlPlane, namespace: str, name: str) -> set[str]:
    obj = json.loads(
        cp.kubectl("get", "secret", name, "-n", namespace, "-o", "json", "--show-managed-fields")
    )
    return {e["manager"] for e in obj["metadata"].get("managedFields") or []}


def _as_0_1(cp: ControlPlane, manifest: dict[str, Any], data: dict[str, str]) -> None:
    """Written the way 0.1 wrote targets: server-side apply of ``data`` (base64, as the operator
    sends it) as the one manager ``secretferry``."""
    manifest["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    cp.kubectl("apply", "--server-side", "--field-manager=secretferry", "-f", "-", input=json.dumps(manifest))


def test_targets_written_by_0_1_are_handed_over_at_the_next_write(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    harness.kubernetes_identity(control_plane, namespace)
    # An Owner target: its old label and key, which the SecretSync no longer has, go with the handover.
    _as_0_1(
        control_plane,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "up",
                "namespace": namespace,
                "labels": {
                    "app.kubernetes.io/managed-by": "secretferry",
                    "secretferry.io/sync": "up",
                    "dropped-since": "yes",
                },
            },
        },
        {"K": "old-value-0-1", "STALE": "stale-value-0-1"},
    )
    service.set_secret(PROJECT_ID, "dev", f"/{namespace}/up", "K", _value(namespace, 0, 1))
    hostile.apply(sync_manifest(namespace, "up", sources=[source(f"/{namespace}/up")], target={}))
    eventually(
        lambda: secret_data(control_plane, namespace, "up") == {"K": _value(namespace, 0, 1)},
        what="the owned target rewritten without its stale key",
    )
    obj = harness.get(control_plane, "secret", "up", namespace)
    assert obj is not None and "dropped-since" not in obj["metadata"]["labels"]
    assert eventually(
        lambda: _managers(control_plane, namespace, "up") == {"secretferry/up"}, what="one manager"
    )

    # A Merge target where 0.1's manager holds m2's key: m2 changes its value (a Conflict with
    # "secretferry" without the handover), m1 adds its own; both stay.
    # Created, not applied: kubectl's server-side apply below would otherwise take a client-side
    # apply's fields over for "secretferry" (its csaupgrade), which 0.1 never did.
    harness.VALUES.update(OWNER_DATA.values())
    control_plane.kubectl(
        "create",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "shared", "namespace": namespace, "annotations": {MERGE_FROM: "m1,m2"}},
                "stringData": OWNER_DATA,
            }
        ),
    )
    _as_0_1(
        control_plane,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "shared", "namespace": namespace},
        },
        {"K1": _value(namespace, 1, 0)},
    )
    for i, name in ((1, "m2"), (0, "m1")):
        service.set_secret(PROJECT_ID, "dev", f"/{namespace}/{name}", f"K{i}", _value(namespace, i, 1))
        hostile.apply(
            sync_manifest(
                namespace,
                name,
                sources=[source(f"/{namespace}/{name}")],
                target={"name": "shared", "creationPolicy": "Merge"},
            )
        )
    eventually(
        lambda: secret_data(control_plane, namespace, "shared") == _want(namespace, 2, 1),
        what="both SecretSyncs' new values beside the owner's",
    )
    for name in ("m1", "m2"):
        assert harness.wait_reason(control_plane, namespace, name, "Synced")["status"] == "True"
    assert "secretferry" not in _managers(control_plane, namespace, "shared")
    handed = [line for line in operator.log_text().splitlines() if "took over fields of the former" in line]
    assert any(f"{namespace}/up" in line for line in handed)
    assert any(f"{namespace}/shared" in line and "secretferry/m2" in line for line in handed)

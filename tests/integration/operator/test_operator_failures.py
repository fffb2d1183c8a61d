"""Failure semantics: whatever the service does, an existing Secret stays exactly as it
is, status says why, and the operator recovers when the fault ends. Also: re-login after token
expiry with a freshly minted ServiceAccount token, and one list call per scope per cycle."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import harness
import pytest
from harness import IDENTITY_ID, PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def service(
    control_plane: ControlPlane, reviewer_token: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevServer]:
    """This module's dev server answers expired tokens 403 TokenError (the other variant)."""
    with harness.dev_server(
        control_plane,
        reviewer_token=reviewer_token,
        data_dir=tmp_path_factory.mktemp("devserver-faults"),
        extra_args=["--token-error-status", "403", "--heartbeat-seconds", "1"],
    ) as server:
        yield server


def _polling_sync(cp: ControlPlane, service: DevServer, namespace: str, value: str) -> str:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", value)
    harness.kubernetes_identity(cp, namespace)
    harness.secret_sync(
        cp, namespace, "app", sources=[source(path)], refreshInterval="1s", instantUpdates=False
    )
    eventually(lambda: secret_data(cp, namespace, "app") == {"K": value}, what="the first sync")
    return path


FAULTS: list[tuple[str, dict[str, Any], str, str]] = [
    ("500", {"match": "GET /api/v4/secrets", "status": 500}, "ServiceUnavailable", "unavailable"),
    ("malformed", {"match": "GET /api/v4/secrets", "malformed": "json"}, "ServiceUnavailable", "malformed"),
    (
        "content-type",
        {"match": "GET /api/v4/secrets", "malformed": "content-type"},
        "ServiceUnavailable",
        "malformed",
    ),
    ("429", {"match": "GET /api/v4/secrets", "status": 429, "retryAfter": 2}, "RateLimited", "rate limited"),
]


@pytest.mark.parametrize(("label", "fault", "reason", "words"), FAULTS, ids=[f[0] for f in FAULTS])
def test_a_failing_service_never_touches_the_secret(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    label: str,
    fault: dict[str, Any],
    reason: str,
    words: str,
) -> None:
    path = _polling_sync(control_plane, service, namespace, f"fault-{label}-value-1")
    before = harness.get(control_plane, "secret", "app", namespace)
    assert before is not None
    service.set_faults({"routes": [fault]})
    try:
        service.set_secret(PROJECT_ID, "dev", path, "K", f"fault-{label}-value-2")
        cond = harness.wait_reason(control_plane, namespace, "app", reason)
        assert cond["status"] == "False"
        assert words in cond["message"].lower()
        time.sleep(2)  # several failed cycles
        after = harness.get(control_plane, "secret", "app", namespace)
        assert after is not None
        assert after["data"] == before["data"]
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    finally:
        service.clear_faults()
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"K": f"fault-{label}-value-2"},
        what="recovery after the fault",
        timeout=30,
    )
    harness.wait_reason(control_plane, namespace, "app", "Synced")


def test_service_down_then_back(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = _polling_sync(control_plane, service, namespace, "down-service-value-1")
    before = harness.get(control_plane, "secret", "app", namespace)
    service.stop()
    try:
        cond = harness.wait_reason(control_plane, namespace, "app", "ServiceUnavailable")
        assert cond["status"] == "False"
        time.sleep(2)
        assert harness.get(control_plane, "secret", "app", namespace) == before
    finally:
        service.start()
    service.set_secret(PROJECT_ID, "dev", path, "K", "down-service-value-2")
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"K": "down-service-value-2"},
        what="recovery after the restart",
        timeout=60,
    )


def test_token_expiry_logs_in_again_with_a_fresh_serviceaccount_token(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = _polling_sync(control_plane, service, namespace, "expiry-value-1")
    logins = service.stats()["logins"]
    failures = service.stats()["loginFailures"]
    assert service.expire_tokens(IDENTITY_ID) >= 1
    service.set_secret(PROJECT_ID, "dev", path, "K", "expiry-value-2")
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"K": "expiry-value-2"},
        what="a sync after the token expired",
        timeout=30,
    )
    stats = service.stats()
    assert stats["logins"] > logins
    # A replayed ServiceAccount token would still pass here (it is valid for 10 minutes), so the
    # dev server's own record of which jwt was used proves freshness: no login reused one.
    assert stats["loginFailures"] == failures
    assert stats.get("reusedJwts", 0) == 0
    harness.wait_reason(control_plane, namespace, "app", "Synced")


def test_one_list_call_per_scope_per_cycle(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "fan-in-value-1")
    harness.kubernetes_identity(control_plane, namespace)
    items = [
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "SecretSync",
            "metadata": {"name": f"s{i:03d}", "namespace": namespace},
            "spec": {
                "identityRef": {"kind": "MachineIdentity", "name": "ferry"},
                "sources": [source(path)],
                "refreshInterval": "4s",
                "instantUpdates": False,
            },
        }
        for i in range(100)
    ]
    control_plane.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )

    def all_ready() -> bool:
        listing = json.loads(control_plane.kubectl("get", "secretsyncs", "-n", namespace, "-o", "json"))
        ready = [
            c
            for o in listing["items"]
            for c in (o.get("status") or {}).get("conditions", [])
            if c["type"] == "Ready" and c["status"] == "True"
        ]
        return len(ready) == 100

    eventually(all_ready, what="100 SecretSyncs Ready", timeout=90, interval=1)
    service.reset_stats()
    window = 12.0  # three 4 s cycles (±10 % jitter): 2 to 4 list calls, never one per SecretSync
    time.sleep(window)
    stats = service.stats()
    ours = stats["listSecretsByScope"].get(f"dev:{path}", 0)  # leftovers of earlier tests poll too
    assert 2 <= ours <= 4, ours
    assert stats["routes"].get("POST /api/v1/auth/kubernetes-auth/login", 0) == 0

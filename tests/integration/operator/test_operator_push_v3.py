"""PushSecret against a self-hosted server older than v4 (``--no-v4``): the destination is listed
through v3 raw (the read side's per-host fallback, ``listroutes``) and every write goes to
``/api/v3/secrets/raw/{secretName}``. Its own dev server and operator, as in
test_operator_v3_fallback.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import harness
import pytest
from harness import PROJECT_ID, eventually
from test_operator_push import place, push_manifest, source_secret, wait_push_reason

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration
V3_WRITES = ("POST /api/v3/secrets/raw/{secretName}", "PATCH /api/v3/secrets/raw/{secretName}")


@pytest.fixture(scope="module")
def old_service(
    control_plane: ControlPlane, reviewer_token: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevServer]:
    with harness.dev_server(
        control_plane,
        reviewer_token=reviewer_token,
        data_dir=tmp_path_factory.mktemp("devserver-push-no-v4"),
        extra_args=["--no-v4", "--heartbeat-seconds", "1"],
    ) as server:
        yield server


def _routes(service: DevServer) -> dict[str, int]:
    routes: dict[str, int] = service.stats()["routes"]
    return {r: n for r, n in routes.items() if n and ("/api/v4/secrets/" in r or "/api/v3/secrets/raw/" in r)}


def test_a_push_to_a_server_without_v4_goes_through_v3_raw(
    control_plane: ControlPlane,
    crds: None,
    old_service: DevServer,
    namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    op = harness.start_operator(
        control_plane, old_service, tmp_path_factory.mktemp("op-push-v3") / "operator.log"
    )
    try:
        path = f"/{namespace}"
        old_service.set_secret(PROJECT_ID, "dev", path, "UNRELATED", "placeholder-v3-0")
        harness.kubernetes_identity(control_plane, namespace)
        source_secret(control_plane, namespace, "old", {"A": "v3-push-value-1"}, allow="old", to=place(path))
        old_service.reset_stats()
        control_plane.apply(push_manifest(namespace, "old", path))
        wait_push_reason(control_plane, namespace, "old", "Pushed")
        control_plane.kubectl(
            "patch",
            "secret",
            "old",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"stringData":{"A":"v3-push-value-2"}}',
        )
        harness.VALUES.add("v3-push-value-2")
        eventually(
            lambda: (
                (harness.get(control_plane, "pushsecret", "old", namespace) or {})
                .get("status", {})
                .get("lastPushTime")
                is not None
                and _routes(old_service).get(V3_WRITES[1]) == 1
            ),
            what="the update through v3",
        )
        time.sleep(2)
        assert _routes(old_service) == {V3_WRITES[0]: 1, V3_WRITES[1]: 1}  # nothing sent to v4 writes
    finally:
        op.stop()
    harness.assert_no_values_leaked(control_plane, op)

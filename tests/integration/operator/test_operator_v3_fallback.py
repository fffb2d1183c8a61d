"""A self-hosted server older than v4: no v4 list, so the operator lists through v3 raw.

The dev server runs with ``--no-v4``: every ``/api/v4/secrets`` route answers like a route the
real server never had (Fastify's 404). The operator must notice that once for the host, say so
once in its log and in the identity's status, and sync through ``GET /api/v3/secrets/raw`` with
the same result (references expanded) and the same follow-up of changes.

Its own dev server and operator (as in test_operator_stream_variants.py): no other operator may
reconcile these objects at the same time.
"""

from __future__ import annotations

from collections.abc import Iterator

import harness
import pytest
from harness import PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration
V3 = "/api/v3/secrets/raw"


@pytest.fixture(scope="module")
def old_service(
    control_plane: ControlPlane, reviewer_token: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevServer]:
    with harness.dev_server(
        control_plane,
        reviewer_token=reviewer_token,
        data_dir=tmp_path_factory.mktemp("devserver-no-v4"),
        extra_args=["--no-v4", "--heartbeat-seconds", "1"],
    ) as server:
        yield server


def _identity_status(cp: ControlPlane, namespace: str) -> dict[str, object]:
    return dict((harness.get(cp, "machineidentity", "ferry", namespace) or {}).get("status") or {})


def test_a_server_without_the_v4_list_is_synced_through_v3(
    control_plane: ControlPlane,
    crds: None,
    old_service: DevServer,
    namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    op = harness.start_operator(
        control_plane, old_service, tmp_path_factory.mktemp("op-no-v4") / "operator.log"
    )
    try:
        path = f"/{namespace}"
        old_service.set_secret(PROJECT_ID, "dev", path, "K", "v3-value-1")
        old_service.set_secret(PROJECT_ID, "dev", path, "R", "ref-${K}")
        old_service.set_secret(PROJECT_ID, "dev", f"{path}/deeper", "N", "v3-nested-1")
        harness.kubernetes_identity(control_plane, namespace)
        harness.secret_sync(control_plane, namespace, "app", sources=[source(path)], refreshInterval="3h")
        harness.secret_sync(
            control_plane, namespace, "tree", sources=[source(path, recursive=True)], refreshInterval="3h"
        )
        eventually(
            lambda: (
                secret_data(control_plane, namespace, "app") == {"K": "v3-value-1", "R": "ref-v3-value-1"}
            ),
            what="a sync through v3 with the reference expanded",
        )
        eventually(
            lambda: (secret_data(control_plane, namespace, "tree") or {}).get("N") == "v3-nested-1",
            what="a recursive sync through v3",
        )

        def says_v3() -> dict[str, object] | None:
            status = _identity_status(control_plane, namespace)
            return status if status.get("listEndpoint") == V3 else None

        status = eventually(says_v3, what="the identity's status naming the v3 list")
        ready = harness.ready(control_plane, namespace, "ferry", kind="machineidentity") or {}
        assert ready.get("status") == "True"
        assert f"listing via {V3} (the server has no v4 list)" in str(ready.get("message"))
        assert status["listEndpoint"] == V3

        # Changes still arrive (event stream + a v3 list) and references follow them.
        old_service.set_secret(PROJECT_ID, "dev", path, "K", "v3-value-2")
        eventually(
            lambda: (
                secret_data(control_plane, namespace, "app") == {"K": "v3-value-2", "R": "ref-v3-value-2"}
            ),
            what="a change synced through v3",
            timeout=20,
        )
        log = op.log_text()
        assert log.count("has no v4 list") == 1, "detected and logged once for the host"
        assert f'secretferry_service_calls_total{{endpoint="GET {V3}"' in op.metrics()
    finally:
        op.stop()
    harness.assert_no_values_leaked(control_plane, op)

"""Stream variants that need a dev server of their own: a plan without event subscriptions. (Every
generation of the real event stream runs the whole streaming suite: test_operator_streams.py.)

Kept apart from test_operator_streams.py on purpose: each test runs its own operator, and no other
operator may be reconciling the same objects at the same time (they would fight over status).
"""

from __future__ import annotations

import re

import harness
import pytest
from harness import PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration
HOURS = "3h"


def _metric(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def _streaming(cp: ControlPlane, namespace: str, name: str = "app") -> bool:
    obj = harness.get(cp, "secretsync", name, namespace) or {}
    return (obj.get("status") or {}).get("updateMode") == "Streaming"


def test_a_plan_without_events_falls_back_to_polling(
    control_plane: ControlPlane,
    crds: None,
    no_events_service: DevServer,
    namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    op = harness.start_operator(
        control_plane, no_events_service, tmp_path_factory.mktemp("op-poll") / "operator.log"
    )
    try:
        path = f"/{namespace}"
        no_events_service.set_secret(PROJECT_ID, "dev", path, "K", "poll-value-1")
        harness.kubernetes_identity(control_plane, namespace)
        harness.secret_sync(control_plane, namespace, "app", sources=[source(path)], refreshInterval="2s")
        eventually(
            lambda: secret_data(control_plane, namespace, "app") == {"K": "poll-value-1"}, what="first sync"
        )

        def polling() -> str | None:
            status = (harness.get(control_plane, "secretsync", "app", namespace) or {}).get("status") or {}
            reason = status.get("updateModeReason") or ""
            return (
                reason if status.get("updateMode") == "Polling" and re.search("plan", reason, re.I) else None
            )

        eventually(polling, what="updateMode Polling naming the plan")
        no_events_service.set_secret(PROJECT_ID, "dev", path, "K", "poll-value-2")
        eventually(
            lambda: secret_data(control_plane, namespace, "app") == {"K": "poll-value-2"},
            what="a change by polling",
            timeout=20,
        )
        assert no_events_service.stats()["openStreams"] == 0
    finally:
        op.stop()
    harness.assert_no_values_leaked(control_plane, op)

"""spec.refreshPolicy on the real control plane, counted at the dev server (list calls per scope).

CreatedOnce: one list when the target is created, then none across service changes, periodic
resyncs and an operator restart; a deleted target is re-created with one list. OnChange: a spec
edit syncs, a change at the service does not (no resync, no event stream for it).
"""

from __future__ import annotations

import time

import harness
from harness import PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

# Several resync periods of the 2 s refreshInterval (±10 % jitter) the SecretSyncs ask for: a
# Periodic SecretSync lists 2 or more times in it; OnChange/CreatedOnce must list 0 times.
QUIET_SECONDS = 6.0


def lists(service: DevServer, path: str) -> int:
    return int(service.stats()["listSecretsByScope"].get(f"dev:{path}", 0))


def status(cp: ControlPlane, namespace: str, name: str) -> dict[str, object]:
    return dict((harness.get(cp, "secretsync", name, namespace) or {}).get("status") or {})


def test_created_once_lists_once_then_never_even_across_a_restart(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    once, canary = f"/{namespace}/once", f"/{namespace}/canary"
    service.set_secret(PROJECT_ID, "dev", once, "K", "created-once-value-1")
    service.set_secret(PROJECT_ID, "dev", canary, "C", "canary-value-1")
    harness.kubernetes_identity(control_plane, namespace)
    service.reset_stats()
    harness.secret_sync(
        control_plane,
        namespace,
        "once",
        sources=[source(once)],
        refreshPolicy="CreatedOnce",
        refreshInterval="2s",
    )
    # The canary resyncs every 2 s (no stream: instantUpdates false): proof that cycles do happen.
    harness.secret_sync(
        control_plane,
        namespace,
        "canary",
        sources=[source(canary)],
        refreshInterval="2s",
        instantUpdates=False,
    )
    harness.wait_reason(control_plane, namespace, "once", "Synced")
    assert secret_data(control_plane, namespace, "once") == {"K": "created-once-value-1"}
    assert status(control_plane, namespace, "once")["updateMode"] == "CreatedOnce"

    service.set_secret(PROJECT_ID, "dev", once, "K", "created-once-value-2")
    time.sleep(QUIET_SECONDS)
    assert lists(service, canary) >= 2
    assert lists(service, once) == 1
    assert service.stats()["streamsOpened"] == 0  # nobody here wants a stream
    assert secret_data(control_plane, namespace, "once") == {"K": "created-once-value-1"}

    operator.restart()
    service.reset_stats()
    eventually(lambda: lists(service, canary) >= 2, what="the canary resyncs after the restart", timeout=60)
    assert lists(service, once) == 0
    harness.wait_reason(control_plane, namespace, "once", "Synced")

    # A deleted target is re-created: one list, today's value.
    control_plane.kubectl("delete", "secret", "once", "-n", namespace)
    eventually(
        lambda: secret_data(control_plane, namespace, "once") == {"K": "created-once-value-2"},
        what="the deleted target re-created",
    )
    time.sleep(QUIET_SECONDS)
    assert lists(service, once) == 1


def test_on_change_syncs_on_a_spec_edit_and_not_on_a_service_change(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}/onchange"
    service.set_secret(PROJECT_ID, "dev", path, "K", "on-change-value-1")
    harness.kubernetes_identity(control_plane, namespace)
    service.reset_stats()
    # instantUpdates left at its default (true): OnChange wins, no stream is opened for it.
    harness.secret_sync(
        control_plane,
        namespace,
        "app",
        sources=[source(path)],
        refreshPolicy="OnChange",
        refreshInterval="2s",
    )
    harness.wait_reason(control_plane, namespace, "app", "Synced")
    assert secret_data(control_plane, namespace, "app") == {"K": "on-change-value-1"}
    assert status(control_plane, namespace, "app")["updateMode"] == "OnChange"

    service.set_secret(PROJECT_ID, "dev", path, "K", "on-change-value-2")
    time.sleep(QUIET_SECONDS)
    assert lists(service, path) == 1
    assert service.stats()["streamsOpened"] == 0
    assert secret_data(control_plane, namespace, "app") == {"K": "on-change-value-1"}

    harness.secret_sync(
        control_plane,
        namespace,
        "app",
        sources=[source(path)],
        refreshPolicy="OnChange",
        refreshInterval="3s",
    )
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"K": "on-change-value-2"},
        what="the edited SecretSync synced",
    )
    time.sleep(QUIET_SECONDS)
    assert lists(service, path) == 2

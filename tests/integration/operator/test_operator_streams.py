"""Instant updates through one multiplexed stream per (identity, project), resync after every
reconnect, the watchdog, polling fallback and token re-checks — against every generation of the
real service's event stream (the dev server speaks each one's exact bytes and path filter), and the
seed's documented shape.

The whole module runs once per generation: ``service`` is parametrized, and the ``operator`` fixture
(conftest) follows it, so each generation gets a dev server and an operator of its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import harness
import pytest
from harness import IDENTITY_ID, PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer, run_dev_server

pytestmark = pytest.mark.integration
HOURS = "3h"  # refresh interval far beyond any test: only the stream (or a reconnect) can explain a sync
GENERATIONS = ["documented", "old", "middle", "newest"]


@pytest.fixture(scope="module", params=GENERATIONS)
def service(
    request: pytest.FixtureRequest,
    control_plane: ControlPlane,
    reviewer_token: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[DevServer]:
    generation = request.param
    with run_dev_server(
        seed=harness.seed(control_plane, reviewer_token=reviewer_token),
        data_dir=tmp_path_factory.mktemp(f"devserver-{generation}"),
        extra_args=[
            "--heartbeat-seconds",
            "1",
            "--recheck-seconds",
            "2",
            "--event-generation",
            generation,
        ],
    ) as server:
        harness.record_values(server)
        yield server


def _metric(op: OperatorProcess, name: str) -> float:
    total = 0.0
    for line in op.metrics().splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _sync(cp: ControlPlane, service: DevServer, namespace: str, key: str, value: str, **spec: object) -> str:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, key, value)
    harness.kubernetes_identity(cp, namespace)
    harness.secret_sync(cp, namespace, "app", sources=[source(path)], refreshInterval=HOURS, **spec)
    eventually(lambda: (secret_data(cp, namespace, "app") or {}).get(key) == value, what="the first sync")
    return path


def _streaming(cp: ControlPlane, namespace: str, name: str = "app") -> bool:
    obj = harness.get(cp, "secretsync", name, namespace) or {}
    return (obj.get("status") or {}).get("updateMode") == "Streaming"


def test_a_change_arrives_through_the_stream(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = _sync(control_plane, service, namespace, "K", "stream-value-1")
    eventually(lambda: _streaming(control_plane, namespace), what="updateMode Streaming")
    service.set_secret(PROJECT_ID, "dev", path, "K", "stream-value-2")
    started = time.monotonic()
    eventually(
        lambda: (secret_data(control_plane, namespace, "app") or {}).get("K") == "stream-value-2",
        what="the streamed change",
        timeout=15,
        interval=0.05,
    )
    assert time.monotonic() - started < 15  # against a 3 h refresh interval


def test_a_change_deep_in_a_recursive_scope_arrives_through_the_stream(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    # The newest server filters by startswith, the others by glob: "/p/**" alone would get nothing
    # from the newest, "/p" alone only the top folder from the others.
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", f"{path}/deep/er", "K", "deep-value-1")
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(
        control_plane, namespace, "app", sources=[source(path, recursive=True)], refreshInterval=HOURS
    )
    eventually(
        lambda: (secret_data(control_plane, namespace, "app") or {}).get("K") == "deep-value-1",
        what="the first sync",
    )
    eventually(lambda: _streaming(control_plane, namespace), what="updateMode Streaming")
    events_before = _metric(operator, "secretferry_stream_events_total")
    unknown_before = _metric(operator, "secretferry_stream_unknown_scope_events_total")
    service.set_secret(PROJECT_ID, "dev", f"{path}/deep/er", "K", "deep-value-2")
    eventually(
        lambda: (secret_data(control_plane, namespace, "app") or {}).get("K") == "deep-value-2",
        what="the streamed change two folders down",
        timeout=15,
        interval=0.05,
    )
    assert _metric(operator, "secretferry_stream_events_total") > events_before
    # Every generation is understood: no change of unknown scope was needed to get here.
    assert _metric(operator, "secretferry_stream_unknown_scope_events_total") == unknown_before


def test_changes_while_the_stream_was_down_arrive_after_reconnect(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = _sync(control_plane, service, namespace, "K", "down-value-1")
    eventually(lambda: _streaming(control_plane, namespace), what="updateMode Streaming")
    resyncs = _metric(operator, "secretferry_resyncs_after_reconnect_total")
    service.set_faults({"routes": [{"match": "POST /api/v1/events/subscribe/*", "status": 503}]})
    service.drop_streams()
    time.sleep(1.0)
    service.set_secret(PROJECT_ID, "dev", path, "K", "down-value-2")  # nobody is subscribed now
    time.sleep(1.0)
    assert (secret_data(control_plane, namespace, "app") or {}).get("K") == "down-value-1"
    service.clear_faults()
    eventually(
        lambda: (secret_data(control_plane, namespace, "app") or {}).get("K") == "down-value-2",
        what="the change made while disconnected",
        timeout=30,
    )
    assert _metric(operator, "secretferry_resyncs_after_reconnect_total") > resyncs


def test_a_silent_stream_is_replaced(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = _sync(control_plane, service, namespace, "K", "silent-value-1")
    eventually(lambda: _streaming(control_plane, namespace), what="updateMode Streaming")
    reconnects = _metric(operator, "secretferry_stream_reconnects_total")
    service.set_faults({"streams": {"silent": True}})
    eventually(
        lambda: _metric(operator, "secretferry_stream_reconnects_total") > reconnects,
        what="the watchdog to replace the silent stream",
        timeout=30,
    )
    service.clear_faults()
    service.set_secret(PROJECT_ID, "dev", path, "K", "silent-value-2")
    eventually(
        lambda: (secret_data(control_plane, namespace, "app") or {}).get("K") == "silent-value-2",
        what="a change on the replacement stream",
        timeout=30,
    )


def test_token_recheck_failure_logs_in_again_and_reconnects(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = _sync(control_plane, service, namespace, "K", "recheck-value-1")
    eventually(lambda: _streaming(control_plane, namespace), what="updateMode Streaming")
    logins = service.stats()["logins"]
    service.expire_tokens(IDENTITY_ID)
    eventually(
        lambda: service.stats()["logins"] > logins, what="a fresh login after the re-check failed", timeout=30
    )
    service.set_secret(PROJECT_ID, "dev", path, "K", "recheck-value-2")
    eventually(
        lambda: (secret_data(control_plane, namespace, "app") or {}).get("K") == "recheck-value-2",
        what="a change after re-login",
        timeout=30,
    )


def test_twenty_scopes_never_need_a_sixth_stream(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    harness.kubernetes_identity(control_plane, namespace)
    for i in range(20):
        env = "dev" if i % 2 else "prod"
        path = f"/{namespace}/s{i}"
        service.set_secret(PROJECT_ID, env, path, "K", f"scope-value-{i}")
        harness.secret_sync(
            control_plane,
            namespace,
            f"s{i}",
            sources=[{"projectId": PROJECT_ID, "environment": env, "path": path}],
            refreshInterval=HOURS,
        )
    for i in range(20):
        eventually(
            lambda i=i: secret_data(control_plane, namespace, f"s{i}") == {"K": f"scope-value-{i}"},
            what=f"s{i}",
        )
    for i in (0, 7, 19):
        eventually(lambda i=i: _streaming(control_plane, namespace, f"s{i}"), what=f"s{i} streaming")
    streams = service.stats()["openStreams"]
    assert 1 <= streams <= 5
    env = "dev" if 7 % 2 else "prod"
    service.set_secret(PROJECT_ID, env, f"/{namespace}/s7", "K", "scope-value-changed")
    eventually(
        lambda: secret_data(control_plane, namespace, "s7") == {"K": "scope-value-changed"},
        what="a change on a merged registration",
        timeout=15,
    )


def test_turning_instant_updates_off_falls_back_to_the_refresh_interval(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "toggle-value-1")
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(control_plane, namespace, "app", sources=[source(path)], refreshInterval="2s")
    eventually(lambda: _streaming(control_plane, namespace), what="updateMode Streaming")
    harness.secret_sync(
        control_plane, namespace, "app", sources=[source(path)], refreshInterval="2s", instantUpdates=False
    )

    def polling() -> bool:
        status = (harness.get(control_plane, "secretsync", "app", namespace) or {}).get("status") or {}
        return status.get("updateMode") == "Polling" and status.get("observedGeneration") == 2

    eventually(polling, what="updateMode Polling after instantUpdates: false")
    service.set_secret(PROJECT_ID, "dev", path, "K", "toggle-value-2")
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"K": "toggle-value-2"},
        what="the change by polling every 2 s (not after the 1 h streaming safety net)",
        timeout=15,
    )

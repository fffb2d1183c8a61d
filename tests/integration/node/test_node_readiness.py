"""The readiness probe on the local node: ``helm upgrade --wait`` returns only once the new operator
pod serves, and the pod turns Ready only after its /readyz says so (README, "Readiness and rolling
upgrades").

To make "starting but not serving yet" long enough to watch, the dev server answers logins 4 s late:
the new pod gives its identities' logins a 2 s head start before it lists SecretSyncs and Secrets
(reconcile/startup.py), so it reports ``listing`` (503) for at least that long. Without the probe
the pod would be Ready the moment its container started, and helm would return then.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from node_helpers import installed_operator, operator_harness, synced_namespace

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_pod import OperatorPod
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

harness = operator_harness()
PATH = "/readiness"
LOGIN_LATENCY_MS = 4000  # above the start-up's 2 s login head start: it then lists without them


@pytest.fixture(scope="module")
def operator(
    node_cluster: ControlPlane, node_service: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorPod]:
    with installed_operator(
        node_cluster,
        node_service,
        workdir=tmp_path_factory.mktemp("readiness-pod"),
        release="sf-ready",
        namespace="secretferry-ready",
    ) as pod:
        yield pod


@pytest.fixture(scope="module")
def synced(node_cluster: ControlPlane, node_service: DevServer, operator: OperatorPod) -> Iterator[str]:
    with synced_namespace(
        node_cluster,
        node_service,
        prefix="ready",
        path=PATH,
        values={"API_URL": "https://one.readiness.example"},
        sync="app",
    ) as namespace:
        yield namespace


@dataclass(frozen=True)
class Sample:
    at: float
    new_pod: str | None  # the newest pod that is not the old one, if it exists yet
    new_ready: bool
    endpoint: str  # "<status> <body>" of /readyz, or "down"


def _readyz(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            return f"{r.status} {r.read().decode().strip()}"
    except urllib.error.HTTPError as exc:
        return f"{exc.code} {exc.read().decode().strip()}"
    except OSError:
        return "down"


def _watch(operator: OperatorPod, old: str, stop: threading.Event, out: list[Sample]) -> None:
    """The pod's Ready condition first, the endpoint second: a pod seen Ready had its probe answered
    200 before, so the endpoint must say so when asked after (serving does not flip back)."""
    while not stop.is_set():
        pods = [p for p in operator.pods() if p["metadata"]["name"] != old]
        new = pods[0] if pods else None
        ready = new is not None and operator.is_ready(new)
        out.append(
            Sample(time.monotonic(), new and new["metadata"]["name"], ready, _readyz(operator.readiness_port))
        )
        time.sleep(0.05)


def test_helm_upgrade_waits_until_the_new_pod_serves(
    node_cluster: ControlPlane, node_service: DevServer, operator: OperatorPod, synced: str
) -> None:
    (old,) = operator.pods()
    old_name = old["metadata"]["name"]
    assert _readyz(operator.readiness_port) == "200 serving"

    node_service.set_faults({"routes": [{"match": "POST /api/v1/auth/*", "latencyMs": LOGIN_LATENCY_MS}]})
    samples: list[Sample] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(operator, old_name, stop, samples), daemon=True)
    watcher.start()
    started = time.monotonic()
    try:
        # A setting change rolls the pod (Recreate: the old one goes first); --wait: until Ready.
        operator.upgrade({"config": {"logLevel": "DEBUG"}}, wait_seconds=180)
        returned = time.monotonic()
        (new,) = operator.pods()
        assert new["metadata"]["name"] != old_name and operator.is_ready(new)
    finally:
        stop.set()
        watcher.join(10)
        node_service.clear_faults()

    new_samples = [s for s in samples if s.new_pod == new["metadata"]["name"]]
    listing = [s for s in new_samples if s.endpoint in ("503 starting", "503 listing")]
    serving = [s for s in new_samples if s.endpoint == "200 serving"]
    ready = [s for s in new_samples if s.new_ready]
    timeline = "\n".join(f"{s.at - started:6.2f} s  ready={s.new_ready!s:5}  {s.endpoint}" for s in samples)
    assert listing and serving and ready, timeline
    # The new pod ran but was not Ready while it was starting or listing...
    assert not any(s.new_ready for s in listing), timeline
    # the 2 s head start, seen from outside (samples are a kubectl call apart: up to ~0.5 s each)
    assert listing[-1].at - listing[0].at >= 1.0, timeline
    # ...was Ready only once its endpoint said it serves (each Ready sample: serving by then)...
    assert all(s.endpoint == "200 serving" for s in ready), timeline
    assert serving[0].at <= ready[0].at, timeline
    # ...and helm returned only after that: no sample saw it listing after helm returned (a sample's
    # time is taken before its /readyz call, so "listing" then means listing at or after it), and
    # the pod was Ready when helm returned (asserted above). Not ``ready[0].at <= returned``: the
    # watcher sees Ready a kubectl call late, so its first Ready sample may come after helm's return.
    assert listing[-1].at < returned, timeline
    print(
        f"new pod seen at {new_samples[0].at - started:.1f} s, its /readyz first answered at"
        f" {listing[0].at - started:.1f} s;"
        f" upgrade --wait returned after {returned - started:.1f} s; new pod NotReady while starting/listing"
        f" for {listing[-1].at - listing[0].at:.1f} s, serving at {serving[0].at - started:.1f} s,"
        f" Ready seen at {ready[0].at - started:.1f} s"
    )

    # The new pod does serve: a change at the service reaches the Secret.
    node_service.set_secret(harness.PROJECT_ID, "dev", PATH, "API_URL", "https://two.readiness.example")
    harness.eventually(
        lambda: (
            (harness.secret_data(node_cluster, synced, "app") or {}).get("API_URL")
            == "https://two.readiness.example"
        ),
        timeout=60,
        what="a change after the upgrade",
    )

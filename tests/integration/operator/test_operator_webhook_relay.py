"""Two replicas (leader election on a real Lease) with the webhook receiver: the service's webhook is
sent to the *standby* only, as a Service routing to every replica may do, and still reaches the
Secret — the standby verifies it and relays it to the leader (reconcile/webhook_relay.py). A forged
request to the standby is refused there and costs the leader nothing. A tenant cannot point the
relay at a listener of its own: the Lease that carries the leader's address is not theirs to write.

Dev server with ``--no-events-plan`` and a resync hours away: only the relayed webhook can bring the
change.
"""

from __future__ import annotations

import json
import time
from typing import Any

import harness
import pytest
import tenant
import webhook_sender
from harness import OPERATOR_NAMESPACE, PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.net import free_port
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer
from secretferry.models import labels
from secretferry.service import webhook_signature as sig

pytestmark = pytest.mark.integration
KEY = "webhook-relay-signing-key"
HOURS = "3h"


def _metric(op: OperatorProcess, result: str) -> float:
    return webhook_sender.requests_counted(op.metrics(), result)


def _lease(cp: ControlPlane, name: str) -> dict[str, Any]:
    out = cp.kubectl("get", "lease", name, "-n", OPERATOR_NAMESPACE, "-o", "json", check=False)
    lease: dict[str, Any] = json.loads(out) if out.strip().startswith("{") else {}
    return lease


def test_a_webhook_sent_to_the_standby_reaches_the_secret_through_the_leader(
    control_plane: ControlPlane,
    crds: None,
    no_events_service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    keyfile = webhook_sender.key_file(tmp_path_factory.mktemp("webhook-relay-key"), KEY)
    logs = tmp_path_factory.mktemp("op-webhook-relay")
    lease = f"secretferry-relay-{namespace}"[:63]
    ports = {"a": free_port(), "b": free_port()}

    def replica(name: str) -> OperatorProcess:
        return harness.start_operator(
            control_plane,
            no_events_service,
            logs / f"{name}.log",
            SECRETFERRY_PEERING=lease,
            SECRETFERRY_POD_NAME=f"replica-{name}",
            SECRETFERRY_POD_IP="127.0.0.1",
            SECRETFERRY_WEBHOOK_PORT=str(ports[name]),
            SECRETFERRY_WEBHOOK_SIGNING_KEY_FILE=str(keyfile),
        )

    leader = replica("a")
    standby: OperatorProcess | None = None
    try:
        eventually(
            lambda: (_lease(control_plane, lease).get("spec") or {}).get("holderIdentity") == "replica-a",
            what="replica a leads",
        )
        advertised = _lease(control_plane, lease)["metadata"]["annotations"][
            labels.WEBHOOK_ADDRESS_ANNOTATION
        ]
        assert advertised == f"127.0.0.1:{ports['a']}"
        standby = replica("b")
        standby_url = f"http://127.0.0.1:{ports['b']}/webhook"

        path = f"/{namespace}-relay"
        no_events_service.set_secret(PROJECT_ID, "dev", path, "K", "relay-value-1")
        harness.kubernetes_identity(control_plane, namespace)
        harness.secret_sync(control_plane, namespace, "app", sources=[source(path)], refreshInterval=HOURS)
        eventually(
            lambda: secret_data(control_plane, namespace, "app") == {"K": "relay-value-1"}, what="first sync"
        )

        # The standby knows the leader once it has read the Lease: a signed probe is relayed (202).
        def relayed_probe() -> bool:
            body, now_ms = webhook_sender.body(path)
            return webhook_sender.post(standby_url, body, sig.header_value(body, KEY, now_ms)) == 202

        eventually(relayed_probe, what="the standby relays to the leader")

        # A forged request at the standby: refused there, never relayed, no list at the service.
        time.sleep(1.0)
        lists_before = no_events_service.stats()["listSecrets"]
        forged_at_leader = _metric(leader, sig.FORGED)
        body, now_ms = webhook_sender.body(path)
        assert webhook_sender.post(standby_url, body, sig.header_value(body, "guessed-key", now_ms)) == 401
        time.sleep(1.0)
        assert no_events_service.stats()["listSecrets"] == lists_before
        assert _metric(leader, sig.FORGED) == forged_at_leader

        # The service's webhook goes to the standby only; the change still arrives.
        webhook_sender.register(no_events_service, url=standby_url, path=path, key=KEY)
        accepted_at_leader = _metric(leader, sig.OK)
        started = time.monotonic()
        no_events_service.set_secret(PROJECT_ID, "dev", path, "K", "relay-value-2")
        while secret_data(control_plane, namespace, "app") != {"K": "relay-value-2"}:
            assert time.monotonic() - started < 10, "the relayed change never arrived"
            time.sleep(0.01)
        latency = time.monotonic() - started
        print(f"change -> Secret by a webhook sent to the standby: {latency * 1000:.0f} ms")
        assert latency < 2.0
        assert _metric(standby, "relayed") >= 2  # the probe and the service's webhook
        assert _metric(leader, sig.OK) >= accepted_at_leader + 1
        assert _metric(standby, sig.OK) == 0  # the standby nudged nothing itself

        # The tenant tries to point the relay at its own listener: the Lease is not theirs to write.
        with tenant.listening() as spy:
            spoof = f"127.0.0.1:{spy.port}"
            patch = json.dumps({"metadata": {"annotations": {labels.WEBHOOK_ADDRESS_ANNOTATION: spoof}}})
            for attempt in (
                ["annotate", "--overwrite", "lease", lease, f"{labels.WEBHOOK_ADDRESS_ANNOTATION}={spoof}"],
                ["patch", "lease", lease, "--type=merge", "-p", patch],
            ):
                with pytest.raises(RuntimeError, match=r"(?i)forbidden"):
                    hostile.kubectl(*attempt, "-n", OPERATOR_NAMESPACE)
            assert not hostile.can("update", "leases")  # nor a Lease of its own namespace would count
            body, now_ms = webhook_sender.body(path)
            assert webhook_sender.post(standby_url, body, sig.header_value(body, KEY, now_ms)) == 202
            assert spy.received == []
    finally:
        if standby is not None:
            standby.stop()
        leader.stop()
    harness.assert_no_values_leaked(control_plane, leader)
    if standby is not None:
        harness.assert_no_values_leaked(control_plane, standby)

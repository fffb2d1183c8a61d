"""After an outage of the service: one login per identity, every scope converges within
seconds of the service coming back (not after each scope's own backoff), and access tokens the
operator stops using are revoked at the service.

The operator here runs with the production backoff (1 s doubling to 300 s), not the harness's
short test backoff: with a 3 s ceiling any scope would converge soon anyway, and the test would
prove nothing about recovery.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import harness
import pytest
from harness import IDENTITY_ID, PROJECT_ID, UNIVERSAL_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

OUTAGE_SECONDS = 10.0
# Bounded, not tight: the probe notices a host that is back within 5 s; the rest is the work.
CONVERGE_WITHIN_SECONDS = 20.0
ALL_ROUTES_DOWN = {"routes": [{"match": "*", "status": 503}]}
IDENTITIES = {"ferry": IDENTITY_ID, "uni": UNIVERSAL_ID}
SCOPES = 6  # half polled every 5 s (their list calls fail and back off), half on event streams
SYNCS_PER_SCOPE = 2


@pytest.fixture(scope="module")
def recovering_operator(
    control_plane: ControlPlane, crds: None, service: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    op = harness.start_operator(
        control_plane,
        service,
        tmp_path_factory.mktemp("operator-outage") / "operator.log",
        SECRETFERRY_BACKOFF_INITIAL_SECONDS="1",
        SECRETFERRY_BACKOFF_MAX_SECONDS="300",
        # Retired sessions (identity changed or removed) revoke their token after 3 call timeouts.
        SECRETFERRY_SERVICE_TIMEOUT_SECONDS="2",
    )
    try:
        yield op
    finally:
        op.stop()
    harness.assert_no_values_leaked(control_plane, op)


def _identities(cp: ControlPlane, namespace: str) -> None:
    harness.kubernetes_identity(cp, namespace, "ferry")
    harness.universal_identity(cp, namespace, "uni")


def _syncs(cp: ControlPlane, namespace: str) -> dict[str, str]:
    """SecretSyncs over SCOPES scopes and both identities; returns name → scope path."""
    names: dict[str, str] = {}
    items: list[dict[str, Any]] = []
    for j in range(SCOPES):
        path = f"/{namespace}/s{j}"
        polled = j % 2 == 0
        for i in range(SYNCS_PER_SCOPE):
            name = f"s{j}-{i}"
            names[name] = path
            spec: dict[str, Any] = {
                "identityRef": {"kind": "MachineIdentity", "name": "ferry" if j < SCOPES // 2 else "uni"},
                "sources": [source(path)],
            }
            if polled:
                spec |= {"instantUpdates": False, "refreshInterval": "5s"}
            items.append(
                {
                    "apiVersion": "secretferry.io/v1alpha1",
                    "kind": "SecretSync",
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": spec,
                }
            )
    cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return names


def _set_values(service: DevServer, names: dict[str, str], value: str) -> None:
    for path in sorted(set(names.values())):
        service.set_secret(PROJECT_ID, "dev", path, "K", f"{value}-{path.rsplit('/', 1)[-1]}")


def _converged(cp: ControlPlane, namespace: str, names: dict[str, str], value: str) -> bool:
    for name, path in names.items():
        if secret_data(cp, namespace, name) != {"K": f"{value}-{path.rsplit('/', 1)[-1]}"}:
            return False
        cond = harness.ready(cp, namespace, name)
        if not cond or cond.get("status") != "True":
            return False
    return True


def _not_ready(cp: ControlPlane, namespace: str, names: dict[str, str]) -> list[str]:
    return [n for n in names if (harness.ready(cp, namespace, n) or {}).get("status") != "True"]


def _metric(text: str, name: str, label: str = "") -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and label in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_after_an_outage_one_login_per_identity_and_prompt_convergence(
    control_plane: ControlPlane, recovering_operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    op = recovering_operator
    _identities(control_plane, namespace)
    names = _syncs(control_plane, namespace)
    _set_values(service, names, "before")
    eventually(
        lambda: _converged(control_plane, namespace, names, "before"), what="the first sync", timeout=60
    )
    logins_metric = _metric(op.metrics(), "secretferry_logins_total", 'result="success"')
    log_offset = len(op.log_text())

    service.reset_stats()
    service.set_faults(ALL_ROUTES_DOWN)
    service.drop_streams()
    outage_started = time.monotonic()
    try:
        time.sleep(OUTAGE_SECONDS / 2)
        _set_values(service, names, "during")  # the admin API is never faulted
        # Every token dies during the outage: each identity has to log in again once it is over.
        for identity_id in IDENTITIES.values():
            service.expire_tokens(identity_id)
        time.sleep(max(0.0, outage_started + OUTAGE_SECONDS - time.monotonic()))
        failed = _not_ready(control_plane, namespace, names)
        # The polled scopes failed (and backed off): the outage was felt, not slept through.
        assert failed, "no SecretSync noticed the outage"
        assert service.stats()["logins"] == 0  # nothing answered, so no token was rejected either
    finally:
        service.reset_stats()
        service.clear_faults()
    back = time.monotonic()

    eventually(
        lambda: _converged(control_plane, namespace, names, "during"),
        what="every SecretSync to converge after the outage",
        timeout=CONVERGE_WITHIN_SECONDS,
        interval=0.1,
    )
    converged_after = time.monotonic() - back
    stats = service.stats()
    # One login per identity (single flight), not one per scope, stream or SecretSync.
    assert stats["logins"] == len(IDENTITIES), stats["routes"]
    assert stats["loginFailures"] == 0
    recovery_log = op.log_text()[log_offset:]
    relogins = re.findall(r"logged in as MachineIdentity/[^ ]+ \((\w+)\): ([^\"]+)", recovery_log)
    assert sorted(method for method, _ in relogins) == ["kubernetes", "universal"], relogins
    assert all(reason == "the service rejected the token" for _, reason in relogins), relogins
    metrics_text = op.metrics()
    assert _metric(metrics_text, "secretferry_logins_total", 'result="success"') - logins_metric == len(
        IDENTITIES
    )
    assert "answers again" in recovery_log
    # The rejected tokens are revoked too (here they had expired; a token rejected for another
    # reason may still be alive), and nothing else is left behind: one live token per identity.
    eventually(
        lambda: service.stats()["routes"].get("POST /api/v1/auth/token/revoke", 0) >= len(IDENTITIES),
        what="the rejected tokens to be revoked",
        timeout=10,
    )
    live = service.stats()["liveTokens"]
    assert all(live.get(i, 0) <= 1 for i in IDENTITIES.values()), live
    print(f"converged {converged_after:.1f} s after the service came back; logins {stats['logins']}")


def test_replaced_tokens_are_revoked_at_the_service(
    control_plane: ControlPlane,
    recovering_operator: OperatorProcess,
    service: DevServer,
    namespace: str,
) -> None:
    """A changed identity's old token is revoked once the calls under way had time to finish; a
    deleted identity's too; and a stopping operator revokes the tokens it holds."""
    op = recovering_operator
    # The identities of an earlier test's namespace (deleted at its end, same service identities)
    # are deleted by the namespace controller; their tokens go once the grace period is over.
    eventually(
        lambda: service.live_tokens(IDENTITY_ID) == 0 and service.live_tokens(UNIVERSAL_ID) == 0,
        what="no live tokens left from earlier tests",
        timeout=60,
    )
    _identities(control_plane, namespace)
    names = _syncs(control_plane, namespace)
    _set_values(service, names, "tokens")
    eventually(
        lambda: _converged(control_plane, namespace, names, "tokens"), what="the first sync", timeout=60
    )
    assert service.live_tokens(IDENTITY_ID) == 1 and service.live_tokens(UNIVERSAL_ID) == 1
    revoke_route = "POST /api/v1/auth/token/revoke"
    revokes = service.stats()["routes"].get(revoke_route, 0)

    # A new generation of "uni" (a spec change: the default host, now explicit) gets a new session
    # that logs in; the old session's token is revoked after the grace period (3 x the 2 s call
    # timeout here) in which reconciles already under way finish with it.
    patch = {"spec": {"hostAPI": service.base_url}}
    control_plane.kubectl(
        "patch", "machineidentity", "uni", "-n", namespace, "--type=merge", "-p", json.dumps(patch)
    )
    eventually(
        lambda: (
            service.live_tokens(UNIVERSAL_ID) == 1
            and service.stats()["routes"].get(revoke_route, 0) > revokes
        ),
        what="the changed identity's old token to be revoked",
        timeout=30,
    )

    # Deleting an identity revokes its token.
    control_plane.kubectl("delete", "machineidentity", "ferry", "-n", namespace)
    eventually(lambda: service.live_tokens(IDENTITY_ID) == 0, what="the deleted identity's token", timeout=30)

    # A stopping operator revokes what it holds (and a fresh one logs in again).
    assert service.live_tokens(UNIVERSAL_ID) == 1
    op.stop()
    try:
        assert service.live_tokens(UNIVERSAL_ID) == 0
    finally:
        op.start()

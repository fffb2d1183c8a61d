"""The webhook receiver in the chart: off by default; when on, a Service, the key mounted read-only,
the NetworkPolicy opened on its port only, and an Ingress only when asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chart_helpers import Helm, Render, assert_refused, by_kind, named, operator_container, operator_env

ON = ["webhook.enabled=true", "webhook.signingKeySecret=wh-key"]


def test_off_by_default(render: Render) -> None:
    docs = render()
    assert operator_env(docs)["SECRETFERRY_WEBHOOK_PORT"] == "0"
    assert by_kind(docs, "Ingress") == []
    assert all(not d["metadata"]["name"].endswith("-webhook") for d in by_kind(docs, "Service"))


def test_enabled_renders_service_key_mount_and_policy(render: Render) -> None:
    docs = render(set_values=[*ON, "networkPolicy.enabled=true"])
    assert operator_env(docs)["SECRETFERRY_WEBHOOK_PORT"] == "8083"
    service = named(docs, "Service", "ci-secretferry-webhook")
    assert service["spec"]["ports"][0]["targetPort"] == "webhook"
    container = operator_container(docs)
    mount = next(m for m in container["volumeMounts"] if m["name"] == "webhook-key")
    assert mount["readOnly"] is True and mount["mountPath"] == "/etc/secretferry/webhook"
    policy = by_kind(docs, "NetworkPolicy")[0]
    ports = [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]]
    assert 8083 in ports
    assert by_kind(docs, "Ingress") == []
    with_ingress = render(set_values=[*ON, "webhook.ingress.enabled=true", "webhook.ingress.host=h.example"])
    ingress = by_kind(with_ingress, "Ingress")[0]
    assert ingress["spec"]["rules"][0]["host"] == "h.example"


def test_enabled_without_a_key_secret_is_refused(helm: Helm) -> None:
    assert_refused(helm, ["webhook.enabled=true"], "signingKeySecret")


def test_with_replicas_every_replica_is_behind_the_service_and_may_relay_to_the_leader(
    render: Render, tmp_path: Path
) -> None:
    """replicaCount 2: the Service selects every replica (a standby verifies and relays to the
    leader, reconcile/webhook_relay.py), each pod gets its IP to advertise, and the NetworkPolicy
    lets the release's pods reach each other's webhook port even when `webhook.from` narrows it."""
    peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress"}}}
    values = tmp_path / "values.yaml"
    values.write_text(json.dumps({"webhook": {"from": [peer]}}))  # JSON is YAML
    docs = render(
        values,
        set_values=[*ON, "replicaCount=2", "leaderElection.enabled=true", "networkPolicy.enabled=true"],
    )
    deployment = by_kind(docs, "Deployment")[0]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    service = named(docs, "Service", "ci-secretferry-webhook")
    selector = service["spec"]["selector"]
    assert selector.items() <= pod_labels.items()  # every replica, not a leader-only label
    assert not any("leader" in k for k in selector)
    container = operator_container(docs)
    pod_ip = next(e for e in container["env"] if e["name"] == "SECRETFERRY_POD_IP")
    assert pod_ip["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert operator_env(docs)["SECRETFERRY_PEERING"]
    policy = by_kind(docs, "NetworkPolicy")[0]["spec"]
    own = {"podSelector": {"matchLabels": deployment["spec"]["selector"]["matchLabels"]}}
    webhook_in = next(r for r in policy["ingress"] if [p["port"] for p in r["ports"]] == [8083])
    assert webhook_in["from"] == [peer, own]
    webhook_out = next(r for r in policy["egress"] if [p["port"] for p in r["ports"]] == [8083])
    assert webhook_out["to"] == [own]
    # no new permission for the relay: the operator cannot patch pods
    for role in by_kind(docs, "Role") + by_kind(docs, "ClusterRole"):
        for rule in role.get("rules") or []:
            if "pods" in rule.get("resources", []):
                assert not {"patch", "update"} & set(rule["verbs"]), role["metadata"]["name"]


def test_trusted_proxies_and_the_over_rate_budget_reach_the_operator(
    render: Render, helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off by default (the peer counts, every header ignored); a list renders as the comma-separated
    setting the operator loads; a header other than the two it reads is refused by the schema."""
    from secretferry import settings

    env = operator_env(render(set_values=ON))
    assert env["SECRETFERRY_WEBHOOK_TRUSTED_PROXIES"] == ""
    assert env["SECRETFERRY_WEBHOOK_OVER_RATE_VERIFY_PER_SECOND"] == "20000"
    docs = render(
        set_values=[
            *ON,
            "webhook.trustedProxies={10.42.0.0/16,fd00:42::/64}",
            "webhook.clientAddressHeader=Forwarded",
            "webhook.overRateVerifyPerSecond=0",
        ]
    )
    for key, value in operator_env(docs).items():
        if key.startswith("SECRETFERRY_") and isinstance(value, str):
            monkeypatch.setenv(key, value)
    loaded = settings.load()
    assert loaded.webhook_trusted_proxies == "10.42.0.0/16,fd00:42::/64"
    assert loaded.webhook_client_address_header == "Forwarded"
    assert loaded.webhook_over_rate_verify_per_second == 0
    assert_refused(helm, [*ON, "webhook.clientAddressHeader=X-Real-IP"], "clientAddressHeader")
    assert_refused(helm, [*ON, "webhook.trustedProxies={ingress.example.com}"], "trustedProxies")

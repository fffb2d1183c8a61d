"""The webhook receiver in the chart: off by default; when on, a Service, the key mounted read-only,
the NetworkPolicy opened on its port only, and an Ingress only when asked."""

from __future__ import annotations

from chart_helpers import Helm, Render, assert_refused, by_kind, named, operator_container, operator_env

ON = ["webhook.enabled=true", "webhook.signingKeySecret=wh-key"]


def test_off_by_default(render: Render) -> None:
    docs = render()
    assert operator_env(docs)["SECRETFERRY_WEBHOOK_PORT"] == "0"
    assert by_kind(docs, "Ingress") == []
    assert all(not d["metadata"]["name"].endswith("-webhook") for d in by_kind(docs, "Service"))


def test_enabled_renders_service_key_mount_and_policy(render: Render) -> None:
    docs = render(set_values=[*ON, "networkPolicy.enabled=true"])
    assert operator_env(docs)["SECRETFERRY_WEBHOOK_PORT"] == "8082"
    service = named(docs, "Service", "ci-secretferry-webhook")
    assert service["spec"]["ports"][0]["targetPort"] == "webhook"
    container = operator_container(docs)
    mount = next(m for m in container["volumeMounts"] if m["name"] == "webhook-key")
    assert mount["readOnly"] is True and mount["mountPath"] == "/etc/secretferry/webhook"
    policy = by_kind(docs, "NetworkPolicy")[0]
    ports = [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]]
    assert 8082 in ports
    assert by_kind(docs, "Ingress") == []
    with_ingress = render(set_values=[*ON, "webhook.ingress.enabled=true", "webhook.ingress.host=h.example"])
    ingress = by_kind(with_ingress, "Ingress")[0]
    assert ingress["spec"]["rules"][0]["host"] == "h.example"


def test_enabled_without_a_key_secret_is_refused(helm: Helm) -> None:
    assert_refused(helm, ["webhook.enabled=true"], "signingKeySecret")

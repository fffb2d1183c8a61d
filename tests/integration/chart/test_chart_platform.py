"""What `helm template` renders for the conventions a platform team expects (no cluster needed):
aggregated roles for people, the token-minting and rollout switches, prometheus-operator objects
only where their API is served, alerts and a dashboard over the real metric names, the
NetworkPolicy, and the PodDisruptionBudget rule."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from chart_helpers import (
    CHART,
    CI,
    CI_VALUES,
    CLUSTER_RULES,
    KOPF_NAMESPACE_OBSERVER,
    NAMESPACED_RULES,
    Helm,
    Render,
    assert_refused,
    by_kind,
    named,
    one,
    operator_env,
    rule_triples,
    set_args,
)

SERVICE_MONITOR_API = "monitoring.coreos.com/v1/ServiceMonitor"
PROMETHEUS_RULE_API = "monitoring.coreos.com/v1/PrometheusRule"
MONITORING_APIS = [SERVICE_MONITOR_API, PROMETHEUS_RULE_API]
ALERTS = {
    "SecretferrySecretSyncsNotReady",
    "SecretferryStreamDown",
    "SecretferryLoginsFailing",
    "SecretferryRateLimited",
}
TOKEN_RULES = {("", "serviceaccounts", verb) for verb in ("get", "list", "watch")} | {
    ("", "serviceaccounts/token", "create")
}
ROLLOUT_RULES = {
    (group, kind, verb) for group, kind, verb in NAMESPACED_RULES if group in {"apps", "argoproj.io"}
}


def _notes(helm: Helm, *set_values: str) -> str:
    return helm("install", "ci", str(CHART), "--dry-run=client", "--namespace", "ops", *set_args(set_values))


def _exported_metrics() -> dict[str, set[str]]:
    """Each metric the operator exports (operator/secretferry/metrics.py) and its series names."""
    from prometheus_client import Counter, Gauge, Histogram, Info, Summary

    from secretferry import metrics

    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "summary": ("", "_sum", "_count", "_created"),
        "info": ("_info",),
    }
    found: dict[str, set[str]] = {}
    for value in vars(metrics).values():
        if not isinstance(value, (Counter, Gauge, Histogram, Info, Summary)):
            continue
        for metric in value.describe():
            found[metric.name] = {metric.name + s for s in suffixes.get(metric.type, ("",))}
    assert {"secretferry_secretsyncs", "secretferry_syncs"} <= set(found)  # the lookup works
    return found


def _exported_series() -> set[str]:
    return set().union(*_exported_metrics().values())


def _series_in(expr: str) -> set[str]:
    return set(re.findall(r"\bsecretferry_[a-z_]+\b", expr))


def _balanced(expr: str) -> bool:
    depth = {"(": 0, "{": 0, "[": 0}
    closing = {")": "(", "}": "{", "]": "["}
    for ch in re.sub(r'"[^"]*"', "", expr):
        if ch in depth:
            depth[ch] += 1
        elif ch in closing:
            depth[closing[ch]] -= 1
            if depth[closing[ch]] < 0:
                return False
    return all(v == 0 for v in depth.values())


# --- aggregated roles for people ---------------------------------------------------------------


def test_aggregated_roles_give_namespaced_kinds_to_the_built_in_roles(render: Render) -> None:
    docs = render()
    view = named(docs, "ClusterRole", "ci-secretferry-view")
    edit = named(docs, "ClusterRole", "ci-secretferry-edit")
    admin = named(docs, "ClusterRole", "ci-secretferry-admin")
    aggregate = "rbac.authorization.k8s.io/aggregate-to-"
    labels = {
        name: {
            k.removeprefix(aggregate)
            for k, v in role["metadata"]["labels"].items()
            if k.startswith(aggregate)
        }
        for name, role in {"view": view, "edit": edit, "admin": admin}.items()
    }
    assert labels == {"view": {"view", "edit", "admin"}, "edit": {"edit", "admin"}, "admin": {"admin"}}
    assert all(
        v == "true" for r in (view, edit, admin) for k, v in r["metadata"]["labels"].items() if aggregate in k
    )
    kinds = (
        "secretsyncs",
        "machineidentities",
        "passwordgenerators",
        "uuidgenerators",
        "dynamicsecretleases",
        "pushsecrets",
    )
    reads = {("secretferry.io", k, v) for k in kinds for v in ("get", "list", "watch")}
    writes = {("secretferry.io", k, v) for k in kinds for v in ("create", "update", "patch", "delete")}
    status_reads = {("secretferry.io", f"{k}/status", "get") for k in kinds}
    assert rule_triples(view) == reads | status_reads
    assert rule_triples(edit) == reads | writes
    assert rule_triples(admin) == rule_triples(edit)
    for role in (view, edit, admin):
        resources = {res for _, res, _ in rule_triples(role)}
        # Cluster-scoped and able to name any host or ServiceAccount: cluster admins only.
        assert not any(res.startswith("clustermachineidentities") for res in resources)
        # Decides which namespaces receive a Secret: never aggregated to view/edit/admin.
        assert not any(res.startswith("clustersecretsyncs") for res in resources)
        # Granting an identity more access at the service: cluster admins only.
        assert not any(res.startswith("temporaryprivileges") for res in resources)
        assert not any(res.endswith("/status") and verb != "get" for _, res, verb in rule_triples(role))
        assert "aggregationRule" not in role
    # Rights for people: nothing binds them to the operator (or to anyone).
    bound = {b["roleRef"]["name"] for b in by_kind(docs, "ClusterRoleBinding") + by_kind(docs, "RoleBinding")}
    assert bound.isdisjoint({"ci-secretferry-view", "ci-secretferry-edit", "ci-secretferry-admin"})


@pytest.mark.parametrize("set_values", [["rbac.aggregateToDefaultRoles=false"], ["rbac.create=false"]])
def test_aggregated_roles_can_be_left_out(render: Render, set_values: list[str]) -> None:
    names = {r["metadata"]["name"] for r in by_kind(render(set_values=set_values), "ClusterRole")}
    assert not names & {"ci-secretferry-view", "ci-secretferry-edit", "ci-secretferry-admin"}


def test_aggregated_roles_in_namespaced_mode(render: Render) -> None:
    names = {r["metadata"]["name"] for r in by_kind(render(CI / "namespaced-values.yaml"), "ClusterRole")}
    assert names == {
        "ci-secretferry-cluster",
        "ci-secretferry-view",
        "ci-secretferry-edit",
        "ci-secretferry-admin",
    }


# --- token minting and rollouts switches -------------------------------------------------------


@pytest.mark.parametrize(
    ("set_values", "removed", "env"),
    [
        (["config.tokenRequestsEnabled=false"], TOKEN_RULES, {"TOKEN_REQUESTS_ENABLED": "false"}),
        (["config.rolloutsEnabled=false"], ROLLOUT_RULES, {"ROLLOUTS_ENABLED": "false"}),
        (
            ["config.tokenRequestsEnabled=false", "config.rolloutsEnabled=false"],
            TOKEN_RULES | ROLLOUT_RULES,
            {"TOKEN_REQUESTS_ENABLED": "false", "ROLLOUTS_ENABLED": "false"},
        ),
    ],
    ids=["no-tokens", "no-rollouts", "neither"],
)
def test_switches_remove_rules_and_tell_the_operator(
    render: Render, set_values: list[str], removed: set[tuple[str, str, str]], env: dict[str, str]
) -> None:
    assert removed and removed <= NAMESPACED_RULES
    docs = render(set_values=set_values)
    assert (
        rule_triples(named(docs, "ClusterRole", "ci-secretferry"))
        == (NAMESPACED_RULES - removed) | CLUSTER_RULES
    )
    assert {k: operator_env(docs)[f"SECRETFERRY_{k}"] for k in env} == env
    namespaced = render(CI / "namespaced-values.yaml", set_values=set_values)
    for role in by_kind(namespaced, "Role"):
        if role["metadata"]["name"] == "ci-secretferry":
            assert rule_triples(role) == NAMESPACED_RULES - removed
    assert rule_triples(named(namespaced, "ClusterRole", "ci-secretferry-cluster")) == (
        CLUSTER_RULES | KOPF_NAMESPACE_OBSERVER
    )


def test_restricted_ci_values_are_what_the_operator_settings_load(
    render: Render, monkeypatch: pytest.MonkeyPatch
) -> None:
    from secretferry import settings

    docs = render(CI / "restricted-values.yaml")
    for key, value in operator_env(docs).items():
        if key.startswith("SECRETFERRY_") and isinstance(value, str):
            monkeypatch.setenv(key, value)
    loaded = settings.load()
    assert loaded.token_requests_enabled is False and loaded.rollouts_enabled is False
    rules = rule_triples(named(docs, "ClusterRole", "ci-secretferry"))
    assert not rules & (TOKEN_RULES | ROLLOUT_RULES)
    assert by_kind(docs, "ClusterRole") == [named(docs, "ClusterRole", "ci-secretferry")]


def test_switch_notes(helm: Helm) -> None:
    out = _notes(helm, "config.tokenRequestsEnabled=false", "config.rolloutsEnabled=false")
    assert "TokenRequestsDisabled" in out and "config.rolloutsEnabled=false" in out
    assert "TokenRequestsDisabled" not in _notes(helm)


# --- prometheus-operator objects only where their API is served ---------------------------------


def test_monitoring_objects_need_the_api(render: Render, helm: Helm) -> None:
    values = CI / "monitoring-values.yaml"
    without = render(values)
    assert by_kind(without, "ServiceMonitor") == [] and by_kind(without, "PrometheusRule") == []
    assert one(without, "ConfigMap")  # the dashboard needs no foreign API
    only_monitor = render(values, api_versions=[SERVICE_MONITOR_API])
    assert one(only_monitor, "ServiceMonitor") and by_kind(only_monitor, "PrometheusRule") == []
    both = render(values, api_versions=MONITORING_APIS)
    assert one(both, "ServiceMonitor") and one(both, "PrometheusRule")
    # Skipped, not failed, and the install notes say so.
    out = _notes(helm, "serviceMonitor.enabled=true", "prometheusRule.enabled=true")
    assert "WARNING: serviceMonitor.enabled=true" in out
    assert "WARNING: prometheusRule.enabled=true" in out
    assert "WARNING" not in _notes(helm)


def test_prometheus_rule_alerts_read_real_metrics(render: Render) -> None:
    rule = one(render(CI / "monitoring-values.yaml", api_versions=MONITORING_APIS), "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    assert rule["metadata"]["namespace"] == "secretferry-system"
    (group,) = rule["spec"]["groups"]
    alerts = {r["alert"]: r for r in group["rules"]}
    assert set(alerts) == ALERTS
    exported = _exported_series()
    for name, alert in alerts.items():
        expr = alert["expr"]
        assert _series_in(expr) and _series_in(expr) <= exported, (name, _series_in(expr) - exported)
        assert _balanced(expr), expr
        # This release's series only: the ServiceMonitor's namespace and job labels.
        assert expr.count('namespace="secretferry-system", job="secretferry"') == expr.count("secretferry_")
        assert alert["labels"] == {"severity": "warning", "team": "platform"}
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]
        assert re.fullmatch(r"\d+m", alert["for"])
    assert alerts["SecretferrySecretSyncsNotReady"]["for"] == "15m"
    assert 'secretferry_secretsyncs{ready="false"' in alerts["SecretferrySecretSyncsNotReady"]["expr"]
    assert "secretferry_open_streams" in alerts["SecretferryStreamDown"]["expr"]
    assert 'result!="success"' in alerts["SecretferryLoginsFailing"]["expr"]
    assert 'status="RateLimited"' in alerts["SecretferryRateLimited"]["expr"]
    # Prometheus templates survive Helm's: {{ $labels.x }} reaches Prometheus verbatim.
    assert "{{ $labels.namespace }}" in alerts["SecretferryStreamDown"]["annotations"]["description"]


def test_prometheus_rule_options(render: Render) -> None:
    extra = {"alert": "MyOwn", "expr": "vector(1)", "labels": {"severity": "info"}}
    rule = one(
        render(
            api_versions=MONITORING_APIS,
            set_values=[
                "prometheusRule.enabled=true",
                "prometheusRule.namespace=monitoring",
                "prometheusRule.disabled={SecretferryStreamDown,SecretferryRateLimited}",
                'prometheusRule.selector=job="custom"',
                "prometheusRule.alertLabels.severity=critical",
                f"prometheusRule.extraRules[0].alert={extra['alert']}",
                f"prometheusRule.extraRules[0].expr={extra['expr']}",
                "prometheusRule.extraRules[0].labels.severity=info",
            ],
        ),
        "PrometheusRule",
    )
    assert rule["metadata"]["namespace"] == "monitoring"
    rules = rule["spec"]["groups"][0]["rules"]
    assert [r["alert"] for r in rules] == [
        "SecretferrySecretSyncsNotReady",
        "SecretferryLoginsFailing",
        "MyOwn",
    ]
    assert rules[-1] == extra
    for r in rules[:-1]:
        assert 'job="custom"' in r["expr"] and "namespace=" not in r["expr"]
        assert r["labels"] == {"severity": "critical"}


def test_grafana_dashboard(render: Render) -> None:
    assert by_kind(render(), "ConfigMap") == []
    cm = one(render(CI / "monitoring-values.yaml"), "ConfigMap")
    assert cm["metadata"]["name"] == "ci-secretferry-dashboard"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Operators"}
    shipped = (CHART / "files" / "dashboard.json").read_text()
    assert json.loads(cm["data"]["secretferry.json"]) == json.loads(shipped)


def test_dashboard_panels_read_real_metrics() -> None:
    dashboard = json.loads((CHART / "files" / "dashboard.json").read_text())
    exported = _exported_series()
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len(panels) >= 10
    shown: set[str] = set()
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            series = _series_in(target["expr"])
            assert series and series <= exported, (panel["title"], series - exported)
            assert _balanced(target["expr"]), target["expr"]
            assert 'namespace=~"$namespace", job=~"$job"' in target["expr"], panel["title"]
            shown |= series
    # Every metric the operator exports has a panel.
    missing = [name for name, series in _exported_metrics().items() if not series & shown]
    assert not missing, missing
    grid = [(p["gridPos"]["x"], p["gridPos"]["y"]) for p in dashboard["panels"]]
    assert len(grid) == len(set(grid))  # no two panels on one spot
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


# --- NetworkPolicy ------------------------------------------------------------------------------


def test_network_policy_is_off_by_default(render: Render) -> None:
    assert by_kind(render(), "NetworkPolicy") == []


def test_network_policy_defaults(render: Render) -> None:
    policy = one(render(set_values=["networkPolicy.enabled=true"]), "NetworkPolicy")
    spec = policy["spec"]
    assert spec["podSelector"] == {
        "matchLabels": {"app.kubernetes.io/name": "secretferry", "app.kubernetes.io/instance": "ci"}
    }
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec["ingress"] == [
        {
            "ports": [
                {"port": 8080, "protocol": "TCP"},
                {"port": 8081, "protocol": "TCP"},
                {"port": 8082, "protocol": "TCP"},
            ]
        }
    ]
    api, dns, service = spec["egress"]
    # No addresses given: the ports alone limit the traffic, to any address.
    assert api == {"ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}]}
    assert dns["ports"] == [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]
    assert dns["to"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    ]
    assert service == {"ports": [{"port": 443, "protocol": "TCP"}]}


def test_network_policy_with_addresses(render: Render) -> None:
    spec = one(render(CI / "networkpolicy-values.yaml"), "NetworkPolicy")["spec"]
    assert spec["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    api, _dns, service, proxy = spec["egress"]
    assert api["to"] == [{"ipBlock": {"cidr": "10.96.0.1/32"}}, {"ipBlock": {"cidr": "172.18.0.2/32"}}]
    assert service == {
        "ports": [{"port": 443, "protocol": "TCP"}, {"port": 8443, "protocol": "TCP"}],
        "to": [{"ipBlock": {"cidr": "203.0.113.0/24"}}],
    }
    assert proxy == {
        "to": [{"ipBlock": {"cidr": "198.51.100.10/32"}}],
        "ports": [{"port": 3128, "protocol": "TCP"}],
    }


def test_network_policy_ingress_follows_the_ports(render: Render) -> None:
    spec = one(
        render(
            set_values=[
                "networkPolicy.enabled=true",
                "metrics.port=9090",
                "livenessPort=0",
                "readinessPort=0",
            ]
        ),
        "NetworkPolicy",
    )["spec"]
    assert spec["ingress"] == [{"ports": [{"port": 9090, "protocol": "TCP"}]}]
    closed = one(
        render(
            set_values=[
                "networkPolicy.enabled=true",
                "metrics.enabled=false",
                "livenessPort=0",
                "readinessPort=0",
            ]
        ),
        "NetworkPolicy",
    )["spec"]
    assert not closed.get("ingress") and "Ingress" in closed["policyTypes"]  # nothing may connect
    no_dns = one(
        render(set_values=["networkPolicy.enabled=true", "networkPolicy.dns.enabled=false"]), "NetworkPolicy"
    )
    assert not any(p["port"] == 53 for rule in no_dns["spec"]["egress"] for p in rule["ports"])


def test_network_policy_with_host_network_warns(helm: Helm) -> None:
    assert "has no effect with hostNetwork=true" in _notes(
        helm, "networkPolicy.enabled=true", "hostNetwork=true"
    )


# --- PodDisruptionBudget ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("set_values", "spec"),
    [
        ([], None),  # one replica: a budget would only block drains
        (["replicaCount=3", "leaderElection.enabled=true"], {"maxUnavailable": 1}),
        (["replicaCount=2", "leaderElection.enabled=true", "podDisruptionBudget.enabled=false"], None),
        (["podDisruptionBudget.enabled=true"], {"maxUnavailable": 1}),  # explicit, with one replica
        (
            ["replicaCount=3", "leaderElection.enabled=true", "podDisruptionBudget.minAvailable=2"],
            {"minAvailable": 2},
        ),
        (
            ["replicaCount=3", "leaderElection.enabled=true", "podDisruptionBudget.maxUnavailable=34%"],
            {"maxUnavailable": "34%"},
        ),
    ],
)
def test_pod_disruption_budget_rule(
    render: Render, set_values: list[str], spec: dict[str, Any] | None
) -> None:
    pdbs = by_kind(render(set_values=set_values), "PodDisruptionBudget")
    if spec is None:
        assert pdbs == []
        return
    (pdb,) = pdbs
    assert {k: v for k, v in pdb["spec"].items() if k != "selector"} == spec
    assert pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"] == "ci"


@pytest.mark.parametrize(
    ("set_values", "message"),
    [
        (
            ["prometheusRule.enabled=true", "metrics.enabled=false"],
            "prometheusRule.enabled needs metrics.enabled",
        ),
        (
            ["replicaCount=2", "leaderElection.enabled=true", "podDisruptionBudget.minAvailable=2"],
            "minAvailable must be below replicaCount",
        ),
        (["podDisruptionBudget.enabled=maybe"], "podDisruptionBudget"),
        (["networkPolicy.apiServer.cidrs={kubernetes.default}"], "cidrs"),
        (["networkPolicy.serviceHosts.ports={70000}"], "ports"),
        (["prometheusRule.disabled={NoSuchAlert}"], "disabled"),
        (["config.tokenRequestsEnabled=maybe"], "tokenRequestsEnabled"),
    ],
)
def test_bad_platform_values_are_refused(helm: Helm, set_values: list[str], message: str) -> None:
    assert_refused(helm, set_values, message)


@pytest.mark.parametrize("values", CI_VALUES, ids=lambda p: p.name.removesuffix("-values.yaml"))
def test_every_ci_values_file_renders_with_and_without_monitoring_apis(render: Render, values: Any) -> None:
    for api_versions in ([], MONITORING_APIS):
        docs = render(values, api_versions=api_versions)
        assert docs and all(d.get("apiVersion") and d.get("kind") and d["metadata"].get("name") for d in docs)
        names = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs]
        assert len(names) == len(set(names)), names

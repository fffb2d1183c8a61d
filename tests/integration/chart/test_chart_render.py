"""What `helm template` renders for each supported configuration (no cluster needed)."""

from __future__ import annotations

import json

import pytest
from chart_helpers import (
    CHART,
    CI,
    CLUSTER_RULES,
    KOPF_NAMESPACE_OBSERVER,
    NAMESPACED_RULES,
    Helm,
    Manifest,
    Render,
    assert_refused,
    by_kind,
    named,
    one,
    operator_container,
    operator_env,
    rule_triples,
)


def _operator_cluster_role(docs: list[Manifest]) -> Manifest:
    """The operator's own ClusterRole (the aggregated view/edit/admin roles are for people)."""
    names = {"ci-secretferry", "ci-secretferry-cluster"}
    found = [d for d in by_kind(docs, "ClusterRole") if d["metadata"]["name"] in names]
    assert len(found) == 1, [d["metadata"]["name"] for d in by_kind(docs, "ClusterRole")]
    return found[0]


def test_deployment_is_restricted(render: Render) -> None:
    docs = render()
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    container = operator_container(docs)
    assert container["args"] == ["run"]
    sc = container["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 65532
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in pod["volumes"]
    probe = container["livenessProbe"]["httpGet"]
    assert probe == {"path": "/healthz", "port": "liveness"}
    assert {"name": "liveness", "containerPort": 8081, "protocol": "TCP"} in container["ports"]
    assert container["resources"]["requests"]


def test_readiness_probe(render: Render) -> None:
    """/readyz on its own port, probed often from the start (README, "Readiness and rolling
    upgrades"); readinessPort=0 turns the endpoint and the probe off, the probe can go alone."""
    docs = render()
    container = operator_container(docs)
    assert container["readinessProbe"] == {
        "httpGet": {"path": "/readyz", "port": "readiness"},
        "initialDelaySeconds": 0,
        "periodSeconds": 2,
        "timeoutSeconds": 2,
        "failureThreshold": 3,
    }
    assert {"name": "readiness", "containerPort": 8082, "protocol": "TCP"} in container["ports"]
    assert operator_env(docs)["SECRETFERRY_READINESS_PORT"] == "8082"

    moved = render(set_values=["readinessPort=9092", "readinessProbe.periodSeconds=5"])
    container = operator_container(moved)
    assert container["readinessProbe"]["periodSeconds"] == 5
    assert {"name": "readiness", "containerPort": 9092, "protocol": "TCP"} in container["ports"]
    assert operator_env(moved)["SECRETFERRY_READINESS_PORT"] == "9092"

    off = render(set_values=["readinessPort=0"])
    container = operator_container(off)
    assert "readinessProbe" not in container
    assert not any(p["name"] == "readiness" for p in container["ports"])
    assert operator_env(off)["SECRETFERRY_READINESS_PORT"] == "0"

    probe_off = operator_container(render(set_values=["readinessProbe.enabled=false"]))
    assert "readinessProbe" not in probe_off
    assert {"name": "readiness", "containerPort": 8082, "protocol": "TCP"} in probe_off["ports"]


def test_values_map_onto_settings(render: Render) -> None:
    env = operator_env(
        render(
            set_values=[
                "config.defaultHostAPI=https://secrets.example.com",
                "config.allowedHosts={https://other.example.com,vault.example:8443}",
                "config.allowInsecureHTTP=true",
                "config.forbiddenTargetKeys={example.com/,team}",
                "config.maxTokenExpirationSeconds=900",
                "config.logLevel=DEBUG",
                "config.logFormat=text",
                "config.workers=8",
                "config.streamingRefreshIntervalSeconds=1800",
                "config.rolloutCooldownSeconds=5",
                "metrics.port=9090",
                "livenessPort=9091",
                "scope.namespaces={a,b}",
            ]
        )
    )
    assert env["SECRETFERRY_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["SECRETFERRY_WATCH_NAMESPACES"] == "a,b"
    assert env["SECRETFERRY_DEFAULT_HOST_API"] == "https://secrets.example.com"
    assert env["SECRETFERRY_ALLOWED_HOSTS"] == "https://other.example.com,vault.example:8443"
    assert env["SECRETFERRY_FORBIDDEN_TARGET_KEYS"] == "example.com/,team"
    assert env["SECRETFERRY_ALLOW_INSECURE_HTTP"] == "true"
    assert env["SECRETFERRY_MAX_TOKEN_EXPIRATION_SECONDS"] == "900"
    assert env["SECRETFERRY_LOG_LEVEL"] == "DEBUG"
    assert env["SECRETFERRY_LOG_FORMAT"] == "text"
    assert env["SECRETFERRY_WORKERS"] == "8"
    assert env["SECRETFERRY_STREAMING_REFRESH_INTERVAL_SECONDS"] == "1800"
    assert env["SECRETFERRY_ROLLOUT_COOLDOWN_SECONDS"] == "5"
    assert env["SECRETFERRY_ROLLOUTS_ENABLED"] == "true"
    assert env["SECRETFERRY_TOKEN_REQUESTS_ENABLED"] == "true"
    assert env["SECRETFERRY_METRICS_PORT"] == "9090"
    assert env["SECRETFERRY_LIVENESS_PORT"] == "9091"
    assert env["SECRETFERRY_PEERING"] == ""


def test_env_is_accepted_by_the_operator_settings(render: Render, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every SECRETFERRY_* variable the chart sets exists in Settings and parses."""
    from secretferry import settings

    env = operator_env(render(CI / "ha-values.yaml"))
    known = {f"SECRETFERRY_{name.upper()}" for name in settings.Settings.model_fields}
    ours = {k: v for k, v in env.items() if k.startswith("SECRETFERRY_")}
    assert set(ours) <= known, set(ours) - known
    for key, value in ours.items():
        monkeypatch.setenv(key, value if isinstance(value, str) else "secretferry-system")
    loaded = settings.load()
    assert loaded.peering == "ci-secretferry"
    assert loaded.metrics_port == 8080 and loaded.liveness_port == 8081 and loaded.readiness_port == 8082


def test_metrics_disabled_sets_port_zero_and_drops_the_service(render: Render) -> None:
    docs = render(CI / "no-crds-values.yaml")
    assert operator_env(docs)["SECRETFERRY_METRICS_PORT"] == "0"
    assert by_kind(docs, "Service") == []


def _assert_no_dangerous_grants(rules: set[tuple[str, str, str]]) -> None:
    assert not any(
        verb in {"*", "update", "escalate", "bind", "impersonate", "deletecollection"} for *_, verb in rules
    )
    assert not any(
        res in {"*", "pods", "clusterroles", "roles", "rolebindings", "clusterrolebindings"}
        for _, res, _ in rules
    )
    assert not any(group in {"*", "kopf.dev"} for group, _, _ in rules)


def test_cluster_wide_rbac(render: Render) -> None:
    docs = render()
    rules = rule_triples(_operator_cluster_role(docs))
    assert rules == NAMESPACED_RULES | CLUSTER_RULES
    assert all(r.get("resourceNames") is None for r in _operator_cluster_role(docs)["rules"])
    _assert_no_dangerous_grants(rules)
    assert by_kind(docs, "Role") == []
    binding = one(docs, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "ci-secretferry", "namespace": "secretferry-system"}
    ]


def test_cluster_wide_rbac_without_argo_rollouts(render: Render) -> None:
    rules = rule_triples(_operator_cluster_role(render(set_values=["rbac.argoRollouts=false"])))
    assert not any(group == "argoproj.io" for group, _, _ in rules)
    assert ("apps", "deployments", "patch") in rules


def test_namespaced_rbac(render: Render) -> None:
    docs = render(CI / "namespaced-values.yaml")
    cluster_rules = rule_triples(_operator_cluster_role(docs))
    # Nothing namespaced is granted cluster-wide: no Secret, token or workload right outside the
    # served namespaces.
    assert cluster_rules == CLUSTER_RULES | KOPF_NAMESPACE_OBSERVER
    _assert_no_dangerous_grants(cluster_rules)
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in by_kind(docs, "Role")}
    assert set(roles) == {
        ("secretferry-ci-a", "ci-secretferry"),
        ("secretferry-ci-b", "ci-secretferry"),
        ("secretferry-system", "ci-secretferry-hmac-key"),
        ("default", "ci-secretferry-cluster-events"),
    }
    # Events about cluster-scoped objects (TemporaryPrivileges) go to namespace default: only them.
    events = roles["default", "ci-secretferry-cluster-events"]
    assert rule_triples(events) == {
        ("events.k8s.io", "events", "create"),
        ("events.k8s.io", "events", "patch"),
    }
    for ns in ("secretferry-ci-a", "secretferry-ci-b"):
        assert rule_triples(roles[ns, "ci-secretferry"]) == NAMESPACED_RULES
    # Its own namespace (not served): create Secrets, and read only the HMAC key.
    hmac = roles["secretferry-system", "ci-secretferry-hmac-key"]
    assert [r.get("resourceNames") for r in hmac["rules"]] == [None, ["secretferry-hmac-key"]]
    assert hmac["rules"][0]["verbs"] == ["create"]
    assert hmac["rules"][1]["verbs"] == ["get"]
    bindings = {(b["metadata"]["namespace"], b["roleRef"]["name"]) for b in by_kind(docs, "RoleBinding")}
    assert bindings == set(roles)


def test_namespace_selector_is_passed_on_and_keeps_the_rbac_of_its_mode(render: Render) -> None:
    """Which namespaces match changes at run time: no Role can follow, so alone it is cluster-wide
    RBAC; with scope.namespaces the Roles stay those of the list."""
    from secretferry import settings

    selector = r"secretferry.io/release in (blue\,green)\,!legacy"  # --set splits at a bare comma
    docs = render(set_values=[f"scope.namespaceSelector={selector}"])
    env = operator_env(docs)
    assert env["SECRETFERRY_WATCH_NAMESPACE_SELECTOR"] == "secretferry.io/release in (blue,green),!legacy"
    assert env["SECRETFERRY_WATCH_NAMESPACES"] == ""
    parsed = settings.Settings(watch_namespace_selector=env["SECRETFERRY_WATCH_NAMESPACE_SELECTOR"])
    assert parsed.namespace_selector() is not None
    assert rule_triples(_operator_cluster_role(docs)) == NAMESPACED_RULES | CLUSTER_RULES
    assert by_kind(docs, "Role") == []

    docs = render(set_values=["scope.namespaces={a,b}", "scope.namespaceSelector=team=x"])
    assert operator_env(docs)["SECRETFERRY_WATCH_NAMESPACE_SELECTOR"] == "team=x"
    roles = {r["metadata"]["namespace"] for r in by_kind(docs, "Role")}
    assert roles == {"a", "b", "secretferry-system", "default"}  # default: cluster-scoped objects' Events
    assert operator_env(render())["SECRETFERRY_WATCH_NAMESPACE_SELECTOR"] == ""


def test_two_releases_share_no_cluster_scoped_name_and_no_lease(render: Render) -> None:
    """Side by side (README "Namespace selection"): every cluster-scoped object is named after the
    release, and each Lease lives in its own release namespace under its own name."""
    rendered = {
        release: render(
            release=release,
            namespace=f"ferry-{release}",
            set_values=["leaderElection.enabled=true", f"scope.namespaceSelector=release={release}"],
        )
        for release in ("blue", "green")
    }
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
    names = {
        release: {(d["kind"], d["metadata"]["name"]) for d in docs if d["kind"] in cluster_scoped}
        for release, docs in rendered.items()
    }
    shared = names["blue"] & names["green"]
    assert {kind for kind, _ in shared} == {"CustomResourceDefinition"}  # install them with one only
    leases = {release: operator_env(docs)["SECRETFERRY_PEERING"] for release, docs in rendered.items()}
    assert leases == {"blue": "blue-secretferry", "green": "green-secretferry"}


def test_quota_on_our_kinds_in_each_served_namespace(render: Render) -> None:
    quotas = by_kind(render(CI / "namespaced-values.yaml"), "ResourceQuota")
    assert sorted(q["metadata"]["namespace"] for q in quotas) == ["secretferry-ci-a", "secretferry-ci-b"]
    for quota in quotas:
        assert quota["metadata"]["name"] == "ci-secretferry-objects"
        assert quota["spec"] == {
            "hard": {
                "count/secretsyncs.secretferry.io": "50",
                "count/machineidentities.secretferry.io": "20",
                "count/passwordgenerators.secretferry.io": "50",
                "count/uuidgenerators.secretferry.io": "50",
            }
        }
    assert by_kind(render(), "ResourceQuota") == []  # off by default
    off = render(CI / "namespaced-values.yaml", set_values=["quota.enabled=false"])
    assert by_kind(off, "ResourceQuota") == []


def test_ha_has_leader_election_and_pdb(render: Render) -> None:
    docs = render(CI / "ha-values.yaml")
    assert one(docs, "Deployment")["spec"]["replicas"] == 3
    assert "strategy" not in one(docs, "Deployment")["spec"]
    assert operator_env(docs)["SECRETFERRY_PEERING"] == "ci-secretferry"
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1 and "minAvailable" not in pdb["spec"]
    # kopf peering is gone: no kopf.dev CRDs, objects, hooks or rules.
    assert {c["spec"]["group"] for c in by_kind(docs, "CustomResourceDefinition")} == {"secretferry.io"}
    assert not any(d["apiVersion"].startswith("kopf.dev/") for d in docs)
    assert not any(
        "helm.sh/hook" in (d["metadata"].get("annotations") or {}) for d in docs if d["kind"] != "Pod"
    )
    assert not any(group == "kopf.dev" for group, _, _ in rule_triples(_operator_cluster_role(docs)))
    # The Lease Role: in the release namespace, create unrestricted, get/update on the Lease only.
    role = named(docs, "Role", "ci-secretferry-leader-election")
    assert role["metadata"]["namespace"] == "secretferry-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["ci-secretferry"],
            "verbs": ["get", "update"],
        },
    ]
    binding = named(docs, "RoleBinding", "ci-secretferry-leader-election")
    assert binding["metadata"]["namespace"] == "secretferry-system"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "ci-secretferry-leader-election",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "ci-secretferry", "namespace": "secretferry-system"}
    ]


def test_lease_name_override(render: Render) -> None:
    docs = render(CI / "ha-values.yaml", set_values=["leaderElection.leaseName=sf-leader"])
    assert operator_env(docs)["SECRETFERRY_PEERING"] == "sf-leader"
    rules = named(docs, "Role", "ci-secretferry-leader-election")["rules"]
    assert rules[1]["resourceNames"] == ["sf-leader"]


def test_leader_election_with_one_replica(render: Render) -> None:
    """Allowed (a warm standby is not required); the strategy may then roll, the Lease serialises."""
    docs = render(set_values=["leaderElection.enabled=true"])
    assert operator_env(docs)["SECRETFERRY_PEERING"] == "ci-secretferry"
    assert "strategy" not in one(docs, "Deployment")["spec"]
    assert by_kind(docs, "PodDisruptionBudget") == []
    assert named(docs, "Role", "ci-secretferry-leader-election")


def test_namespaced_ha_leases_in_the_release_namespace(render: Render) -> None:
    docs = render(CI / "namespaced-values.yaml", CI / "ha-values.yaml")
    lease_roles = [
        r for r in by_kind(docs, "Role") if ("coordination.k8s.io", "leases", "update") in rule_triples(r)
    ]
    assert [(r["metadata"]["namespace"], r["metadata"]["name"]) for r in lease_roles] == [
        ("secretferry-system", "ci-secretferry-leader-election")
    ]
    for role in by_kind(docs, "Role"):
        assert not any(group == "kopf.dev" for group, _, _ in rule_triples(role))
    assert by_kind(docs, "ClusterKopfPeering") == [] and by_kind(docs, "KopfPeering") == []


def test_lease_role_even_when_the_release_namespace_is_served(render: Render) -> None:
    """The per-namespace Role has no leases, so the Lease Role is there in that case too."""
    docs = render(CI / "ha-values.yaml", set_values=["scope.namespaces={secretferry-system,other}"])
    role = named(docs, "Role", "ci-secretferry-leader-election")
    assert role["metadata"]["namespace"] == "secretferry-system"
    served = [r for r in by_kind(docs, "Role") if r["metadata"]["name"] == "ci-secretferry"]
    assert served and not any(res == "leases" for r in served for _, res, _ in rule_triples(r))


def test_single_replica_is_standalone(render: Render) -> None:
    docs = render()
    assert one(docs, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    assert operator_env(docs)["SECRETFERRY_PEERING"] == ""
    assert by_kind(docs, "PodDisruptionBudget") == []
    assert by_kind(docs, "Role") == [] and by_kind(docs, "RoleBinding") == []
    assert not any(res == "leases" for _, res, _ in rule_triples(_operator_cluster_role(docs)))


def test_service_monitor(render: Render) -> None:
    api = ["monitoring.coreos.com/v1/ServiceMonitor"]
    assert by_kind(render(CI / "no-servicemonitor-values.yaml", api_versions=api), "ServiceMonitor") == []
    monitor = one(render(CI / "servicemonitor-values.yaml", api_versions=api), "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"


def test_metrics_service(render: Render) -> None:
    service = one(render(), "Service")
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}
    ]


@pytest.mark.parametrize(
    ("set_values", "message"),
    [
        (["replicaCount=2"], "leaderElection"),
        (["replicaCount=2", "leaderElection.enabled=false"], "leaderElection"),
        (["leaderElection.enabled=true", "leaderElection.leaseName=Not_A_Name"], "leaseName"),
        (["peering.enabled=true"], "peering"),
        (["config.logFormat=xml"], "logFormat"),
        (["scope.namespaces={Not_A_Namespace}"], "namespaces"),
        (["unknownKey=1"], "unknownKey"),
        (["serviceMonitor.enabled=true", "metrics.enabled=false"], "metrics.enabled"),
        (["quota.enabled=true"], "quota.enabled needs scope.namespaces"),
        (["quota.enabled=true", "scope.namespaces={a}", "quota.secretSyncs=-1"], "secretSyncs"),
    ],
)
def test_bad_values_are_refused(helm: Helm, set_values: list[str], message: str) -> None:
    assert_refused(helm, set_values, message)


def test_extra_env_may_not_repeat_a_variable_the_chart_sets(render: Render, helm: Helm) -> None:
    """Every variable the chart sets, set again through extraEnv, is refused with a message naming
    it (the apiserver would refuse the Deployment with "duplicate entries" instead)."""
    own = set(operator_env(render()))
    assert {"SECRETFERRY_LOG_LEVEL", "HOME"} <= own
    for name in sorted(own):
        out = helm(
            "template",
            "ci",
            str(CHART),
            "--set",
            f"extraEnv[0].name={name}",
            "--set",
            "extraEnv[0].value=x",
            check=False,
        )
        assert f"extraEnv sets {name}, which the chart sets itself" in out, (name, out[-500:])
    other = operator_env(
        render(set_values=["extraEnv[0].name=SECRETFERRY_PER_OBJECT_METRICS", "extraEnv[0].value=on"])
    )
    assert other["SECRETFERRY_PER_OBJECT_METRICS"] == "on"  # any other variable passes


def test_template_guard_refuses_replicas_without_leader_election(helm: Helm) -> None:
    """The guard in the template holds even when the schema is skipped."""
    out = helm(
        "template", "ci", str(CHART), "--skip-schema-validation", "--set", "replicaCount=2", check=False
    )
    assert "replicaCount > 1 needs leaderElection.enabled=true" in out, out


def test_schema_is_valid_json_and_covers_every_top_level_value() -> None:
    import yaml

    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert set(values) <= set(schema["properties"])


def test_every_value_is_documented() -> None:
    """helm-docs style: each top-level key is preceded by a `# --` comment or holds documented keys."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    undocumented = []
    for i, line in enumerate(lines):
        if not line or line.startswith((" ", "#", "-")) or ":" not in line:
            continue
        block = []
        j = i - 1
        while j >= 0 and lines[j].startswith("#"):
            block.append(lines[j])
            j -= 1
        following = lines[i + 1] if i + 1 < len(lines) else ""
        has_documented_children = following.startswith("  ") and any(
            ln.strip().startswith("# --") for ln in lines[i + 1 : i + 4]
        )
        if not any(b.startswith("# --") for b in block) and not has_documented_children:
            undocumented.append(line.split(":")[0])
    assert not undocumented, undocumented


def test_notes_render(helm: Helm) -> None:
    out = helm("install", "ci", str(CHART), "--dry-run=client", "--namespace", "ops")
    assert "kubectl get ssync" in out
    assert "MachineIdentity" in out and "SecretSync" in out

"""Every metric README documents is emitted: after a sync that writes a Secret, takes an
event from its stream and restarts a workload, ``/metrics`` has at least one sample of each name
in README's Metrics table. The names come from README itself, so documenting a metric without
emitting it fails here."""

from __future__ import annotations

import re
from pathlib import Path

import cluster_helpers
import harness
import pytest
from harness import PROJECT_ID, eventually, secret_data, source
from prometheus_client.parser import text_string_to_metric_families

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration
README = Path(__file__).resolve().parents[3] / "README.md"
# prometheus_client exposes a histogram as these series, a counter with its _total name.
_SERIES_SUFFIXES = ("", "_bucket", "_count", "_sum")


def documented_metrics() -> list[str]:
    """First-column names of the table under README's ``## Metrics`` heading."""
    text = README.read_text()
    section = text.split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"^\| `(secretferry_[a-z0-9_]+)` \|", section, flags=re.MULTILINE)
    assert len(names) >= 10, "README's Metrics table was not found or lost its rows"
    return names


def sampled(metrics_text: str) -> set[str]:
    """Names that have at least one sample line (a ``# HELP``/``# TYPE`` line alone is none)."""
    return {
        line.split("{", 1)[0].split(" ", 1)[0]
        for line in metrics_text.splitlines()
        if line and not line.startswith("#")
    }


def missing(metrics_text: str, names: list[str]) -> list[str]:
    have = sampled(metrics_text)
    return [n for n in names if not any(n + suffix in have for suffix in _SERIES_SUFFIXES)]


def test_the_readme_table_is_parsed() -> None:
    names = documented_metrics()
    assert "secretferry_service_calls_total" in names and "secretferry_logins_total" in names
    assert (
        missing('secretferry_logins_total{method="x",result="y"} 1.0\n', ["secretferry_logins_total"]) == []
    )
    assert missing("# TYPE secretferry_logins_total counter\n", ["secretferry_logins_total"]) == [
        "secretferry_logins_total"
    ]


def test_every_documented_metric_has_samples_after_a_sync(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "metrics-value-1")
    control_plane.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            # The workload's owner admits the SecretSync's rolloutRestartTargets.
            "metadata": {
                "name": "web",
                "namespace": namespace,
                "annotations": {"secretferry.io/restart-on": "app"},
            },
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "registry.invalid/app:1"}]},
                },
            },
        }
    )
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(
        control_plane,
        namespace,
        "app",
        sources=[source(path)],
        rolloutRestartTargets=[{"kind": "Deployment", "name": "web"}],
    )
    eventually(lambda: secret_data(control_plane, namespace, "app") == {"K": "metrics-value-1"}, what="sync")
    eventually(
        lambda: (
            (harness.get(control_plane, "secretsync", "app", namespace) or {})
            .get("status", {})
            .get("updateMode")
            == "Streaming"
        ),
        what="the event stream",
    )
    # A change arrives as a stream event, rewrites the Secret and restarts the Deployment.
    service.set_secret(PROJECT_ID, "dev", path, "K", "metrics-value-2")
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"K": "metrics-value-2"}, what="update"
    )
    # A ClusterSecretSync over this namespace: its gauge has samples too.
    cluster_helpers.cluster_identity(control_plane, f"cid-{namespace}", sa_namespace=namespace)
    css = cluster_helpers.manifest(
        f"css-{namespace}",
        identity=f"cid-{namespace}",
        path=path,
        namespaces=[namespace],
        target={"name": "css-metrics"},
    )
    control_plane.apply(css)
    ready_series = (
        f'secretferry_clustersecretsync_namespaces{{clustersecretsync="css-{namespace}",state="ready"}} 1.0'
    )
    try:
        eventually(
            lambda: secret_data(control_plane, namespace, "css-metrics") == {"K": "metrics-value-2"},
            what="the ClusterSecretSync's Secret",
        )
        eventually(lambda: ready_series in operator.metrics(), what="the ClusterSecretSync gauge")
        names = documented_metrics()
        # Gauges refreshed by the resync loop (every 10 s for secretferry_secretsyncs) need a moment.
        eventually(lambda: not missing(operator.metrics(), names), what="samples of every documented metric")
        text = operator.metrics()
        assert 'secretferry_service_calls_total{endpoint="GET /api/v4/secrets"' in text
        assert re.search(r'secretferry_logins_total\{method="kubernetes",result="success"\} [1-9]', text)
        assert re.search(r'secretferry_rollouts_total\{kind="Deployment"\} [1-9]', text)
    finally:
        control_plane.kubectl("delete", "clustersecretsync", f"css-{namespace}", check=False)
        control_plane.kubectl("delete", "clustermachineidentity", f"cid-{namespace}", check=False)
    # Deleted: its series go with it.
    eventually(lambda: f'clustersecretsync="css-{namespace}"' not in operator.metrics(), what="series gone")


def _condition_samples(metrics_text: str, namespace: str, name: str) -> dict[str, float]:
    """``status`` -> value of the per-object Ready series of one SecretSync."""
    return {
        sample.labels["status"]: sample.value
        for family in text_string_to_metric_families(metrics_text)
        if family.name == "secretferry_secretsync_condition"
        for sample in family.samples
        if (sample.labels["namespace"], sample.labels["name"], sample.labels["condition"])
        == (namespace, name, "Ready")
    }


def test_the_opt_in_per_object_gauge_follows_ready_and_goes_with_the_secretsync(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}-per-object"
    service.set_secret(PROJECT_ID, "dev", path, "K", "per-object-value-1")
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(control_plane, namespace, "watched", sources=[source(path)])
    harness.wait_reason(control_plane, namespace, "watched", "Synced")
    eventually(
        lambda: _condition_samples(operator.metrics(), namespace, "watched") == {"True": 1.0, "False": 0.0},
        what="the per-object gauge to say Ready=True",
    )
    control_plane.kubectl("delete", "secretsync", "watched", "-n", namespace)
    eventually(
        lambda: _condition_samples(operator.metrics(), namespace, "watched") == {},
        what="the per-object series to go with the SecretSync",
    )

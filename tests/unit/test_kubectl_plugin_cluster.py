"""``kubectl secretferry`` on ClusterSecretSyncs, the pure parts: their table, the ``why`` report,
and how ``why`` tells the kinds apart. Against the real control plane:
tests/integration/operator/test_operator_kubectl_plugin_cluster.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from secretferry.kubectl import cli, clusterviews, reads

NOW = datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC)


def _css(name: str, *, reason: str | None = "Synced", **status: Any) -> dict[str, Any]:
    conditions = []
    if reason is not None:
        conditions.append(
            {
                "type": "Ready",
                "status": {"Synced": "True", "Progressing": "Unknown"}.get(reason, "False"),
                "reason": reason,
                "message": f"message of {name}",
                "lastTransitionTime": "2026-11-27T11:58:00Z",
            }
        )
    return {
        "metadata": {"name": name, "generation": 1},
        "spec": {
            "namespaceSelector": {
                "matchLabels": {"team": "payments"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "api"]}],
            },
            "namespaces": ["ops"],
            "syncTemplate": {
                "identityRef": {"kind": "ClusterMachineIdentity", "name": "platform"},
                "sources": [{"projectSlug": "app", "environment": "prod", "path": "/shared"}],
                "target": {"name": "shared"},
            },
        },
        "status": {"conditions": conditions, **status},
    }


def test_the_cluster_table() -> None:
    bodies = [
        _css("web", selectedNamespaces=3, readyNamespaces=3, failedNamespaces=0),
        _css("api", reason="NamespacesFailed", selectedNamespaces=3, readyNamespaces=1, failedNamespaces=2),
        _css("new", reason=None),
    ]
    lines = clusterviews.cluster_table(bodies).splitlines()
    assert lines[0].split() == [
        "CLUSTERSECRETSYNC",
        "READY",
        "REASON",
        "NAMESPACES",
        "FAILED",
        "IDENTITY",
        "TARGET",
    ]
    assert [line.split() for line in lines[1:]] == [
        ["api", "False", "NamespacesFailed", "1/3", "2", "ClusterMachineIdentity/platform", "Secret/shared"],
        ["new", "Unknown", "-", "-", "-", "ClusterMachineIdentity/platform", "Secret/shared"],
        ["web", "True", "Synced", "3/3", "0", "ClusterMachineIdentity/platform", "Secret/shared"],
    ]


def test_why_shows_counts_failing_namespaces_identity_and_events() -> None:
    body = _css(
        "api",
        reason="NamespacesFailed",
        observedGeneration=1,
        selectedNamespaces=30,
        readyNamespaces=8,
        failedNamespaces=22,
        failures=[
            {"namespace": "team-a", "reason": "TargetConflict", "message": "Secret shared is not ours"},
            {"namespace": "team-b", "reason": "IdentityNotAllowed", "message": "not admitted"},
        ],
    )
    identity = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "LoggedIn", "message": "login works"}
            ],
            "lastLoginTime": "2026-11-27T11:00:00Z",
        }
    }
    events = [
        {
            "type": "Warning",
            "reason": "NamespacesFailed",
            "note": "22 of 30 selected namespaces fail; see the ClusterSecretSync's status.failures",
            "series": {"count": 2, "lastObservedTime": "2026-11-27T11:59:00Z"},
        }
    ]
    text = clusterviews.explain_cluster(body, identity, events, now=NOW)
    lines = text.splitlines()
    assert lines[0] == "ClusterSecretSync api"
    assert "  Ready:        False  reason NamespacesFailed  (since 2m ago)" in lines
    assert "  Message:      message of api" in lines
    assert "  Namespaces:   30 selected, 8 ready, 22 failing" in lines
    assert "  Selection:    selector team=payments,tier In (web, api); names ops" in lines
    assert "  Scopes:       1. project app environment prod path /shared" in lines
    assert "  Target:       Secret/shared in each selected namespace" in lines
    assert "Failing namespaces (the first 2 of 22, by name)" in lines
    failing = lines[lines.index("Failing namespaces (the first 2 of 22, by name)") + 1 :][:3]
    assert [line.split(None, 2) for line in failing] == [
        ["NAMESPACE", "REASON", "MESSAGE"],
        ["team-a", "TargetConflict", "Secret shared is not ours"],
        ["team-b", "IdentityNotAllowed", "not admitted"],
    ]
    assert "Identity ClusterMachineIdentity/platform" in lines
    assert "  Ready:        True  reason LoggedIn" in lines and "  Last login:   60m ago" in lines
    assert lines[-1].split()[:4] == ["60s", "Warning", "NamespacesFailed", "2"]
    assert "\nSecretSync " not in text  # the shared sections come without a SecretSync heading


def test_why_before_the_first_report_and_with_refusals() -> None:
    denied = reads.Denied("list Events in namespace default", "forbidden (your RBAC does not allow it)")
    refused = reads.Denied("get ClusterMachineIdentity platform", "forbidden (your RBAC does not allow it)")
    text = clusterviews.explain_cluster(_css("new", reason=None), refused, denied, now=NOW)
    assert "no condition yet" in text and "Namespaces:" not in text and "Failing" not in text
    assert "cannot get ClusterMachineIdentity platform: forbidden" in text
    assert "cannot list Events in namespace default: forbidden" in text


@pytest.mark.parametrize(
    ("selector", "shown"),
    [
        ({"namespaceSelector": {}, "namespaces": ["a"]}, "selector (every namespace); names a"),
        (
            {"namespaceSelector": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}},
            "selector x Exists",
        ),
        ({"namespaces": ["a", "b"]}, "names a, b"),
    ],
)
def test_selection_in_words(selector: dict[str, Any], shown: str) -> None:
    assert clusterviews.selection({"spec": selector}) == shown


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["why", "configmap/x"], "not configmap"),
        (["why", "clustersecretsync/x", "-n", "a"], "cluster-scoped: no -n"),
        (["why", "--cluster", "x", "-n", "a"], "cluster-scoped: no -n"),
        (["status", "--cluster", "-n", "a"], "--cluster shows cluster-scoped ClusterSecretSyncs: no -n"),
    ],
)
def test_usage_errors(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert cli.main(args) == 2
    assert message in capsys.readouterr().err

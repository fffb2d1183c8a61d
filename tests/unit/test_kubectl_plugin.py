"""``kubectl-secretferry``'s pure parts: the status table, the ``why`` report, identity selection,
usage errors, and which kubeconfig it reads. Its calls to the apiserver (RBAC refusals included)
are tested against the real control plane: tests/integration/operator/test_operator_kubectl_plugin.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from secretferry.kube import kubeconfig
from secretferry.kubectl import cli, connection, reads, views

NOW = datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC)


def _sync(
    name: str, *, namespace: str = "team-a", reason: str | None = "Synced", **status: Any
) -> dict[str, Any]:
    conditions = []
    if reason is not None:
        conditions.append(
            {
                "type": "Ready",
                "status": "True" if reason == "Synced" else "False",
                "reason": reason,
                "message": f"message of {name}",
                "lastTransitionTime": "2026-11-27T11:55:00Z",
            }
        )
    return {
        "metadata": {"name": name, "namespace": namespace, "generation": 2},
        "spec": {"identityRef": {"name": "ferry"}, "target": {"name": f"{name}-secret"}},
        "status": {"conditions": conditions, **status},
    }


@pytest.mark.parametrize(
    ("stamp", "shown"),
    [
        (None, "-"),
        ("2026-11-27T11:59:15Z", "45s"),
        ("2026-11-27T11:58:00Z", "2m"),
        ("2026-11-27T11:58:30Z", "90s"),
        ("2026-11-27T09:00:00Z", "3h"),
        ("2026-11-24T12:00:00Z", "3d"),
        ("not a time", "?"),
    ],
)
def test_age_is_kubectls_short_form(stamp: str | None, shown: str) -> None:
    assert views.age(stamp, now=NOW) == shown


def test_status_table_one_row_per_secretsync() -> None:
    syncs = [
        _sync(
            "web",
            lastSyncTime="2026-11-27T11:50:00Z",
            updateMode="Streaming",
            target={"kind": "Secret", "name": "w"},
        ),
        _sync("api", namespace="team-b", reason="TemplateError", updateMode="Polling"),
        _sync("new", reason=None),
    ]
    lines = views.status_table(syncs, all_namespaces=True, now=NOW).splitlines()
    assert lines[0].split() == [
        "NAMESPACE",
        "NAME",
        "READY",
        "REASON",
        "MODE",
        "IDENTITY",
        "LAST",
        "SYNC",
        "TARGET",
    ]
    rows = [line.split() for line in lines[1:]]
    assert rows == [
        ["team-a", "new", "Unknown", "-", "-", "ferry", "-", "Secret/new-secret"],
        ["team-a", "web", "True", "Synced", "Streaming", "ferry", "10m", "Secret/w"],
        ["team-b", "api", "False", "TemplateError", "Polling", "ferry", "-", "Secret/api-secret"],
    ]
    # Columns line up: every row's REASON starts where the header's does.
    at = lines[0].index("REASON")
    assert all(line[at - 1] == " " and line[at] != " " for line in lines[1:])


def test_status_table_in_one_namespace_has_no_namespace_column() -> None:
    assert views.status_table([_sync("web")], all_namespaces=False, now=NOW).startswith("NAME ")


def test_why_shows_status_identity_and_events() -> None:
    sync = _sync(
        "api", reason="TemplateError", updateMode="Polling", updateModeReason="instantUpdates is false"
    )
    sync["status"]["observedGeneration"] = 1
    sync["spec"]["sources"] = [
        {"projectSlug": "app", "environment": "dev", "path": "/db", "recursive": True},
        {"generatorRef": {"kind": "PasswordGenerator", "name": "pw"}},
    ]
    identity = {
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "LoggedIn", "message": "ok"}],
            "lastLoginTime": "2026-11-27T11:00:00Z",
            "listEndpoint": "/api/v4/secrets",
        }
    }
    events = [
        {
            "type": "Warning",
            "reason": "TemplateError",
            "message": "template 'x': boom",
            "count": 3,
            "lastTimestamp": "2026-11-27T11:59:00Z",
        },
    ]
    text = views.explain(sync, identity, events, now=NOW)
    assert "Ready:        False  reason TemplateError  (since 5m ago)" in text
    assert "Message:      message of api" in text
    assert "spec is at 2, status describes 1" in text
    assert "Update mode:  Polling (instantUpdates is false)" in text
    assert "Scopes:       1. project app environment dev path /db (recursive)" in text
    assert "2. PasswordGenerator/pw (no service call)" in text
    assert "Last sync:    never" in text
    assert "Identity MachineIdentity/ferry" in text
    assert "reason LoggedIn" in text and "Last login:   60m ago" in text and "/api/v4/secrets" in text
    event_line = next(line for line in text.splitlines() if "boom" in line)
    assert event_line.split()[:4] == ["60s", "Warning", "TemplateError", "3"]


def test_why_shows_each_sources_last_list_and_stream_from_the_identity_status() -> None:
    sync = _sync("api", updateMode="Streaming")
    sync["spec"]["sources"] = [
        {"projectSlug": "app", "environment": "dev", "path": "db/"},
        {"projectId": "p2", "environment": "prod", "path": "/x", "recursive": True},
        {"projectId": "p3", "environment": "dev"},
    ]
    identity = {
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "LoggedIn", "message": "ok"}],
            "streamsOpen": 1,
            "streams": [
                {
                    "projectId": "p1",
                    "state": "Open",
                    "since": "2026-11-27T11:00:00Z",
                    "lastEventTime": "2026-11-27T11:59:30Z",
                    "scopes": 2,
                },
                {
                    "projectId": "p2",
                    "state": "Refused",
                    "message": "no Secret Events permission",
                    "since": "2026-11-27T11:58:00Z",
                    "scopes": 1,
                },
            ],
            "scopeCount": 3,
            "scopes": [
                {
                    "projectId": "p1",
                    "projectSlug": "app",
                    "environment": "dev",
                    "path": "/db",
                    "lastListTime": "2026-11-27T11:59:50Z",
                    "lastListResult": "NotModified",
                    "secretSyncs": 4,
                },
                {
                    "projectId": "p2",
                    "environment": "prod",
                    "path": "/x",
                    "recursive": True,
                    "lastListTime": "2026-11-27T11:57:00Z",
                    "lastListResult": "PermissionDenied",
                    "secretSyncs": 1,
                },
            ],
            "scopesOmitted": 1,
        }
    }
    lines = views.explain(sync, identity, [], now=NOW).splitlines()
    at = lines.index(next(line for line in lines if "1. project app environment dev path db/" in line))
    assert lines[at + 1].split() == [
        "last",
        "list:",
        "10s",
        "ago,",
        "NotModified;",
        "4",
        "SecretSync(s)",
        "read",
        "this",
        "scope",
    ]
    assert lines[at + 2].strip() == "stream:    Open for 60m, last event 30s ago"
    assert "last list: 3m ago, PermissionDenied; 1 SecretSync(s) read this scope" in lines[at + 4]
    assert lines[at + 5].strip() == "stream:    Refused for 2m (no Secret Events permission), no event yet"
    assert "not among the scopes the identity's status lists (1 omitted)" in lines[at + 7]
    assert "  Streams:      1 open of 2" in lines
    assert "  Scopes:       3 listed by this identity" in lines


def test_why_without_a_readable_identity_says_why_no_list_is_shown() -> None:
    sync = _sync("api")
    sync["spec"]["sources"] = [{"projectId": "p1", "environment": "dev"}]
    denied = reads.Denied("get MachineIdentity team-a/ferry", "forbidden (your RBAC does not allow it)")
    text = views.explain(sync, denied, [], now=NOW)
    assert "last list, stream: not shown (the identity cannot be read)" in text
    text = views.explain(sync, {"status": {}}, [], now=NOW)
    assert "the identity's status lists no scopes yet" in text


def test_why_names_what_it_could_not_read() -> None:
    denied_identity = reads.Denied(
        "get ClusterMachineIdentity shared", "forbidden (your RBAC does not allow it)"
    )
    denied_events = reads.Denied("list Events in namespace team-a", "forbidden (your RBAC does not allow it)")
    text = views.explain(_sync("web"), denied_identity, denied_events, now=NOW)
    assert "cannot get ClusterMachineIdentity shared: forbidden" in text
    assert "cannot list Events in namespace team-a: forbidden" in text


@pytest.mark.parametrize(
    ("selector", "ref", "uses"),
    [
        ("ferry", {"name": "ferry"}, True),
        ("ferry", {"kind": "ClusterMachineIdentity", "name": "ferry"}, False),
        ("ClusterMachineIdentity/ferry", {"kind": "ClusterMachineIdentity", "name": "ferry"}, True),
        ("MachineIdentity/ferry", {"kind": "MachineIdentity", "name": "ferry"}, True),
        ("other", {"name": "ferry"}, False),
    ],
)
def test_sync_selects_by_identity(selector: str, ref: dict[str, str], uses: bool) -> None:
    assert cli._uses({"spec": {"identityRef": ref}}, selector) is uses


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sync"], "one of them"),
        (["sync", "a", "--identity", "x"], "one of them"),
        (["sync", "a", "-A"], "-A selects by --identity"),
    ],
)
def test_sync_usage_errors(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert cli.main(args) == 2
    assert message in capsys.readouterr().err


def test_the_users_kubeconfig_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert connection.kubeconfig_paths("/x", env={"KUBECONFIG": "/y"}) == "/x"
    assert connection.kubeconfig_paths(None, env={"KUBECONFIG": "/y"}) == "/y"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert connection.kubeconfig_paths(None, env={}) is None  # no ~/.kube/config: in-cluster
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("{}")
    assert connection.kubeconfig_paths(None, env={}) == str(tmp_path / ".kube" / "config")


def test_the_contexts_namespace_is_the_default(tmp_path: Path) -> None:
    config = {
        "current-context": "a",
        "contexts": [
            {"name": "a", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}},
            {"name": "b", "context": {"cluster": "c", "user": "u"}},
        ],
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    assert kubeconfig.context_namespace(str(path)) == "team-a"
    assert kubeconfig.context_namespace(str(path), context="b") is None
    assert connection.default_namespace(str(path), context="b") == "default"
    assert connection.default_namespace(str(path)) == "team-a"

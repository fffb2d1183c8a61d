"""``kubectl secretferry`` and ``secretferry template --live`` against the real control plane, the
operator and the dev server.

The plugin runs as kubectl runs it (``kubectl secretferry ...``: the console script found on
PATH), with a kubeconfig only: the admin's, and a restricted user's (a ServiceAccount that may
only get/list SecretSyncs in one namespace), whose refused reads must be reported by name, not
crash the command. Nothing printed may hold a secret value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import harness
import pytest
from harness import PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

FORCE_SYNC = "secretferry.io/force-sync"
# Only a force-sync (or an edit) reaches these SecretSyncs: no stream, and a resync an hour away.
QUIET = {"refreshInterval": "1h", "instantUpdates": False}
BAD_TEMPLATE = {"template": {"data": {"dsn": "{{ DB_USER }}:{{ NOT_AT_THE_SERVICE }}"}}}


def plugin(cp: ControlPlane, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl secretferry <args>``: kubectl finds ``kubectl-secretferry`` on PATH (this venv's)."""
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), str(cp.bin_dir), os.environ["PATH"]]),
        "KUBECONFIG": str(kubeconfig),
    }
    return subprocess.run(
        [str(cp.bin_dir / "kubectl"), "secretferry", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )


def no_values(*texts: str) -> None:
    values = [v for v in harness.VALUES if len(v) >= 6]
    assert values
    for text in texts:
        assert not [v for v in values if v in text], "a secret value was printed"


def _two_syncs(cp: ControlPlane, service: DevServer, namespace: str) -> None:
    """``good`` (Synced) and ``bad`` (TemplateError) over one path, with a templates opt-in."""
    harness.kubernetes_identity(cp, namespace, templates=True)
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "DB_USER", "plugin-user-value-1")
    service.set_secret(PROJECT_ID, "dev", path, "DB_PASSWORD", "plugin-password-value-1")
    harness.secret_sync(cp, namespace, "good", sources=[source(path)], target={"name": "good"}, **QUIET)
    harness.secret_sync(
        cp, namespace, "bad", sources=[source(path)], target={"name": "bad", **BAD_TEMPLATE}, **QUIET
    )
    harness.wait_reason(cp, namespace, "good", "Synced")
    harness.wait_reason(cp, namespace, "bad", "TemplateError")


def test_status_why_and_template_live(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    cp = control_plane
    _two_syncs(cp, service, namespace)

    status = plugin(cp, cp.kubeconfig, "status", "-n", namespace)
    assert status.returncode == 0, status.stderr
    rows = {line.split()[0]: line.split() for line in status.stdout.splitlines()[1:]}
    assert rows["good"][1:5] == ["True", "Synced", "Polling", "ferry"]
    assert rows["bad"][1:5] == ["False", "TemplateError", "-", "ferry"]
    everywhere = plugin(cp, cp.kubeconfig, "status", "-A")
    assert everywhere.returncode == 0
    assert any(line.split()[:2] == [namespace, "bad"] for line in everywhere.stdout.splitlines())

    condition = harness.ready(cp, namespace, "bad")
    assert condition is not None
    why = eventually(
        lambda: (
            (p := plugin(cp, cp.kubeconfig, "why", "bad", "-n", namespace)) and "Warning" in p.stdout and p
        ),
        what="why shows the TemplateError Event",
    )
    assert why.returncode == 0, why.stderr
    assert "reason TemplateError" in why.stdout
    assert f"Message:      {condition['message']}" in why.stdout
    assert "Identity MachineIdentity/ferry" in why.stdout and "reason LoggedIn" in why.stdout
    event = [line.split() for line in why.stdout.split("Events", 1)[1].splitlines() if "Warning" in line]
    assert event and event[-1][1:3] == ["Warning", "TemplateError"]

    # The same reason and message as the operator, rendered here from sample values.
    env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig)}
    template = subprocess.run(
        [
            sys.executable,
            "-m",
            "secretferry",
            "template",
            "--live",
            f"{namespace}/bad",
            "--set",
            "DB_USER=sample",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert template.returncode == 1
    assert template.stderr == f"TemplateError: {condition['message']}\n"
    good = subprocess.run(
        [
            sys.executable,
            "-m",
            "secretferry",
            "template",
            "--live",
            f"{namespace}/good",
            "--set",
            "DB_USER=sample",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert good.returncode == 0, good.stderr
    assert "DB_USER: <redacted 6 bytes>" in good.stdout
    no_values(status.stdout, everywhere.stdout, why.stdout, template.stderr, good.stdout)


def test_sync_sets_force_sync_and_the_operator_reads_again(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    cp = control_plane
    _two_syncs(cp, service, namespace)
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "DB_USER", "plugin-user-value-2")
    forced = plugin(cp, cp.kubeconfig, "sync", "good", "-n", namespace)
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.startswith(f"secretsync {namespace}/good: {FORCE_SYNC}=")
    eventually(
        lambda: (secret_data(cp, namespace, "good") or {}).get("DB_USER") == "plugin-user-value-2",
        what="the forced sync wrote the new value",
    )

    by_identity = plugin(cp, cp.kubeconfig, "sync", "--identity", "ferry", "-n", namespace)
    assert by_identity.returncode == 0, by_identity.stderr
    assert sorted(line.split(":")[0] for line in by_identity.stdout.splitlines()) == [
        f"secretsync {namespace}/bad",
        f"secretsync {namespace}/good",
    ]
    for name in ("good", "bad"):
        body = harness.get(cp, "secretsync", name, namespace)
        assert body is not None and FORCE_SYNC in body["metadata"]["annotations"]
    nobody = plugin(cp, cp.kubeconfig, "sync", "--identity", "ClusterMachineIdentity/ferry", "-n", namespace)
    assert nobody.returncode == 1 and "No SecretSync uses identity" in nobody.stderr
    no_values(forced.stdout, by_identity.stdout)


def test_a_restricted_user_is_told_what_is_forbidden(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    tmp_path: Path,
) -> None:
    cp = control_plane
    _two_syncs(cp, service, namespace)
    cp.kubectl("create", "serviceaccount", "viewer", "-n", namespace)
    cp.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "syncs-viewer", "namespace": namespace},
            "rules": [
                {"apiGroups": ["secretferry.io"], "resources": ["secretsyncs"], "verbs": ["get", "list"]}
            ],
        }
    )
    cp.kubectl(
        "create",
        "rolebinding",
        "syncs-viewer",
        "-n",
        namespace,
        "--role=syncs-viewer",
        f"--serviceaccount={namespace}:viewer",
    )
    viewer = cp.token_kubeconfig(cp.token_for(namespace, "viewer"), tmp_path / "viewer", namespace=namespace)

    status = plugin(cp, viewer, "status")  # the context's namespace
    assert status.returncode == 0, status.stderr
    assert {line.split()[0] for line in status.stdout.splitlines()[1:]} == {"good", "bad"}

    everywhere = plugin(cp, viewer, "status", "-A")
    assert everywhere.returncode == 1
    assert everywhere.stderr == (
        "kubectl-secretferry: cannot list SecretSyncs in all namespaces: forbidden"
        " (your RBAC does not allow it)\n"
    )

    why = plugin(cp, viewer, "why", "bad")
    assert why.returncode == 1
    assert "reason TemplateError" in why.stdout
    assert f"cannot get MachineIdentity {namespace}/ferry: forbidden" in why.stdout
    assert f"cannot list Events in namespace {namespace}: forbidden" in why.stdout
    assert "Traceback" not in why.stderr

    refused = plugin(cp, viewer, "sync", "good", "bad")
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        f"kubectl-secretferry: cannot patch SecretSync {namespace}/{name}: forbidden"
        " (your RBAC does not allow it)"
        for name in ("good", "bad")
    ]
    assert FORCE_SYNC not in json.dumps(harness.get(cp, "secretsync", "good", namespace))
    no_values(status.stdout, why.stdout, why.stderr, refused.stderr)


def _template_live(cp: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "secretferry", "template", "--live", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(cp.kubeconfig)},
        check=False,
        timeout=60,
    )


def test_template_live_reads_template_from_sources_as_the_operator_does(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    cp = control_plane
    harness.kubernetes_identity(cp, namespace, templates=True)
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "DB_USER", "plugin-user-value-3")
    for name, labels in (("tpl", {"secretferry.io/template-source": "true"}), ("unlabelled", {})):
        cp.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace, "labels": labels},
                "data": {"app.ini": "user={{ DB_USER }}"},
            }
        )
    for name, source_name in (("from-cm", "tpl"), ("from-unlabelled", "unlabelled")):
        target = {"name": name, "template": {"templateFrom": [{"configMap": {"name": source_name}}]}}
        harness.secret_sync(cp, namespace, name, sources=[source(path)], target=target, **QUIET)
    harness.wait_reason(cp, namespace, "from-cm", "Synced")
    refused = harness.wait_reason(cp, namespace, "from-unlabelled", "TemplateSourceNotLabelled")

    rendered = _template_live(cp, f"{namespace}/from-cm", "--set", "DB_USER=sample", "--show-values")
    assert rendered.returncode == 0, rendered.stderr
    assert "app.ini: user=sample" in rendered.stdout
    unlabelled = _template_live(cp, f"{namespace}/from-unlabelled", "--set", "DB_USER=sample")
    assert (unlabelled.returncode, unlabelled.stderr) == (
        1,
        f"TemplateSourceNotLabelled: {refused['message']}\n",
    )
    missing = _template_live(cp, f"{namespace}/nope", "--set", "DB_USER=sample")
    assert (missing.returncode, missing.stderr) == (
        2,
        f"secretferry template: SecretSync {namespace}/nope does not exist\n",
    )

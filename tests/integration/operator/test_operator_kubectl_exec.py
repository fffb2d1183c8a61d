"""``kubectl secretferry`` and ``secretferry template --live`` with a kubeconfig whose user is an
exec credential plugin (as EKS, GKE and AKS write them), against the real control plane.

The plugin is a real program (a shell script this test writes) that prints an ExecCredential
holding a ServiceAccount token the test minted from the real apiserver (TokenRequest, through
``kubectl create token``), records each run and the KUBERNETES_EXEC_INFO it was given. The
ServiceAccount may read SecretSyncs, identities and Events in one namespace only: what the
tools show is what that token may read, never the admin's view.

Then the failures a user meets: a plugin that is not installed (its installHint shown), one that
exits non-zero (the tail of its stderr, with the token in it redacted), one whose token the
apiserver refuses (run once more, then named), and, in-process with an injected clock, a
credential that expires: the plugin runs again, and when that run fails the error says so.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_operator_kubectl_plugin import _two_syncs, no_values, plugin

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer
from secretferry.kube import client, errors

pytestmark = pytest.mark.integration

V1 = "client.authentication.k8s.io/v1"
USER = "exec-user"
# Prints an ExecCredential with the token in $TOKEN_FILE, valid for $LIFETIME_SECONDS, unless
# $FAIL_FILE exists; appends one line per run to $RUNS_FILE and keeps KUBERNETES_EXEC_INFO.
PLUGIN_SCRIPT = """#!/bin/sh
echo run >> "$RUNS_FILE"
printf '%s' "$KUBERNETES_EXEC_INFO" > "$EXEC_INFO_FILE"
if [ -e "$FAIL_FILE" ]; then
  echo "get-token: the SSO session has expired; run 'corp-sso login' (stale $(cat "$TOKEN_FILE"))" >&2
  exit 7
fi
expiry=$(date -u -d "+${LIFETIME_SECONDS} seconds" +%Y-%m-%dT%H:%M:%SZ)
format='{"apiVersion": "%s", "kind": "ExecCredential",'
format="$format"' "status": {"token": "%s", "expirationTimestamp": "%s"}}'
printf "$format" "client.authentication.k8s.io/v1" "$(cat "$TOKEN_FILE")" "$expiry"
"""


class ExecSetup:
    """A kubeconfig in ``home`` whose user runs ``home/bin/get-token`` (a relative command: it
    is found next to the kubeconfig, as client-go resolves it)."""

    def __init__(
        self, cp: ControlPlane, home: Path, *, token: str, namespace: str, command: str = "bin/get-token"
    ):
        self.home = home
        (home / "bin").mkdir(parents=True, exist_ok=True)
        script = home / "bin" / "get-token"
        script.write_text(PLUGIN_SCRIPT)
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        self.token_file, self.runs_file = home / "token", home / "runs"
        self.exec_info_file, self.fail_file = home / "exec-info.json", home / "fail"
        self.token_file.write_text(token)
        self.token_file.chmod(0o600)
        env = {
            "TOKEN_FILE": self.token_file,
            "RUNS_FILE": self.runs_file,
            "EXEC_INFO_FILE": self.exec_info_file,
            "FAIL_FILE": self.fail_file,
            "LIFETIME_SECONDS": 600,
        }
        self.kubeconfig = home / "kubeconfig"
        self.ca_data = base64.b64encode(cp.ca_pem.encode()).decode()
        self.kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "local",
                            "cluster": {"server": cp.server, "certificate-authority-data": self.ca_data},
                        }
                    ],
                    "users": [
                        {
                            "name": USER,
                            "user": {
                                "exec": {
                                    "apiVersion": V1,
                                    "command": command,
                                    "args": ["--cluster", "local"],
                                    "env": [{"name": k, "value": str(v)} for k, v in env.items()],
                                    "installHint": "Install corp-sso from the platform portal.",
                                    "provideClusterInfo": True,
                                    "interactiveMode": "Never",
                                }
                            },
                        }
                    ],
                    "contexts": [
                        {
                            "name": "local",
                            "context": {"cluster": "local", "user": USER, "namespace": namespace},
                        }
                    ],
                    "current-context": "local",
                }
            )
        )

    def runs(self) -> int:
        return len(self.runs_file.read_text().splitlines()) if self.runs_file.exists() else 0

    def exec_info(self) -> dict[str, Any]:
        return dict(json.loads(self.exec_info_file.read_text()))


def _viewer(cp: ControlPlane, namespace: str, name: str = "viewer") -> str:
    """A ServiceAccount that may read SecretSyncs, identities and Events in ``namespace``; its token."""
    cp.kubectl("create", "serviceaccount", name, "-n", namespace)
    cp.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": [
                {
                    "apiGroups": ["secretferry.io"],
                    "resources": ["secretsyncs", "machineidentities"],
                    "verbs": ["get", "list"],
                },
                {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]},
            ],
        }
    )
    cp.kubectl(
        "create",
        "rolebinding",
        name,
        "-n",
        namespace,
        f"--role={name}",
        f"--serviceaccount={namespace}:{name}",
    )
    return cp.token_for(namespace, name, expiration_seconds=3600)


def _template_live(kubeconfig: Path, target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "secretferry", "template", "--live", target, "--set", "DB_USER=sample"],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        check=False,
        timeout=60,
    )


def test_status_why_and_template_live_through_an_exec_plugin(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str, tmp_path: Path
) -> None:
    cp = control_plane
    _two_syncs(cp, service, namespace)
    token = _viewer(cp, namespace)
    setup = ExecSetup(cp, tmp_path / "home", token=token, namespace=namespace)

    status = plugin(cp, setup.kubeconfig, "status")  # the context's namespace
    assert status.returncode == 0, status.stderr
    rows = {line.split()[0]: line.split() for line in status.stdout.splitlines()[1:]}
    assert rows["good"][1:5] == ["True", "Synced", "Polling", "ferry"]
    assert rows["bad"][1:3] == ["False", "TemplateError"]
    assert setup.runs() == 1  # one run per process, however many requests
    # KUBERNETES_EXEC_INFO as kubectl sets it: not interactive, the cluster (provideClusterInfo).
    assert setup.exec_info() == {
        "kind": "ExecCredential",
        "apiVersion": V1,
        "spec": {
            "interactive": False,
            "cluster": {"server": cp.server, "certificate-authority-data": setup.ca_data},
        },
    }

    why = plugin(cp, setup.kubeconfig, "why", "bad")
    assert why.returncode == 0, why.stderr
    assert "reason TemplateError" in why.stdout and "Identity MachineIdentity/ferry" in why.stdout
    assert setup.runs() == 2

    # What the token may not read is refused as the ServiceAccount, not done as the admin.
    everywhere = plugin(cp, setup.kubeconfig, "status", "-A")
    assert everywhere.returncode == 1
    assert "cannot list SecretSyncs in all namespaces: forbidden" in everywhere.stderr

    rendered = _template_live(setup.kubeconfig, f"{namespace}/bad")
    assert rendered.returncode == 1
    assert rendered.stderr.startswith("TemplateError: ")
    good = _template_live(setup.kubeconfig, f"{namespace}/good")
    assert good.returncode == 0, good.stderr
    assert "DB_USER: <redacted 6 bytes>" in good.stdout

    outputs = (
        status.stdout,
        status.stderr,
        why.stdout,
        why.stderr,
        everywhere.stderr,
        rendered.stderr,
        good.stdout,
    )
    no_values(*outputs)
    assert not [text for text in outputs if token in text], "the token was printed"


def test_a_missing_failing_or_refused_plugin_is_named_clearly(
    control_plane: ControlPlane, operator: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    cp = control_plane
    token = _viewer(cp, namespace)

    missing = ExecSetup(
        cp, tmp_path / "missing", token=token, namespace=namespace, command="corp-sso-get-token"
    )
    proc = plugin(cp, missing.kubeconfig, "status")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (
        f"kubectl-secretferry: the exec credential plugin 'corp-sso-get-token' of user '{USER}' not found"
        " (is it installed and on PATH?); Install corp-sso from the platform portal.\n"
    )

    failing = ExecSetup(cp, tmp_path / "failing", token=token, namespace=namespace)
    failing.fail_file.touch()
    proc = plugin(cp, failing.kubeconfig, "status")
    assert proc.returncode == 1
    assert proc.stderr == (
        f"kubectl-secretferry: the exec credential plugin '{failing.home / 'bin/get-token'}' of user '{USER}'"
        " exited with status 7: get-token: the SSO session has expired;"
        " run 'corp-sso login' (stale <redacted>)\n"
    )
    template = _template_live(failing.kubeconfig, f"{namespace}/anything")
    assert template.returncode != 0 and "exited with status 7" in template.stderr
    assert token not in proc.stderr + template.stderr

    refused = ExecSetup(
        cp, tmp_path / "refused", token="not-a-token-the-apiserver-knows", namespace=namespace
    )
    proc = plugin(cp, refused.kubeconfig, "status")
    assert proc.returncode == 1
    assert proc.stderr == (
        f"kubectl-secretferry: cannot list SecretSyncs in namespace {namespace}: unauthorized:"
        f" GET /apis/secretferry.io/v1alpha1/namespaces/{namespace}/secretsyncs: the apiserver refused the"
        f" credential from the exec credential plugin '{refused.home / 'bin/get-token'}' of user '{USER}',"
        " also after running it again\n"
    )
    assert refused.runs() == 2  # at connect, and once after the 401: not a loop


def test_an_expired_credential_runs_the_plugin_again(
    control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> None:
    """In-process, with the clock injected: the real apiserver and plugin, no waiting."""
    cp = control_plane
    setup = ExecSetup(cp, tmp_path / "home", token=_viewer(cp, namespace), namespace=namespace)
    now = [datetime.now(UTC)]

    async def scenario() -> None:
        kube = await client.connect(kubeconfig=str(setup.kubeconfig), exec_plugins=True, clock=lambda: now[0])
        path = f"/apis/secretferry.io/v1alpha1/namespaces/{namespace}/secretsyncs"
        try:
            assert (await kube.request("GET", path))["items"] == []
            await kube.request("GET", path)
            assert setup.runs() == 1
            now[0] += timedelta(seconds=601)  # past expirationTimestamp (600 s)
            await kube.request("GET", path)
            assert setup.runs() == 2
            setup.fail_file.touch()
            now[0] += timedelta(seconds=601)
            with pytest.raises(
                errors.CredentialPluginFailed, match="exited with status 7: get-token: the SSO"
            ):
                await kube.request("GET", path)
            assert setup.runs() == 3
        finally:
            await kube.close()

    asyncio.run(scenario())

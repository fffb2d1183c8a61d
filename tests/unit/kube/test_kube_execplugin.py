"""Exec credential plugins: the kubeconfig's exec section, KUBERNETES_EXEC_INFO, what a plugin may
print, how a failure reads (never with a token), and real runs of small plugin scripts.

Caching, expiry and the 401 re-run: test_kube_execcache.py.
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from secretferry.kube import errors, execplugin, kubeconfig

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJlLXZhbHVl"
CLUSTER = {"server": "https://kube.example:6443"}


def _plugin(**overrides: Any) -> execplugin.ExecPlugin:
    fields: dict[str, Any] = {"command": "/bin/get-token", "api_version": V1BETA1, "user": "u"}
    return execplugin.ExecPlugin(**{**fields, **overrides})


def _parse(
    section: dict[str, Any], tmp_path: Path, cluster: dict[str, Any] | None = None
) -> execplugin.ExecPlugin:
    return execplugin.parse_config(
        section, base=tmp_path, user="u", cluster=cluster or CLUSTER, cluster_base=tmp_path
    )


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _credential(status: dict[str, Any], *, api_version: str = V1BETA1, kind: str = "ExecCredential") -> bytes:
    return json.dumps({"apiVersion": api_version, "kind": kind, "status": status}).encode()


# --- the exec section --------------------------------------------------------------------------


def test_a_full_section_is_read(tmp_path: Path) -> None:
    found = _parse(
        {
            "apiVersion": V1,
            "command": "aws",
            "args": ["eks", "get-token", "--cluster-name", "prod"],
            "env": [{"name": "AWS_PROFILE", "value": "ops"}],
            "installHint": "install the AWS CLI",
            "interactiveMode": "Never",
        },
        tmp_path,
    )
    assert found == execplugin.ExecPlugin(
        command="aws",  # a bare name: looked up on PATH when run
        args=("eks", "get-token", "--cluster-name", "prod"),
        env=(("AWS_PROFILE", "ops"),),
        api_version=V1,
        install_hint="install the AWS CLI",
        interactive_mode="Never",
        user="u",
    )
    assert "ops" not in repr(found)  # env may carry a secret


def test_a_command_with_a_separator_is_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    assert _parse({"apiVersion": V1BETA1, "command": "bin/get-token"}, tmp_path).command == str(
        tmp_path / "bin/get-token"
    )
    assert _parse({"apiVersion": V1BETA1, "command": "/abs/get-token"}, tmp_path).command == "/abs/get-token"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"apiVersion": V1BETA1}, "exec has no command"),
        ({"command": "x"}, "exec apiVersion '(none)' is not supported"),
        (
            {"command": "x", "apiVersion": "client.authentication.k8s.io/v1alpha1"},
            "v1alpha1' is not supported",
        ),
        (
            {"command": "x", "apiVersion": V1},
            "interactiveMode must be set for client.authentication.k8s.io/v1",
        ),
        ({"command": "x", "apiVersion": V1, "interactiveMode": "Sometimes"}, "'Sometimes' is not one of"),
        ({"command": "x", "apiVersion": V1BETA1, "env": [{"value": "v"}]}, "needs a name"),
        (
            {"command": "x", "apiVersion": V1BETA1, "interactiveMode": "Always"},
            "has interactiveMode Always: it must prompt at a terminal, and secretferry runs plugins"
            " without one",
        ),
    ],
)
def test_an_unusable_section_is_not_configured(tmp_path: Path, section: dict[str, Any], message: str) -> None:
    with pytest.raises(errors.NotConfigured, match=re.escape(message)) as caught:
        _parse(section, tmp_path)
    assert caught.value.message.startswith("no usable Kubernetes configuration: user 'u'")


def test_v1beta1_defaults_interactive_mode(tmp_path: Path) -> None:
    assert _parse({"command": "x", "apiVersion": V1BETA1}, tmp_path).interactive_mode == "IfAvailable"


def test_exec_info_without_cluster_info() -> None:
    assert json.loads(execplugin.exec_info(_plugin())) == {
        "kind": "ExecCredential",
        "apiVersion": V1BETA1,
        "spec": {"interactive": False},
    }


def test_provide_cluster_info_hands_over_the_cluster_with_the_ca_as_data(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(b"CA PEM")
    cluster = {
        "server": "https://kube.example:6443",
        "certificate-authority": "ca.crt",
        "tls-server-name": "api.internal",
        "extensions": [
            {"name": "other", "extension": {"x": 1}},
            {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "prod"}},
        ],
    }
    plugin = _parse(
        {"command": "x", "apiVersion": V1, "interactiveMode": "Never", "provideClusterInfo": True},
        tmp_path,
        cluster,
    )
    assert json.loads(execplugin.exec_info(plugin)) == {
        "kind": "ExecCredential",
        "apiVersion": V1,
        "spec": {
            "interactive": False,
            "cluster": {
                "server": "https://kube.example:6443",
                "tls-server-name": "api.internal",
                "certificate-authority-data": base64.b64encode(b"CA PEM").decode(),
                "config": {"audience": "prod"},
            },
        },
    }


def test_the_environment_is_ours_then_the_kubeconfigs_then_exec_info() -> None:
    plugin = _plugin(env=(("A", "from-kubeconfig"), ("KUBERNETES_EXEC_INFO", "forged")))
    env = execplugin.environment(plugin, {"A": "ours", "B": "ours"})
    assert env["A"] == "from-kubeconfig" and env["B"] == "ours"
    assert json.loads(env["KUBERNETES_EXEC_INFO"])["kind"] == "ExecCredential"


# --- through kubeconfig.load -------------------------------------------------------------------


def _kubeconfig(path: Path, user: dict[str, Any]) -> str:
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": CLUSTER}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


def test_the_tools_get_the_plugin_and_the_operator_refuses_it(tmp_path: Path) -> None:
    path = _kubeconfig(
        tmp_path / "kc", {"exec": {"apiVersion": V1BETA1, "command": "gke-gcloud-auth-plugin"}}
    )
    found = kubeconfig.load(path, exec_plugins=True)
    assert found.authorization is None and found.exec_plugin is not None
    assert found.exec_plugin.command == "gke-gcloud-auth-plugin"
    with pytest.raises(errors.NotConfigured, match="exec credential plugin, which the operator cannot use"):
        kubeconfig.load(path)


@pytest.mark.parametrize(
    "other",
    [{"token": "t"}, {"tokenFile": "tok"}, {"client-certificate": "c.crt", "client-key": "c.key"}],
)
def test_a_credential_at_hand_wins_over_the_plugin(tmp_path: Path, other: dict[str, Any]) -> None:
    (tmp_path / "tok").write_text("from-file")
    path = _kubeconfig(tmp_path / "kc", {"exec": {"apiVersion": V1BETA1, "command": "x"}, **other})
    assert kubeconfig.load(path, exec_plugins=True).exec_plugin is None


# --- what a plugin prints ----------------------------------------------------------------------


def test_a_token_with_an_expiry() -> None:
    found = execplugin.parse_output(
        _credential({"token": JWT, "expirationTimestamp": "2026-11-27T13:00:00Z"}), plugin=_plugin()
    )
    assert found.token == JWT and found.cert_pem is None
    assert found.expires_at is not None and found.expires_at.isoformat() == "2026-11-27T13:00:00+00:00"
    assert JWT not in repr(found)


def test_a_client_certificate_pair_without_expiry() -> None:
    found = execplugin.parse_output(
        _credential({"clientCertificateData": "CERT PEM", "clientKeyData": "KEY PEM"}), plugin=_plugin()
    )
    assert (found.token, found.cert_pem, found.key_pem, found.expires_at) == (
        None,
        b"CERT PEM",
        b"KEY PEM",
        None,
    )
    assert "KEY PEM" not in repr(found)


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        (b"", "printed no ExecCredential JSON on stdout"),
        (b'{"token": "' + JWT.encode() + b'"', "printed no ExecCredential JSON on stdout"),
        (b"[]", "not an ExecCredential object"),
        (_credential({"token": JWT}, kind="Secret"), "printed kind 'Secret', not ExecCredential"),
        (
            _credential({"token": JWT}, api_version=V1),
            f"is configured for apiVersion {V1BETA1} but printed '{V1}'",
        ),
        (json.dumps({"apiVersion": V1BETA1, "kind": "ExecCredential"}).encode(), "without status"),
        (_credential({}), "printed neither a token nor clientCertificateData/clientKeyData"),
        (_credential({"clientCertificateData": "C"}), "only one of clientCertificateData and clientKeyData"),
        (_credential({"token": JWT, "expirationTimestamp": "tomorrow"}), "not RFC 3339"),
        (_credential({"token": JWT, "expirationTimestamp": "2026-11-27T13:00:00"}), "without a time zone"),
    ],
)
def test_unusable_output_is_a_clear_failure_that_quotes_no_token(stdout: bytes, message: str) -> None:
    with pytest.raises(errors.CredentialPluginFailed, match=message) as caught:
        execplugin.parse_output(stdout, plugin=_plugin())
    assert caught.value.message.startswith("the exec credential plugin '/bin/get-token' of user 'u' ")
    assert JWT not in str(caught.value) and caught.value.__cause__ is None


@pytest.mark.parametrize(
    "said",
    [
        f"error: token {JWT} expired",
        'refusing: {"token": "plain-secret-value"}',
        "token=plain-secret-value",
        "password: plain-secret-value",
        "k8s-aws-v1.aHR0cHM6Ly9zdHMuYW1hem9uYXdzLmNvbS8",
        "raw " + "aB3x" * 10,
    ],
)
def test_the_stderr_tail_redacts_what_looks_like_a_credential(said: str) -> None:
    tail = execplugin.stderr_tail(("line one\n" + said + "\n").encode())
    assert "<redacted>" in tail
    assert JWT not in tail and "plain-secret-value" not in tail and "aB3x" * 10 not in tail
    assert "aHR0cHM6Ly9zdHMu" not in tail


def test_the_stderr_tail_is_the_end_one_line_and_escaped() -> None:
    tail = execplugin.stderr_tail(b"first\n" + b"x " * 1000 + b"\nthe last words\x1b[31m\n")
    assert tail.endswith("the last words\\x1b[31m") and tail.startswith("…")
    assert "\n" not in tail and len(tail) <= 601


# --- real runs ---------------------------------------------------------------------------------


async def test_a_real_run_sees_args_env_and_exec_info(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    script = _script(
        tmp_path / "plugin",
        f"""printf '%s\\n' "$@" > {tmp_path}/args
printf '%s' "$KUBERNETES_EXEC_INFO" > {seen}
printf '%s' "$FROM_KUBECONFIG" > {tmp_path}/env
printf '{{"apiVersion": "{V1}", "kind": "ExecCredential", "status": {{"token": "{JWT}"}}}}'
""",
    )
    plugin = _plugin(
        command=str(script),
        args=("get-token", "--cluster", "a b"),
        env=(("FROM_KUBECONFIG", "yes"),),
        api_version=V1,
        interactive_mode="Never",
    )
    found = await execplugin.run(plugin, env={"PATH": os.environ["PATH"]})
    assert found.token == JWT
    assert (tmp_path / "args").read_text().splitlines() == [
        "get-token",
        "--cluster",
        "a b",
    ]  # no shell splitting
    assert (tmp_path / "env").read_text() == "yes"
    assert json.loads(seen.read_text()) == {
        "kind": "ExecCredential",
        "apiVersion": V1,
        "spec": {"interactive": False},
    }


async def test_a_bare_command_is_found_on_the_path(tmp_path: Path) -> None:
    _script(
        tmp_path / "my-plugin",
        f"""printf '{{"apiVersion": "{V1BETA1}", "kind": "ExecCredential", "status": {{"token": "t"}}}}'\n""",
    )
    found = await execplugin.run(_plugin(command="my-plugin"), env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert found.token == "t"


async def test_a_missing_command_shows_the_install_hint(tmp_path: Path) -> None:
    plugin = _plugin(
        command="gke-gcloud-auth-plugin", install_hint="Install it with gcloud components install"
    )
    with pytest.raises(errors.CredentialPluginFailed) as caught:
        await execplugin.run(plugin, env={"PATH": str(tmp_path)})
    assert caught.value.message == (
        "the exec credential plugin 'gke-gcloud-auth-plugin' of user 'u' not found (is it installed and on"
        " PATH?); Install it with gcloud components install"
    )


async def test_a_non_zero_exit_quotes_the_stderr_tail_and_never_the_token(tmp_path: Path) -> None:
    script = _script(
        tmp_path / "plugin",
        f"""echo '{{"apiVersion": "{V1BETA1}", "kind": "ExecCredential", "status": {{"token": "{JWT}"}}}}'
echo "warming up" >&2
echo "error: the SSO session has expired, run aws sso login (last token {JWT})" >&2
exit 3
""",
    )
    with pytest.raises(errors.CredentialPluginFailed) as caught:
        await execplugin.run(_plugin(command=str(script)), env={"PATH": os.environ["PATH"]})
    message = caught.value.message
    assert (
        f"'{script}' of user 'u' exited with status 3: warming up | error: the SSO session has expired"
        in message
    )
    assert "(last token <redacted>)" in message and JWT not in message


async def test_a_hung_plugin_is_stopped(tmp_path: Path) -> None:
    script = _script(tmp_path / "plugin", "exec sleep 30\n")
    with pytest.raises(errors.CredentialPluginFailed, match=r"did not finish within 0\.3 s"):
        await execplugin.run(
            _plugin(command=str(script)), env={"PATH": os.environ["PATH"]}, timeout_seconds=0.3
        )


async def test_a_file_that_is_not_executable(tmp_path: Path) -> None:
    (tmp_path / "plugin").write_text("not a program")
    with pytest.raises(errors.CredentialPluginFailed, match="cannot be run \\(permission denied\\)"):
        await execplugin.run(_plugin(command=str(tmp_path / "plugin")), env={})


def test_the_stderr_tail_keeps_what_is_not_a_credential() -> None:
    said = b"get-token: error: /usr/local/google-cloud-sdk/bin/gcloud-credential-helper exited: 403 Forbidden"
    assert execplugin.stderr_tail(said) == said.decode()

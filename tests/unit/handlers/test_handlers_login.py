"""kopf's login: the apiserver address from the pod's environment, never ``kubernetes.default.svc``.

The environment and the ServiceAccount directory are faked (monkeypatch, tmp_path).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import kopf
import pytest

from secretferry import settings as settings_mod
from secretferry.devcluster import certs
from secretferry.handlers import operator
from secretferry.kube import incluster

LOGGER = logging.getLogger("test.login")


@pytest.fixture
def pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pod: the kubelet's env vars and ServiceAccount files, with a real CA certificate."""
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text("token-1\n")
    (sa / "ca.crt").write_text(certs.generate(tmp_path / "pki").ca_cert.read_text())
    (sa / "namespace").write_text("ops")
    monkeypatch.setattr(incluster, "SERVICE_ACCOUNT_DIR", sa)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    return sa


def _memo(kubeconfig: str | None = None) -> kopf.Memo:
    return kopf.Memo(settings=settings_mod.Settings(kubeconfig=kubeconfig))


def _login(memo: kopf.Memo) -> kopf.ConnectionInfo:
    info = operator.login(settings=kopf.OperatorSettings(), memo=memo, logger=LOGGER)
    assert isinstance(info, kopf.ConnectionInfo)
    return info


def test_in_a_pod_the_server_comes_from_the_environment(pod: Path) -> None:
    before = datetime.now(UTC)
    info = _login(_memo())
    assert info.server == "https://10.96.0.1:6443"
    assert info.ca_path == str(pod / "ca.crt")
    assert info.as_http_headers() == {"Authorization": "Bearer token-1"}
    assert info.default_namespace == "ops"
    info.as_ssl_context()  # kopf can build its TLS context from the CA file
    # An expiration makes kopf's vault call the login again, which re-reads the token file.
    assert info.expiration is not None
    assert before < info.expiration <= datetime.now(UTC) + timedelta(seconds=incluster.TOKEN_REREAD_SECONDS)


def test_an_ipv6_service_host_is_bracketed(pod: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1")
    assert _login(_memo()).server == "https://[fd00:10:96::1]:6443"


def test_a_re_login_reads_the_rotated_token(pod: Path) -> None:
    memo = _memo()
    first = _login(memo)
    assert _login(memo) == first  # unchanged: equal, so kopf can refuse it after a 401
    (pod / "token").write_text("token-2")
    rotated = _login(memo)
    assert rotated.token == "token-2"
    assert rotated.server == first.server


def test_a_pod_without_a_token_stops_with_a_clear_error(pod: Path) -> None:
    (pod / "token").unlink()
    with pytest.raises(kopf.PermanentError, match=r"ServiceAccount token file .*token does not exist"):
        _login(_memo())


def _kubeconfig(path: Path) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: c, cluster: {server: 'https://kubeconfig.example:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    return path


def test_outside_a_pod_the_kubeconfig_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path / "kubeconfig")))
    info = _login(_memo())
    assert info.server == "https://kubeconfig.example:6443"
    assert info.expiration is None


@pytest.mark.usefixtures("pod")
def test_an_explicit_kubeconfig_wins_in_a_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same choice as our own client, so kopf and the controller talk to one cluster."""
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))  # what runtime.main() exports
    assert _login(_memo(str(kubeconfig))).server == "https://kubeconfig.example:6443"

"""In-cluster config: the address from the pod's environment, clear errors, token re-reads.

The environment, the ServiceAccount directory and the clock are all faked; the end-to-end test
runs our client against a local TLS endpoint that records the Authorization header it receives.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web

from secretferry.devcluster import certs
from secretferry.kube import client, errors, incluster

START = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
POD_ENV = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


class FakeClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def _service_account(directory: Path, *, token: str = "token-1", namespace: str | None = "ops") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    if namespace is not None:
        (directory / "namespace").write_text(namespace)
    return directory


@pytest.mark.parametrize(
    ("host", "port", "expected"),
    [
        ("10.96.0.1", "443", "https://10.96.0.1:443"),
        ("api.internal.example", "6443", "https://api.internal.example:6443"),
        ("fd00:10:96::1", "443", "https://[fd00:10:96::1]:443"),
        ("::1", "6443", "https://[::1]:6443"),
        ("fe80::1%eth0", "443", "https://[fe80::1%eth0]:443"),
        ("[fd00::1]", "443", "https://[fd00::1]:443"),  # already bracketed: not twice
    ],
)
def test_server_url(host: str, port: str, expected: str) -> None:
    assert incluster.server_url(host, port) == expected


def test_load_reads_the_address_from_the_environment(tmp_path: Path) -> None:
    sa = _service_account(tmp_path)
    config = incluster.load({**POD_ENV, "KUBERNETES_SERVICE_PORT": "6443"}, sa)
    assert config == incluster.InClusterConfig(
        server="https://10.96.0.1:6443",
        ca_path=sa / "ca.crt",
        token_path=sa / "token",
        namespace="ops",
    )
    assert "kubernetes.default.svc" not in config.server


def test_load_brackets_an_ipv6_service_host(tmp_path: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "fd00:10:96::1", "KUBERNETES_SERVICE_PORT": "443"}
    config = incluster.load(env, _service_account(tmp_path))
    assert config is not None
    assert config.server == "https://[fd00:10:96::1]:443"


def test_namespace_file_is_optional(tmp_path: Path) -> None:
    config = incluster.load(POD_ENV, _service_account(tmp_path, namespace=None))
    assert config is not None
    assert config.namespace is None


@pytest.mark.parametrize("env", [{}, {"KUBERNETES_SERVICE_HOST": ""}, {"KUBERNETES_SERVICE_PORT": "443"}])
def test_not_in_a_pod_is_none_whatever_the_files(env: dict[str, str], tmp_path: Path) -> None:
    assert incluster.load(env, tmp_path / "absent") is None


@pytest.mark.parametrize(
    ("env", "break_files", "named"),
    [
        ({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, (), "KUBERNETES_SERVICE_PORT"),
        (POD_ENV, ("token",), "token does not exist"),
        (POD_ENV, ("ca.crt",), "ca.crt does not exist"),
        (POD_ENV, ("token", "ca.crt"), "token does not exist"),
    ],
)
def test_a_pod_without_its_files_is_a_clear_error(
    env: dict[str, str], break_files: tuple[str, ...], named: str, tmp_path: Path
) -> None:
    sa = _service_account(tmp_path, token="s3cr3t-token-value")
    for name in break_files:
        (sa / name).unlink()
    with pytest.raises(errors.NotConfigured) as caught:
        incluster.load(env, sa)
    message = str(caught.value)
    assert named in message
    assert "KUBERNETES_SERVICE_HOST is set" in message
    assert "s3cr3t" not in message


def test_an_empty_token_file_is_a_clear_error(tmp_path: Path) -> None:
    sa = _service_account(tmp_path, token="\n")
    with pytest.raises(errors.NotConfigured, match=r"token file .*token is empty"):
        incluster.load(POD_ENV, sa)


def test_current_token_is_re_read_once_due(tmp_path: Path) -> None:
    sa = _service_account(tmp_path, token="token-1\n")
    clock = FakeClock()
    tokens = incluster.TokenFile(sa / "token", clock=clock)
    first = tokens.current()
    assert first.value == "token-1"  # stripped: a trailing newline would break the header
    assert first.reread_at == START + timedelta(seconds=incluster.TOKEN_REREAD_SECONDS)

    (sa / "token").write_text("token-2")  # the kubelet rotates the token
    clock.advance(incluster.TOKEN_REREAD_SECONDS - 1)
    assert tokens.current().value == "token-1"  # not yet due: no file read per request
    clock.advance(1)
    assert tokens.current().value == "token-2"


def test_reread_keeps_an_unchanged_token_equal(tmp_path: Path) -> None:
    """kopf refuses re-login credentials equal to ones that drew a 401; that needs equality."""
    sa = _service_account(tmp_path)
    clock = FakeClock()
    tokens = incluster.TokenFile(sa / "token", clock=clock)
    first = tokens.reread()
    clock.advance(10)
    assert tokens.reread() == first
    (sa / "token").write_text("token-2")
    changed = tokens.reread()
    assert changed.value == "token-2"
    assert changed.reread_at == clock.now + timedelta(seconds=incluster.TOKEN_REREAD_SECONDS)


def test_reread_moves_the_due_time_once_due(tmp_path: Path) -> None:
    """Otherwise kopf would get credentials that are already expired and re-login at once."""
    sa = _service_account(tmp_path)
    clock = FakeClock()
    tokens = incluster.TokenFile(sa / "token", clock=clock)
    first = tokens.reread()
    clock.advance(incluster.TOKEN_REREAD_SECONDS)
    again = tokens.reread()
    assert again.value == first.value
    assert again.reread_at > clock.now


def test_a_failed_re_read_keeps_the_previous_token(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sa = _service_account(tmp_path, token="token-1")
    clock = FakeClock()
    tokens = incluster.TokenFile(sa / "token", clock=clock)
    tokens.current()
    (sa / "token").unlink()
    clock.advance(incluster.TOKEN_REREAD_SECONDS)
    with caplog.at_level(logging.WARNING, logger="secretferry.kube.incluster"):
        kept = tokens.current()
    assert kept.value == "token-1"
    assert kept.reread_at > clock.now  # tried again a period later, not on every request
    assert "does not exist" in caplog.text
    assert "token-1" not in caplog.text


def test_a_first_read_failure_raises(tmp_path: Path) -> None:
    with pytest.raises(errors.NotConfigured, match="does not exist"):
        incluster.TokenFile(tmp_path / "token").current()


# --- our client end to end -------------------------------------------------------------------


@dataclass
class Endpoint:
    """A TLS endpoint on loopback that answers /version and records each Authorization header."""

    host: str
    port: int
    ca_pem: str
    authorizations: list[str] = field(default_factory=list)


@pytest.fixture
async def endpoint(tmp_path: Path) -> AsyncIterator[Endpoint]:
    pki = certs.generate(tmp_path / "pki")  # serving certificate valid for 127.0.0.1
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.serving_cert, pki.serving_key)
    seen: list[str] = []

    async def version(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"major": "1", "minor": "30"})

    app = web.Application()
    app.router.add_get("/version", version)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = int(runner.addresses[0][1])
    try:
        yield Endpoint("127.0.0.1", port, pki.ca_cert.read_text(), seen)
    finally:
        await runner.cleanup()


async def test_connect_in_a_pod_uses_the_env_address_and_re_reads_the_token(
    endpoint: Endpoint, tmp_path: Path
) -> None:
    sa = _service_account(tmp_path / "sa", token="token-1")
    (sa / "ca.crt").write_text(endpoint.ca_pem)
    env = {"KUBERNETES_SERVICE_HOST": endpoint.host, "KUBERNETES_SERVICE_PORT": str(endpoint.port)}
    clock = FakeClock()
    kube = await client.connect(env=env, service_account_dir=sa, clock=clock)
    try:
        assert kube.server == f"https://127.0.0.1:{endpoint.port}"
        assert (await kube.request("GET", "/version"))["major"] == "1"
        (sa / "token").write_text("token-2")
        await kube.request("GET", "/version")
        clock.advance(incluster.TOKEN_REREAD_SECONDS)
        await kube.request("GET", "/version")
    finally:
        await kube.close()
    assert endpoint.authorizations == ["Bearer token-1", "Bearer token-1", "Bearer token-2"]


async def test_connect_in_a_pod_without_a_token_is_not_configured(tmp_path: Path) -> None:
    sa = _service_account(tmp_path)
    (sa / "token").unlink()
    with pytest.raises(errors.NotConfigured, match="token does not exist"):
        await client.connect(env=POD_ENV, service_account_dir=sa)


async def test_an_explicit_kubeconfig_wins_over_the_pod(tmp_path: Path) -> None:
    """Even in a pod (whose files are missing here), SECRETFERRY_KUBECONFIG is what we use."""
    missing = tmp_path / "missing-kubeconfig"
    with pytest.raises(errors.NotConfigured, match="no usable Kubernetes configuration"):
        await client.connect(kubeconfig=str(missing), env=POD_ENV, service_account_dir=tmp_path)


async def test_outside_a_pod_the_kubeconfig_is_used(tmp_path: Path) -> None:
    kubeconfig = _write_kubeconfig(tmp_path / "kubeconfig")
    kube = await client.connect(env={"KUBECONFIG": str(kubeconfig)}, service_account_dir=tmp_path / "no")
    try:
        assert kube.server == "https://kubeconfig.example:6443"
    finally:
        await kube.close()


def _write_kubeconfig(path: Path) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: c, cluster: {server: 'https://kubeconfig.example:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    return path

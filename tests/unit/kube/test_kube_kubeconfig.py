"""Reading kubeconfigs: which fields become the address, the trust, the credentials; clear errors.

The last tests connect our client through such a kubeconfig to a local TLS endpoint that demands
a client certificate, and record what reaches the wire (headers, query, body).
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from secretferry.devcluster import certs
from secretferry.kube import access, client, errors, kubeconfig

SERVER = "https://kube.example:6443"


def _b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def _kubeconfig(
    path: Path,
    *,
    cluster: dict[str, Any] | None = None,
    user: dict[str, Any] | None = None,
    current: str | None = "ctx",
    context: dict[str, Any] | None = None,
) -> Path:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": SERVER, **(cluster or {})}}],
        "users": [{"name": "u", "user": user if user is not None else {"token": "t"}}],
        "contexts": [{"name": "ctx", "context": context or {"cluster": "c", "user": "u"}}],
    }
    if current is not None:
        document["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> certs.Pki:
    return certs.generate(tmp_path_factory.mktemp("pki"))


# --- fields → Access ---------------------------------------------------------------------------


def test_a_token_is_a_bearer_header(tmp_path: Path) -> None:
    found = kubeconfig.load(str(_kubeconfig(tmp_path / "kc", user={"token": "abc"})))
    assert found == access.Access(server=SERVER, authorization="Bearer abc")
    assert "abc" not in repr(found)


def test_a_token_file_is_read_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "conf" / "creds").mkdir(parents=True)
    (tmp_path / "conf" / "creds" / "token").write_text("from-file\n")
    path = _kubeconfig(tmp_path / "conf" / "kc", user={"tokenFile": "creds/token"})
    assert kubeconfig.load(str(path)).authorization == "Bearer from-file"


def test_a_token_wins_over_a_token_file(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "kc", user={"token": "inline", "tokenFile": str(tmp_path / "missing")})
    assert kubeconfig.load(str(path)).authorization == "Bearer inline"


def test_an_unreadable_token_file_is_not_configured_and_names_the_file(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "kc", user={"tokenFile": "absent-token"})
    with pytest.raises(errors.NotConfigured, match="absent-token"):
        kubeconfig.load(str(path))


def test_username_and_password_are_basic_auth(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "kc", user={"username": "ann", "password": "pw"})
    assert kubeconfig.load(str(path)).authorization == "Basic " + _b64("ann:pw")


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        ({}, {}),
        ({"certificate-authority": "pki/ca.crt"}, {"ca_file": "pki/ca.crt"}),
        ({"certificate-authority-data": _b64("PEM")}, {"ca_pem": "PEM"}),
        (  # data wins over the file, as in kubectl
            {"certificate-authority": "/ca.crt", "certificate-authority-data": _b64("PEM")},
            {"ca_pem": "PEM"},
        ),
        ({"insecure-skip-tls-verify": True}, {"insecure": True}),
        ({"tls-server-name": "api.internal"}, {"tls_server_name": "api.internal"}),
        ({"server": SERVER + "/"}, {}),  # the trailing slash goes
    ],
)
def test_cluster_fields(tmp_path: Path, cluster: dict[str, Any], expected: dict[str, Any]) -> None:
    found = kubeconfig.load(str(_kubeconfig(tmp_path / "kc", cluster=cluster)))
    if "ca_file" in expected:
        expected["ca_file"] = tmp_path / expected["ca_file"]
    assert found == access.Access(server=SERVER, authorization="Bearer t", **expected)


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        (
            {"client-certificate": "crt", "client-key": "/abs/key"},
            {"cert_file": "crt", "key_file": Path("/abs/key")},
        ),
        (
            {"client-certificate-data": _b64("CRT"), "client-key-data": _b64("KEY")},
            {"cert_pem": b"CRT", "key_pem": b"KEY"},
        ),
        (
            {"client-certificate-data": _b64("CRT"), "client-key": "key"},
            {"cert_pem": b"CRT", "key_file": "key"},
        ),
    ],
)
def test_client_certificates(tmp_path: Path, user: dict[str, Any], expected: dict[str, Any]) -> None:
    found = kubeconfig.load(str(_kubeconfig(tmp_path / "kc", user=user)))
    resolved = {k: tmp_path / v if isinstance(v, str) else v for k, v in expected.items()}
    assert found == access.Access(server=SERVER, **resolved)
    assert found.has_client_certificate
    assert "KEY" not in repr(found)


def test_an_explicit_context_wins_over_the_current_one(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "kc", current="elsewhere")
    assert kubeconfig.load(str(path), context="ctx").server == SERVER


def test_several_files_merge_and_the_first_wins(tmp_path: Path) -> None:
    first = _kubeconfig(tmp_path / "a" / "kc", user={"token": "first"})
    second = _kubeconfig(tmp_path / "b" / "kc", user={"token": "second"}, current="other")
    missing = tmp_path / "missing"
    found = kubeconfig.load(":".join(map(str, [missing, first, second])))
    assert found.authorization == "Bearer first"


# --- what is missing, said clearly -------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"current": None}, "no current-context is set"),
        ({"current": "nope"}, "context 'nope' is not defined"),
        ({"context": {"cluster": "gone", "user": "u"}}, "cluster 'gone' is not defined"),
        ({"context": {"cluster": "c", "user": "gone"}}, "user 'gone' is not defined"),
        ({"cluster": {"server": ""}}, "has no server"),
        ({"user": {"exec": {"command": "aws"}}}, "user 'u' authenticates through an exec credential plugin"),
        (
            {"cluster": {"certificate-authority-data": "abc"}},
            "certificate-authority-data is not valid base64",
        ),
    ],
)
def test_an_unusable_kubeconfig_is_not_configured(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(errors.NotConfigured, match=message) as caught:
        kubeconfig.load(str(_kubeconfig(tmp_path / "kc", **kwargs)))
    assert caught.value.message.startswith("no usable Kubernetes configuration")


def test_no_kubeconfig_file_is_not_configured(tmp_path: Path) -> None:
    with pytest.raises(errors.NotConfigured, match="no kubeconfig file found"):
        kubeconfig.load(str(tmp_path / "missing"))


def test_a_file_that_is_not_yaml_is_not_configured(tmp_path: Path) -> None:
    (tmp_path / "kc").write_text("{ not: [yaml")
    with pytest.raises(errors.NotConfigured, match="cannot be read as YAML"):
        kubeconfig.load(str(tmp_path / "kc"))


def test_exec_with_a_token_uses_the_token(tmp_path: Path) -> None:
    """kopf's login would use the token too; only a user with nothing else is refused."""
    path = _kubeconfig(tmp_path / "kc", user={"exec": {"command": "x"}, "token": "t"})
    assert kubeconfig.load(str(path)).authorization == "Bearer t"


# --- the TLS context ---------------------------------------------------------------------------


def test_tls_context_from_files_and_data(pki: certs.Pki) -> None:
    from_files = access.ssl_context(
        access.Access(server=SERVER, ca_file=pki.ca_cert, cert_file=pki.admin_cert, key_file=pki.admin_key)
    )
    from_data = access.ssl_context(
        access.Access(
            server=SERVER,
            ca_pem=pki.ca_cert.read_text(),
            cert_pem=pki.admin_cert.read_bytes(),
            key_pem=pki.admin_key.read_bytes(),
        )
    )
    for context in (from_files, from_data):
        assert context.verify_mode == ssl.CERT_REQUIRED
        assert context.check_hostname
        assert any("secretferry-dev-ca" in str(ca.get("subject")) for ca in context.get_ca_certs())


def test_insecure_turns_verification_off(pki: certs.Pki) -> None:
    context = access.ssl_context(access.Access(server=SERVER, ca_file=pki.ca_cert, insecure=True))
    assert (context.verify_mode, context.check_hostname) == (ssl.CERT_NONE, False)


@pytest.mark.parametrize(
    "broken",
    [
        {"ca_file": Path("/nonexistent/ca.crt")},
        {"ca_pem": "not a certificate"},
        {"cert_pem": b"not a certificate", "key_pem": b"secret-key-material"},
    ],
)
def test_unusable_tls_material_is_not_configured(broken: dict[str, Any]) -> None:
    with pytest.raises(errors.NotConfigured, match="TLS material") as caught:
        access.ssl_context(access.Access(server=SERVER, **broken))
    assert "secret-key-material" not in caught.value.message


# --- our client through a kubeconfig, end to end -----------------------------------------------


@dataclass
class Seen:
    port: int
    requests: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
async def mtls_endpoint(pki: certs.Pki) -> AsyncIterator[Seen]:
    """A loopback apiserver stand-in that refuses clients without a certificate from the CA."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_cert))
    context.load_cert_chain(pki.serving_cert, pki.serving_key)
    context.verify_mode = ssl.CERT_REQUIRED
    seen = Seen(0)

    async def record(request: web.Request) -> web.Response:
        seen.requests.append(
            {
                "method": request.method,
                "path": request.path,
                "query": request.raw_path.partition("?")[2],
                "headers": dict(request.headers),
                "body": await request.text(),
            }
        )
        return web.json_response({"kind": "Thing"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    seen.port = int(runner.addresses[0][1])
    try:
        yield seen
    finally:
        await runner.cleanup()


async def test_client_certificate_data_kubeconfig_reaches_an_mtls_apiserver(
    mtls_endpoint: Seen, pki: certs.Pki, tmp_path: Path
) -> None:
    path = _kubeconfig(
        tmp_path / "kc",
        cluster={
            "server": f"https://127.0.0.1:{mtls_endpoint.port}",
            "certificate-authority-data": _b64(pki.ca_cert.read_bytes()),
        },
        user={
            "client-certificate-data": _b64(pki.admin_cert.read_bytes()),
            "client-key-data": _b64(pki.admin_key.read_bytes()),
        },
    )
    kube = await client.connect(kubeconfig=str(path))
    try:
        answer = await kube.request(
            "PATCH",
            "/api/v1/namespaces/ns/secrets/s",
            query={"fieldManager": "secretferry", "force": True, "labelSelector": "a=b,c in (d)"},
            body={"data": {"k": "dg=="}},
            content_type="application/apply-patch+yaml",
        )
        await kube.request("GET", "/api/v1/namespaces", query={"limit": 5, "continue": None})
    finally:
        await kube.close()
    assert answer == {"kind": "Thing"}
    patch, get = mtls_endpoint.requests
    assert patch["method"] == "PATCH"
    # Form-encoded, then normalised by yarl as it was under kubernetes_asyncio (same aiohttp call).
    assert patch["query"] == "fieldManager=secretferry&force=true&labelSelector=a%3Db,c+in+(d)"
    assert patch["body"] == '{"data": {"k": "dg=="}}'
    assert patch["headers"]["Content-Type"] == "application/apply-patch+yaml"
    assert patch["headers"]["User-Agent"] == "secretferry"
    assert "Authorization" not in patch["headers"]  # the certificate is the identity
    assert (get["query"], get["body"], get["headers"]["Accept"]) == ("limit=5", "", "application/json")


async def test_client_certificate_file_kubeconfig_with_a_token(
    mtls_endpoint: Seen, pki: certs.Pki, tmp_path: Path
) -> None:
    path = _kubeconfig(
        tmp_path / "kc",
        cluster={
            "server": f"https://127.0.0.1:{mtls_endpoint.port}",
            "certificate-authority": str(pki.ca_cert),
        },
        user={"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key), "token": "tok"},
    )
    kube = await client.connect(kubeconfig=str(path))
    try:
        await kube.request("GET", "/version")
    finally:
        await kube.close()
    assert mtls_endpoint.requests[0]["headers"]["Authorization"] == "Bearer tok"


async def test_without_the_cluster_ca_the_apiserver_is_not_trusted(
    mtls_endpoint: Seen, pki: certs.Pki, tmp_path: Path
) -> None:
    path = _kubeconfig(
        tmp_path / "kc",
        cluster={"server": f"https://127.0.0.1:{mtls_endpoint.port}"},
        user={"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)},
    )
    kube = await client.connect(kubeconfig=str(path))
    try:
        with pytest.raises(errors.Unavailable):
            await kube.request("GET", "/version")
    finally:
        await kube.close()
    assert mtls_endpoint.requests == []


async def test_insecure_skip_tls_verify_trusts_any_apiserver(
    mtls_endpoint: Seen, pki: certs.Pki, tmp_path: Path
) -> None:
    path = _kubeconfig(
        tmp_path / "kc",
        cluster={"server": f"https://127.0.0.1:{mtls_endpoint.port}", "insecure-skip-tls-verify": True},
        user={"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)},
    )
    kube = await client.connect(kubeconfig=str(path))
    try:
        assert await kube.request("GET", "/version") == {"kind": "Thing"}
    finally:
        await kube.close()


def test_a_broken_kubeconfig_is_reported_without_quoting_its_secrets(tmp_path: Path) -> None:
    token = "sekret-token-value-123"
    path = tmp_path / "config"
    path.write_text(f"users:\n- name: u\n  user:\n    token: {token}\n  : [unclosed\n")
    with pytest.raises(errors.NotConfigured) as info:
        kubeconfig.load(str(path))
    seen = [info.value, info.value.__cause__, info.value.__context__]
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert all(token not in str(e) for e in seen if e is not None)
    assert str(path) in str(info.value)

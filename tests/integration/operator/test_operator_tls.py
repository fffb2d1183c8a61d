"""TLS with a private CA, proven on the real control plane: the dev server serves HTTPS with a
certificate from a CA generated here (tlsca.py), as a self-hosted server behind a company CA does.

- An identity trusting that CA (``spec.tls.caSecretRef``) syncs.
- Without it, or with another CA, the identity and its SecretSyncs say ``TLSVerifyFailed`` with
  the host and OpenSSL's verification error, and nothing reaches the server: verification ends
  the handshake before any request (the server counts no login, no request at all).
- Rotation at the server (a new pair from the same CA, then one from a new CA once the CA Secret
  holds both) is followed without an operator restart: connections and streams reconnect and
  verify the new certificate; the CA Secret changing is followed too, both ways.
"""

from __future__ import annotations

import hashlib
import json
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import harness
import pytest
import tlsca
from harness import eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer, run_dev_server

pytestmark = pytest.mark.integration

CA_KEY = "ca.crt"
# OpenSSL's words for a chain that ends at a CA nobody trusts.
UNKNOWN_ISSUER = "unable to get local issuer certificate"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory = tmp_path_factory.mktemp("pki")
    ca_a, ca_b = tlsca.new_ca("secretferry test CA A"), tlsca.new_ca("secretferry test CA B")
    return {
        "dir": directory,
        "ca_a": ca_a,
        "ca_b": ca_b,
        "a1": tlsca.serving_pair(ca_a, directory, label="a1"),
        "a2": tlsca.serving_pair(ca_a, directory, label="a2"),
        "b1": tlsca.serving_pair(ca_b, directory, label="b1"),
    }


@pytest.fixture(scope="module")
def tls_service(
    control_plane: ControlPlane,
    reviewer_token: str,
    pki: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[DevServer]:
    with run_dev_server(
        seed=harness.seed(control_plane, reviewer_token=reviewer_token),
        data_dir=tmp_path_factory.mktemp("devserver-tls"),
        extra_args=["--heartbeat-seconds", "1", "--recheck-seconds", "2"],
        tls=pki["a1"],
    ) as server:
        harness.record_values(server)
        yield server


@pytest.fixture(scope="module")
def tls_operator(
    control_plane: ControlPlane, crds: None, tls_service: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    assert tls_service.base_url.startswith("https://")
    op = harness.start_operator(
        control_plane, tls_service, tmp_path_factory.mktemp("operator-tls") / "operator.log"
    )
    try:
        yield op
    finally:
        op.stop()
    harness.assert_no_values_leaked(control_plane, op)


def _ca_secret(cp: ControlPlane, namespace: str, identity: str, bundle: str) -> None:
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": f"{identity}-ca",
                "namespace": namespace,
                "annotations": {harness.ALLOWED_IDENTITIES: identity},
            },
            "stringData": {CA_KEY: bundle},
        }
    )


def _identity(cp: ControlPlane, namespace: str, name: str, *, ca_bundle: str | None) -> None:
    """The seed's universal-auth identity; with ``ca_bundle``, trusting it through a CA Secret."""
    harness.universal_identity(cp, namespace, name)
    if ca_bundle is None:
        return
    _ca_secret(cp, namespace, name, ca_bundle)
    cp.kubectl(
        "patch",
        "machineidentity",
        name,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"tls": {"caSecretRef": {"name": f"{name}-ca", "key": CA_KEY}}}}),
    )


def _sync(cp: ControlPlane, namespace: str, name: str, identity: str, path: str) -> None:
    harness.secret_sync(
        cp, namespace, name, identity=identity, sources=[source(path)], target={"name": f"{name}-out"}
    )


def _identity_ready(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any] | None:
    return harness.ready(cp, namespace, name, kind="machineidentity")


def _wait_value(cp: ControlPlane, namespace: str, target: str, key: str, value: str) -> None:
    eventually(
        lambda: (secret_data(cp, namespace, target) or {}).get(key) == value,
        timeout=40.0,
        what=f"{namespace}/{target} holds the new {key}",
    )


def _served_fingerprint(server: DevServer, ca_pem: str) -> str:
    """SHA-256 of the certificate the server shows now (verified against ``ca_pem``)."""
    ctx = ssl.create_default_context(cadata=ca_pem)

    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return hashlib.sha256(der).hexdigest()


def _rotate(server: DevServer, pair: Any) -> None:
    """Rotation at the server: the same port, a new certificate (the process starts again)."""
    server.stop()
    server.use_tls(pair)
    server.start_with_retries(allow_new_port=False)


def test_identity_with_the_private_ca_syncs(
    control_plane: ControlPlane,
    tls_operator: OperatorProcess,
    tls_service: DevServer,
    namespace: str,
    pki: Any,
) -> None:
    path = f"/{namespace}"
    tls_service.set_secret(harness.PROJECT_ID, "dev", path, "DB_URL", "tls-value-one")
    _identity(control_plane, namespace, "uni", ca_bundle=pki["ca_a"].pem)
    _sync(control_plane, namespace, "app", "uni", path)
    harness.wait_reason(control_plane, namespace, "app", "Synced", timeout=60)
    assert secret_data(control_plane, namespace, "app-out") == {"DB_URL": "tls-value-one"}
    cond = eventually(lambda: _identity_ready(control_plane, namespace, "uni"), what="identity status")
    assert cond["status"] == "True", cond


@pytest.mark.parametrize("trust", ["system roots only", "another CA"])
def test_untrusted_certificate_is_TLSVerifyFailed_and_nothing_is_sent(
    control_plane: ControlPlane,
    tls_operator: OperatorProcess,
    tls_service: DevServer,
    namespace: str,
    pki: Any,
    trust: str,
) -> None:
    path = f"/{namespace}"
    tls_service.set_secret(harness.PROJECT_ID, "dev", path, "DB_URL", "tls-value-never")
    tls_service.reset_stats()
    bundle = None if trust == "system roots only" else pki["ca_b"].pem
    _identity(control_plane, namespace, "lost", ca_bundle=bundle)
    _sync(control_plane, namespace, "app", "lost", path)
    cond = harness.wait_reason(control_plane, namespace, "app", "TLSVerifyFailed", timeout=60)
    ident = eventually(
        lambda: (
            (c := _identity_ready(control_plane, namespace, "lost"))
            and c.get("reason") == "TLSVerifyFailed"
            and c
        ),
        what="identity TLSVerifyFailed",
    )
    origin = f"127.0.0.1:{tls_service.port}"
    for message in (cond["message"], ident["message"]):
        assert origin in message, message
        assert UNKNOWN_ISSUER in message, message
        assert "test-client-secret" not in message
    assert ident["status"] == "False"
    assert secret_data(control_plane, namespace, "app-out") is None
    # Nothing in clear, nothing at all: the handshake failed before a request was written, so the
    # server routed no request (a login, a list) from this identity, nor any request in plain HTTP.
    # (Earlier tests' identities are logged in already and their tokens outlive this test; their
    # SecretSyncs may still list their own paths while their namespace goes away.)
    stats = tls_service.stats()
    assert stats["logins"] == 0, stats["routes"]
    assert f"dev:{path}" not in stats["listSecretsByScope"], stats["listSecretsByScope"]


def test_rotation_at_the_server_and_of_the_CA_secret_without_restart(
    control_plane: ControlPlane,
    tls_operator: OperatorProcess,
    tls_service: DevServer,
    namespace: str,
    pki: Any,
) -> None:
    path = f"/{namespace}"
    pid = tls_operator.pid
    tls_service.set_secret(harness.PROJECT_ID, "dev", path, "DB_URL", "rotated-value-0")
    _identity(control_plane, namespace, "rot", ca_bundle=pki["ca_a"].pem)
    _sync(control_plane, namespace, "app", "rot", path)  # event stream (instant updates): the default
    harness.wait_reason(control_plane, namespace, "app", "Synced", timeout=60)
    before = _served_fingerprint(tls_service, pki["ca_a"].pem)

    # 1. A new serving pair from the same CA: the stream and the pool reconnect and verify it.
    _rotate(tls_service, pki["a2"])
    assert _served_fingerprint(tls_service, pki["ca_a"].pem) != before
    tls_service.set_secret(harness.PROJECT_ID, "dev", path, "DB_URL", "rotated-value-1")
    _wait_value(control_plane, namespace, "app-out", "DB_URL", "rotated-value-1")

    # 2. A new CA: first the CA Secret trusts both, then the server moves to the new CA.
    _ca_secret(control_plane, namespace, "rot", pki["ca_a"].pem + pki["ca_b"].pem)
    eventually(
        lambda: f"CA bundle Secret {namespace}/rot-ca changed" in tls_operator.log_text(),
        what="the operator follows the CA Secret",
    )
    _rotate(tls_service, pki["b1"])
    tls_service.set_secret(harness.PROJECT_ID, "dev", path, "DB_URL", "rotated-value-2")
    _wait_value(control_plane, namespace, "app-out", "DB_URL", "rotated-value-2")
    harness.wait_reason(control_plane, namespace, "app", "Synced")

    # 3. The CA Secret back to the old CA only: the new bundle is what is trusted, not a cached one.
    _ca_secret(control_plane, namespace, "rot", pki["ca_a"].pem)
    tls_service.set_secret(harness.PROJECT_ID, "dev", path, "DB_URL", "rotated-value-3")
    eventually(
        lambda: (
            (c := _identity_ready(control_plane, namespace, "rot")) and c.get("reason") == "TLSVerifyFailed"
        ),
        timeout=40.0,
        what="identity TLSVerifyFailed with the old CA only",
    )
    assert (secret_data(control_plane, namespace, "app-out") or {}).get(
        "DB_URL"
    ) == "rotated-value-2"  # kept, not emptied

    # 4. And forward again: the new CA, synced with the value changed meanwhile.
    _ca_secret(control_plane, namespace, "rot", pki["ca_b"].pem)
    _wait_value(control_plane, namespace, "app-out", "DB_URL", "rotated-value-3")
    assert tls_operator.pid == pid, "the operator restarted"

"""End to end: binary values (spec.sources[].decodingStrategy / decoding, b64dec_bytes) against the
real control plane and the dev server.

A PKCS#12 keystore generated here is stored base64 (line-wrapped, as ``base64 file`` prints it)
at the dev server; synced with a Base64 rule, the Secret holds its exact bytes and
``cryptography`` opens it with its password. A template re-emits it and builds a DER file with
``b64dec_bytes``; a ConfigMap target puts bytes into ``binaryData``; a hand edit of the bytes is
repaired; a value that is not base64 stops the sync (DecodingFailed) and the Secret stays.
"""

from __future__ import annotations

import base64
import datetime
from typing import Any

import harness
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID
from harness import PROJECT_ID, eventually, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

PASSWORD = b"keystore-pass-8d1f"


def make_keystore(password: bytes) -> tuple[bytes, bytes]:
    """A PKCS#12 bundle (EC key + self-signed certificate) and the certificate as DER."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "binary.secretferry.test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    bundle = pkcs12.serialize_key_and_certificates(
        b"app", key, cert, None, serialization.BestAvailableEncryption(password)
    )
    return bundle, cert.public_bytes(serialization.Encoding.DER)


def raw_data(cp: ControlPlane, kind: str, namespace: str, name: str, field: str = "data") -> dict[str, bytes]:
    obj = harness.get(cp, kind, name, namespace) or {}
    values: dict[str, str] = obj.get(field) or {}
    if kind == "configmap" and field == "data":
        return {k: v.encode() for k, v in values.items()}
    return {k: base64.b64decode(v) for k, v in values.items()}


def opens(bundle: bytes | None, password: bytes) -> bool:
    if bundle is None:
        return False
    key, cert, _ = pkcs12.load_key_and_certificates(bundle, password)
    return key is not None and cert is not None


def test_keystore_synced_as_bytes_and_opened_with_its_password(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    bundle, der = make_keystore(PASSWORD)
    path = f"/{namespace}"
    # Line-wrapped at 76 characters (base64.encodebytes, like `base64 keystore.p12`): Base64
    # ignores the line breaks.
    service.set_secret(PROJECT_ID, "dev", path, "keystore.p12", base64.encodebytes(bundle).decode())
    service.set_secret(PROJECT_ID, "dev", path, "KEYSTORE_PASSWORD", PASSWORD.decode())
    service.set_secret(PROJECT_ID, "dev", path, "CERT_DER_B64", base64.b64encode(der).decode())
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    decode = [{"keys": "*.p12", "strategy": "Base64"}]
    harness.secret_sync(
        control_plane,
        namespace,
        "ks",
        sources=[source(path, decoding=decode)],
        refreshInterval="2s",
        instantUpdates=False,
    )

    def synced() -> dict[str, bytes] | None:
        data = raw_data(control_plane, "secret", namespace, "ks")
        return data if data.get("keystore.p12") == bundle else None

    data = eventually(synced, what="the keystore's bytes in the Secret")
    assert opens(data["keystore.p12"], data["KEYSTORE_PASSWORD"])
    assert data["KEYSTORE_PASSWORD"] == PASSWORD  # text stays text
    assert data["CERT_DER_B64"] == base64.b64encode(der)  # no rule, no decodingStrategy: as it is
    harness.wait_reason(control_plane, namespace, "ks", "Synced")
    status: dict[str, Any] = (harness.get(control_plane, "secretsync", "ks", namespace) or {})["status"]
    assert status["syncedKeys"] == ["CERT_DER_B64", "KEYSTORE_PASSWORD", "keystore.p12"]
    assert len(status["dataHMAC"]) == 64

    # A hand edit of the bytes is drift, repaired like any other.
    broken = base64.b64encode(bundle[:-1] + bytes([bundle[-1] ^ 0xFF])).decode()
    control_plane.kubectl(
        "patch",
        "secret",
        "ks",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        f'{{"data":{{"keystore.p12":"{broken}"}}}}',
    )
    eventually(synced, what="the hand-edited keystore repaired")

    # Templates: a binary value passes through whole, b64dec_bytes makes bytes, b64enc text.
    harness.secret_sync(
        control_plane,
        namespace,
        "tpl",
        sources=[source(path, decoding=decode)],
        target={
            "template": {
                "data": {
                    "app.p12": "{{ secrets['keystore.p12'] }}",
                    "cert.der": "{{ CERT_DER_B64 | b64dec_bytes }}\n",
                    "keystore.b64": "{{ secrets['keystore.p12'] | b64enc }}",
                }
            }
        },
        refreshInterval="2s",
        instantUpdates=False,
    )
    tpl = eventually(
        lambda: raw_data(control_plane, "secret", namespace, "tpl") or None, what="the templated Secret"
    )
    assert tpl["app.p12"] == bundle and opens(tpl["app.p12"], PASSWORD)
    assert tpl["cert.der"] == der
    x509.load_der_x509_certificate(tpl["cert.der"])
    assert base64.b64decode(tpl["keystore.b64"]) == bundle

    # A ConfigMap target: text in data, bytes in binaryData.
    harness.secret_sync(
        control_plane,
        namespace,
        "cm",
        sources=[source(path, includeKeys=["keystore.p12", "CERT_DER_B64"], decodingStrategy="Base64")],
        target={"kind": "ConfigMap"},
        refreshInterval="2s",
        instantUpdates=False,
    )
    binary = eventually(
        lambda: raw_data(control_plane, "configmap", namespace, "cm", "binaryData") or None,
        what="the ConfigMap's binaryData",
    )
    assert binary == {"keystore.p12": bundle, "CERT_DER_B64": der}
    assert raw_data(control_plane, "configmap", namespace, "cm") == {}

    # Not base64 where a rule says Base64: DecodingFailed naming the key; the Secret stays.
    before = harness.get(control_plane, "secret", "ks", namespace) or {}
    service.set_secret(PROJECT_ID, "dev", path, "keystore.p12", "not base64: ~~~")
    cond = harness.wait_reason(control_plane, namespace, "ks", "DecodingFailed")
    assert cond["status"] == "False"
    assert "key keystore.p12 is not valid Base64" in cond["message"]
    assert "~~~" not in cond["message"]
    after = harness.get(control_plane, "secret", "ks", namespace) or {}
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert opens(raw_data(control_plane, "secret", namespace, "ks")["keystore.p12"], PASSWORD)
    harness.assert_no_values_leaked(control_plane, operator)


def test_bad_decoding_rule_refused_at_admission(
    control_plane: ControlPlane, crds: None, namespace: str
) -> None:
    proc = control_plane.kubectl_run(
        "apply",
        "-f",
        "-",
        input=(
            '{"apiVersion": "secretferry.io/v1alpha1", "kind": "SecretSync",'
            f' "metadata": {{"name": "bad", "namespace": "{namespace}"}},'
            ' "spec": {"identityRef": {"name": "ferry"}, "sources": [{"projectId": "p",'
            ' "environment": "dev", "decoding": [{"keys": "*.p12", "strategy": "Base32"}]}]}}'
        ),
    )
    assert proc.returncode != 0 and "Unsupported value" in proc.stderr, proc.stderr

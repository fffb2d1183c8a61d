"""Certificates and keys for a throwaway local control plane.

Why generated here: the apiserver needs a serving certificate, a client CA for the admin
identity, and a key pair to sign ServiceAccount tokens (TokenRequest / TokenReview). Everything
is created fresh per cluster directory and never leaves it.

The building blocks (``new_key``, ``subject_name``, ``issue``, ``write_key``, ``write_cert``) also
mint the integration tests' private CA for the dev server on HTTPS (tests/.../tlsca.py).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=30)  # a dev cluster lives minutes; 30 days avoids clock-skew surprises


@dataclass(frozen=True)
class Pki:
    """Paths of every file the processes read."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def subject_name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def issue(
    *,
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    ca_name: x509.Name,
    ca_key: ec.EllipticCurvePrivateKey,
    is_ca: bool = False,
    server_names: tuple[str, ...] = (),
    client: bool = False,
    validity: datetime.timedelta = _VALIDITY,
    key_ids: bool = False,
) -> x509.Certificate:
    """A certificate for ``key`` signed by ``ca_key``; IP addresses in ``server_names`` become IP
    SANs, the rest DNS SANs. ``key_ids`` adds the Subject Key Identifier to a CA and the Authority
    Key Identifier to a leaf, which strict verifiers (``VERIFY_X509_STRICT``) require; the dev
    cluster's own certificates leave them out."""
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    )
    if is_ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    if server_names:
        alt: list[x509.GeneralName] = []
        for name in server_names:
            try:
                alt.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                alt.append(x509.DNSName(name))
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
    if client:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
    if key_ids and is_ca:
        builder = builder.add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
        )
    elif key_ids:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    return builder.sign(ca_key, hashes.SHA256())


def write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def generate(directory: Path) -> Pki:
    """Create a CA, the apiserver serving pair, an admin client pair and the SA signing pair."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
    )
    ca_key = new_key()
    ca_name = subject_name("secretferry-dev-ca")
    ca = issue(subject=ca_name, key=ca_key, ca_name=ca_name, ca_key=ca_key, is_ca=True)
    write_key(pki.ca_key, ca_key)
    write_cert(pki.ca_cert, ca)

    serving_key = new_key()
    serving_names = (
        "127.0.0.1",
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "10.0.0.1",
    )
    serving = issue(
        subject=subject_name("kube-apiserver"),
        key=serving_key,
        ca_name=ca_name,
        ca_key=ca_key,
        server_names=serving_names,
    )
    write_key(pki.serving_key, serving_key)
    write_cert(pki.serving_cert, serving)

    # system:masters bypasses RBAC: the harness and tests act as cluster admin; the operator
    # under test can instead run as a ServiceAccount token to prove its RBAC.
    admin_key = new_key()
    admin = issue(
        subject=subject_name("secretferry-admin", "system:masters"),
        key=admin_key,
        ca_name=ca_name,
        ca_key=ca_key,
        client=True,
    )
    write_key(pki.admin_key, admin_key)
    write_cert(pki.admin_cert, admin)

    write_service_account_pair(pki.sa_key, pki.sa_pub)
    return pki


def write_service_account_pair(key_path: Path, pub_path: Path) -> None:
    """A fresh ServiceAccount signing pair: the private key for ``--service-account-signing-key-file``,
    the public one for ``--service-account-key-file`` (a rotation adds a second pair beside it)."""
    key_path.parent.mkdir(parents=True, exist_ok=True)
    sa_key = new_key()
    write_key(key_path, sa_key)
    pub_path.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def issue_client(pki: Pki, *, directory: Path, cn: str, org: str | None = None) -> tuple[Path, Path]:
    """A client certificate signed by the cluster CA (e.g. the kubelet's ``system:node:<name>``)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki.ca_key} is not an EC key")
    ca_name = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes()).subject
    key = new_key()
    cert = issue(subject=subject_name(cn, org), key=key, ca_name=ca_name, ca_key=ca_key, client=True)
    cert_path, key_path = directory / "client.crt", directory / "client.key"
    write_key(key_path, key)
    write_cert(cert_path, cert)
    return cert_path, key_path

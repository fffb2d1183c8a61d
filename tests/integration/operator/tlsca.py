"""A private CA and serving pairs for the dev server on HTTPS (test_operator_tls.py).

Generated per test with the dev cluster's certificate helpers (``secretferry.devcluster.certs``): a
self-hosted server behind a company CA, as users run it. Keys are EC P-256 and never leave the
test's temporary directory. Unlike the dev cluster's, these certificates carry key identifiers
(``key_ids``), as a company CA's do.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from secretferry.devcluster import certs
from secretferry.devserver import testing as devserver_testing

_VALIDITY = datetime.timedelta(days=2)  # a test lives minutes; days avoid clock-skew surprises
SERVER_NAMES = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class CA:
    name: x509.Name
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @property
    def pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()


def new_ca(common_name: str) -> CA:
    key = certs.new_key()
    name = certs.subject_name(common_name)
    cert = certs.issue(
        subject=name, key=key, ca_name=name, ca_key=key, is_ca=True, validity=_VALIDITY, key_ids=True
    )
    return CA(name=name, key=key, cert=cert)


def serving_pair(
    ca: CA, directory: Path, *, label: str, dns_names: tuple[str, ...] = ()
) -> devserver_testing.TLSFiles:
    """A serving certificate for 127.0.0.1 and localhost (and ``dns_names``, e.g. a name only the
    test's proxy resolves) signed by ``ca``, written to ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    key = certs.new_key()
    cert = certs.issue(
        subject=certs.subject_name("dev server"),
        key=key,
        ca_name=ca.name,
        ca_key=ca.key,
        server_names=(*SERVER_NAMES, *dns_names),
        validity=_VALIDITY,
        key_ids=True,
    )
    cert_path, key_path = directory / f"{label}.crt", directory / f"{label}.key"
    certs.write_cert(cert_path, cert)
    certs.write_key(key_path, key)
    return devserver_testing.TLSFiles(cert=cert_path, key=key_path, ca_pem=ca.pem)

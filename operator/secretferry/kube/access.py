"""How to reach the apiserver: its address, how to trust it, who we are — and the TLS context for it.

Both readers fill an :class:`Access` (:mod:`secretferry.kube.kubeconfig` from a kubeconfig,
:func:`secretferry.kube.client.connect` from :mod:`secretferry.kube.incluster`);
:func:`ssl_context` turns it into what the client's aiohttp connector uses. The context is built
the way kubernetes_asyncio built it before (``ssl.create_default_context`` with the CA, the client
certificate chain loaded on top, verification off only for ``insecure-skip-tls-verify``), so the
same apiservers are trusted.
"""

from __future__ import annotations

import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from secretferry.kube import errors, execplugin


@dataclass(frozen=True, kw_only=True)
class Access:
    """What a kubeconfig (or the pod) says about one apiserver. File paths are absolute or
    relative to the working directory; ``*_pem`` hold decoded ``*-data`` fields (a field given
    as data wins over its file, as in kubectl)."""

    server: str  # https://host:port, no trailing slash
    ca_file: Path | None = None
    ca_pem: str | None = None
    cert_file: Path | None = None
    cert_pem: bytes | None = None
    key_file: Path | None = None
    key_pem: bytes | None = field(default=None, repr=False)
    insecure: bool = False  # insecure-skip-tls-verify: no certificate or host name check
    tls_server_name: str | None = None  # the name to verify instead of the server's host
    # The Authorization header ("Bearer …" or "Basic …"), or None (client certificate only).
    authorization: str | None = field(default=None, repr=False)
    # The user's exec credential plugin, when it has nothing else (kubeconfig.load's exec_plugins).
    exec_plugin: execplugin.ExecPlugin | None = None

    @property
    def has_client_certificate(self) -> bool:
        return (self.cert_file or self.cert_pem) is not None and (self.key_file or self.key_pem) is not None


def ssl_context(access: Access) -> ssl.SSLContext:
    """The client-side TLS context for ``access``; unreadable or invalid material raises
    :class:`errors.NotConfigured` naming the file (never the content)."""
    try:
        context = ssl.create_default_context(
            cafile=None if access.ca_file is None else str(access.ca_file), cadata=access.ca_pem
        )
        if access.cert_pem is not None or access.key_pem is not None:
            _load_chain_from_data(context, access)
        elif access.cert_file is not None:
            context.load_cert_chain(
                str(access.cert_file), keyfile=None if access.key_file is None else str(access.key_file)
            )
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise errors.NotConfigured(
            0, "NotConfigured", f"TLS material for {access.server} is unusable: {_describe(exc)}"
        ) from exc
    if access.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _load_chain_from_data(context: ssl.SSLContext, access: Access) -> None:
    """``load_cert_chain`` reads only files: the PEM data goes into a private directory for the
    duration of the call (kubernetes_asyncio left such files in /tmp until exit)."""
    with tempfile.TemporaryDirectory(prefix="secretferry-tls-") as directory:  # mode 0700
        cert = _materialise(access.cert_pem, access.cert_file, Path(directory) / "client.crt")
        key = _materialise(access.key_pem, access.key_file, Path(directory) / "client.key")
        if cert is None:
            raise ValueError("a client key without a client certificate")
        context.load_cert_chain(str(cert), keyfile=None if key is None else str(key))


def _materialise(pem: bytes | None, path: Path | None, target: Path) -> Path | None:
    if pem is None:
        return path
    target.write_bytes(pem)
    target.chmod(0o600)
    return target


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror or type(exc).__name__}"
    return str(exc) or type(exc).__name__


__all__ = ["Access", "ssl_context"]

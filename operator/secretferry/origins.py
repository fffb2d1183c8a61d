"""Service origins: where credentials may be sent, parsed the same way for settings and specs.

Pure and dependency-free because two places need it: the settings (an allow-list entry that does
not parse stops start-up) and the identity checks in ``reconcile.tenancy`` (a ``spec.hostAPI`` is
compared with that list before anything is sent).

Why so strict: the host we compare and the host the HTTP client connects to must be the same. A
URL with user info (``https://good@evil``), percent-escapes, backslashes or white space in its
authority is read differently by different parsers, so such a URL is refused rather than
interpreted. What remains is ``scheme://host[:port][/path]``, on which every parser agrees.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from typing import NamedTuple

_DEFAULT_PORTS = {"http": 80, "https": 443}
_AMBIGUOUS = frozenset("@\\%")  # user info, backslash, escapes: parsers disagree on the host


class Origin(NamedTuple):
    """Where a request goes: the host (lower case, no trailing dot) and the effective port."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


class ServiceURL(NamedTuple):
    scheme: str
    origin: Origin

    def __str__(self) -> str:
        return f"{self.scheme}://{self.origin}"


def parse_url(url: str) -> ServiceURL:
    """``scheme://host[:port][/path]`` → its scheme and origin; raises ValueError otherwise."""
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ValueError("white space or control characters")
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError("not an http(s) URL")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise ValueError("a query or fragment")
    return ServiceURL(scheme, _origin(parts, default_port=_DEFAULT_PORTS[scheme]))


def parse_entry(entry: str) -> ServiceURL:
    """An allow-list entry: a URL, or ``host[:port]``, which means https (port 443 when omitted).

    The scheme is part of the entry: an allowed ``https://host:443`` must not admit
    ``http://host:443`` (with ``SECRETFERRY_ALLOW_INSECURE_HTTP`` on, that would send credentials
    in clear text to the port of a TLS listener, or to whatever answers plain http there). A bare
    ``host[:port]`` stands for https, the norm; plain http must be written out as a URL.
    """
    entry = entry.strip()
    if "://" in entry:
        return parse_url(entry)
    if any(c.isspace() or not c.isprintable() for c in entry) or "/" in entry:
        raise ValueError("not host[:port]")
    https = "https"
    return ServiceURL(https, _origin(urllib.parse.urlsplit(f"//{entry}"), default_port=_DEFAULT_PORTS[https]))


def parse_list(text: str) -> list[ServiceURL]:
    """A comma-separated allow-list; empty entries are skipped. Raises ValueError naming the entry."""
    origins = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        try:
            origins.append(parse_entry(entry))
        except ValueError as exc:
            raise ValueError(f"{entry!r} is not a URL or host[:port]: {exc}") from None
    return origins


def is_loopback(origin: Origin) -> bool:
    """``localhost`` or a loopback address: traffic that never leaves the machine."""
    if origin.host == "localhost":
        return True
    try:
        return ipaddress.ip_address(origin.host).is_loopback
    except ValueError:
        return False


def _origin(parts: urllib.parse.SplitResult, *, default_port: int) -> Origin:
    if any(c in _AMBIGUOUS for c in parts.netloc):
        raise ValueError("user info, escapes or backslashes in the host part")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise ValueError("no host")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("an invalid port") from None
    return Origin(host.lower(), port if port is not None else default_port)

"""Plugins for the real forward proxy (``proxy.py``) that ``test_operator_proxy`` starts.

Loaded inside the proxy's own process (``--plugins proxy_plugins.<Class>``), never imported by the
tests. ``ProxiedNames`` resolves ``*.proxied.invalid`` to loopback: the operator is given the dev
server under such a name, which nothing but this proxy can resolve, so every service call that
succeeds has provably gone through the proxy. ``RefuseAll`` is a proxy whose policy forbids every
upstream (403), as a corporate egress proxy does for a host not on its allow list.
"""

from __future__ import annotations

import logging
from typing import Any

from proxy.http.exception import HttpRequestRejected
from proxy.http.proxy import HttpProxyBasePlugin

SUFFIX = ".proxied.invalid"
logger = logging.getLogger(__name__)


class ProxiedNames(HttpProxyBasePlugin):  # type: ignore[misc]
    """Resolves the test's private names and logs every request it relays, one line each (the
    built-in access log writes one line per client connection, and connections are kept alive)."""

    def handle_client_request(self, request: Any) -> Any:
        target = request.host.decode() + ":" + str(request.port) if request.host else "?"
        logger.info("RELAYED %s %s%s", request.method.decode(), target, (request.path or b"").decode())
        return request

    def resolve_dns(self, host: str, port: int) -> tuple[str | None, Any]:
        if host.endswith(SUFFIX):
            return "127.0.0.1", None
        return None, None


class RefuseAll(HttpProxyBasePlugin):  # type: ignore[misc]
    def before_upstream_connection(self, request: Any) -> Any:
        raise HttpRequestRejected(status_code=403, reason=b"Forbidden")

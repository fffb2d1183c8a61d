"""The connection to the apiserver and the raw JSON request helpers every other module uses.

Why raw JSON: at 10,000 objects a generated client's (de)serialisation costs more CPU than the
HTTP round trip. Why no Kubernetes client library at all: importing kubernetes_asyncio cost the
process ~59 MiB and over a second at start, for a kubeconfig reader and an aiohttp session. We
keep both ourselves: :mod:`secretferry.kube.kubeconfig` and :mod:`secretferry.kube.incluster`
say where the apiserver is and who we are (:class:`access.Access`), and :class:`Kube` sends plain
dicts over one aiohttp session configured as kubernetes_asyncio configured its own (the same TLS
context, connection limit, 2 MiB read buffer, headers and query encoding), minus the proxy look-ups.

A kubeconfig user with an exec credential plugin (the command-line tools only) is served by
:class:`execcache.ExecCredentials`: its credential is asked for before each request, and a 401
answer makes the plugin run again and the request go once more with the new credential.
"""

from __future__ import annotations

import json
import os
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp

from secretferry.kube import access, errors, execcache, incluster
from secretferry.kube import kubeconfig as kubeconfig_mod

# Long enough for a slow apiserver on loaded cores, short enough that a hung connection turns into
# a retryable Unavailable within one reconcile's patience.
DEFAULT_REQUEST_TIMEOUT_SECONDS = 30.0
_CONNECT_TIMEOUT_SECONDS = 10.0  # a TCP/TLS handshake on loopback or in-cluster takes milliseconds
_DEFAULT_KUBECONFIG = Path.home() / ".kube" / "config"
# A watch event carries a whole object; etcd's default request limit is 1.5 MiB, so one line can
# exceed aiohttp's 64 KiB default read buffer (kubernetes_asyncio's value, kept).
_READ_BUFFER_BYTES = 2**21
_USER_AGENT = "secretferry"
_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "OPTIONS", "DELETE"})  # those that send a body

#: Gives the Authorization header for the next request (or None): a fixed token, or the pod's
#: ServiceAccount token as the kubelet rotates it.
Authorization = Callable[[], str | None]

QueryValue = str | int | bool | None


class Kube:
    """One apiserver connection pool plus a small cache for discovery answers.

    Create it with :func:`connect`; close it with :meth:`close`. Safe to share between tasks.
    """

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        server: str,
        authorization: Authorization,
        tls_server_name: str | None = None,
        request_timeout_seconds: float = DEFAULT_REQUEST_TIMEOUT_SECONDS,
        exec_credentials: execcache.ExecCredentials | None = None,
    ) -> None:
        self._session = session
        #: When set, every request's credential comes from here (``authorization`` is not used).
        self.exec_credentials = exec_credentials
        self._server = server
        self._authorization = authorization
        self._tls_server_name = tls_server_name
        self.request_timeout_seconds = request_timeout_seconds
        #: Discovery answers ("is the Argo Rollouts API served?"): name → (monotonic time, value).
        self.cache: dict[str, tuple[float, bool]] = {}

    @property
    def server(self) -> str:
        return self._server

    def bearer_token(self) -> str | None:
        """The bearer token the operator authenticates with right now, if it uses one (a pod's
        ServiceAccount token, a kubeconfig token); None for client certificates and Basic auth.
        Only for reading its own claims (``apiaudiences``); never logged or sent elsewhere."""
        if self.exec_credentials is not None:
            return self.exec_credentials.bearer_token()
        header = self._authorization()
        if header is None or not header.startswith("Bearer "):
            return None
        return header.removeprefix("Bearer ")

    async def close(self) -> None:
        await self._session.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, QueryValue] | None = None,
        body: Mapping[str, Any] | None = None,
        content_type: str | None = None,
        timeout_seconds: float | None = None,
        accept: str | None = None,
    ) -> dict[str, Any]:
        """Send one request and return the decoded JSON answer; non-2xx raises a ``KubeError``.

        ``accept``: another representation (e.g. ``PartialObjectMetadataList``); JSON either way."""
        timeout = aiohttp.ClientTimeout(
            total=timeout_seconds or self.request_timeout_seconds, sock_connect=_CONNECT_TIMEOUT_SECONDS
        )
        response = await self._send(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            client_timeout=timeout,
            accept=accept,
        )
        try:
            data = await response.read()
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise _unavailable(method, path, exc) from exc
        finally:
            response.release()
        if not 200 <= response.status < 300:
            raise errors.from_status(response.status, data)
        if not data:
            return {}
        try:
            decoded = json.loads(data)
        except ValueError as exc:
            raise errors.KubeError(response.status, "BadResponse", f"{method} {path}: not JSON") from exc
        if not isinstance(decoded, dict):
            raise errors.KubeError(response.status, "BadResponse", f"{method} {path}: not a JSON object")
        return decoded

    @asynccontextmanager
    async def stream(
        self,
        path: str,
        *,
        query: Mapping[str, QueryValue],
        read_timeout_seconds: float,
        accept: str | None = None,
    ) -> AsyncIterator[aiohttp.StreamReader]:
        """A GET whose body is read incrementally (watches); non-2xx raises before yielding."""
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=_CONNECT_TIMEOUT_SECONDS, sock_read=read_timeout_seconds
        )
        response = await self._send(
            "GET", path, query=query, body=None, content_type=None, client_timeout=timeout, accept=accept
        )
        try:
            if not 200 <= response.status < 300:
                try:
                    data = await response.read()
                except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                    raise _unavailable("GET", path, exc) from exc
                raise errors.from_status(response.status, data)
            yield response.content
        finally:
            # A watch abandoned mid-stream leaves unread bytes: that connection cannot be reused.
            if response.content.at_eof():
                response.release()
            else:
                response.close()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, QueryValue] | None,
        body: Mapping[str, Any] | None,
        content_type: str | None,
        client_timeout: aiohttp.ClientTimeout,
        accept: str | None = None,
    ) -> aiohttp.ClientResponse:
        headers = {
            "Accept": accept or "application/json",
            # Sent on every request, GETs included, as kubernetes_asyncio did.
            "Content-Type": content_type or "application/json",
            "User-Agent": _USER_AGENT,
        }
        url = self._server + path
        params = [(k, _query_text(v)) for k, v in (query or {}).items() if v is not None]
        if params:
            url += "?" + urlencode(params)  # form encoding, as before: label selectors keep their meaning
        data = json.dumps(body) if body is not None and method in _WRITE_METHODS else None
        plugin = self.exec_credentials
        if plugin is None:
            if (authorization := self._authorization()) is not None:
                headers["Authorization"] = authorization
            return await self._attempt(method, url, path, headers, data, client_timeout, tls=None)
        presented = await plugin.current()
        response = await self._attempt(
            method, url, path, _presenting(headers, presented), data, client_timeout, tls=presented.tls
        )
        if response.status != 401:
            return response
        # Refused (expired early, revoked): the plugin runs again and the request goes once more.
        response.release()
        presented = await plugin.rejected(presented)
        response = await self._attempt(
            method, url, path, _presenting(headers, presented), data, client_timeout, tls=presented.tls
        )
        if response.status == 401:
            response.release()
            raise errors.ExecCredentialRefused(
                401,
                "Unauthorized",
                f"{method} {path}: the apiserver refused the credential from {plugin.plugin.shown},"
                " also after running it again",
            )
        return response

    async def _attempt(
        self,
        method: str,
        url: str,
        path: str,
        headers: Mapping[str, str],
        data: str | None,
        client_timeout: aiohttp.ClientTimeout,
        *,
        tls: ssl.SSLContext | None,
    ) -> aiohttp.ClientResponse:
        """One HTTP exchange. ``tls``: a context of its own (an exec plugin's client certificate),
        else the connector's."""
        extra: dict[str, Any] = {} if tls is None else {"ssl": tls}
        try:
            response: aiohttp.ClientResponse = await self._session.request(
                method,
                url,
                headers=headers,
                data=data,
                timeout=client_timeout,
                server_hostname=self._tls_server_name,
                **extra,
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise _unavailable(method, path, exc) from exc
        return response


def _presenting(headers: Mapping[str, str], presented: execcache.Presented) -> dict[str, str]:
    """``headers`` with the exec credential's Authorization (none for a certificate only)."""
    if presented.authorization is None:
        return dict(headers)
    return {**headers, "Authorization": presented.authorization}


def _query_text(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _unavailable(method: str, path: str, exc: BaseException) -> errors.Unavailable:
    detail = str(exc) or type(exc).__name__
    return errors.Unavailable(0, type(exc).__name__, f"{method} {path}: {detail}")


async def connect(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    connection_limit: int = 100,
    request_timeout_seconds: float = DEFAULT_REQUEST_TIMEOUT_SECONDS,
    env: Mapping[str, str] | None = None,
    service_account_dir: Path | None = None,
    clock: incluster.Clock = incluster.utc_now,
    exec_plugins: bool = False,
) -> Kube:
    """Connect using, in order: the given kubeconfig, in-cluster config, then $KUBECONFIG (or ~/.kube/config).

    Token, token-file and client-certificate kubeconfigs work (:mod:`secretferry.kube.kubeconfig`
    says which fields). In a pod the server is ``KUBERNETES_SERVICE_HOST:PORT`` and the projected
    ServiceAccount token is re-read from disk as the kubelet rotates it
    (:mod:`secretferry.kube.incluster`). ``context``: a kubeconfig context other than the current
    one (the kubectl plugin's ``--context``). ``connection_limit`` bounds concurrent connections,
    watches included. ``env`` (default ``os.environ``), ``service_account_dir`` (default
    ``incluster.SERVICE_ACCOUNT_DIR``) and ``clock`` exist so tests can fake a pod (``clock`` also
    decides when an exec plugin's credential has expired).

    ``exec_plugins``: run a kubeconfig user's exec credential plugin (the command-line tools; the
    operator refuses one, :mod:`secretferry.kube.kubeconfig` says why). It is run here once, so a
    plugin that fails says so before the first request, as
    :class:`errors.CredentialPluginFailed`.
    """
    environ = os.environ if env is None else env
    sa_dir = incluster.SERVICE_ACCOUNT_DIR if service_account_dir is None else service_account_dir
    authorization: Authorization
    if kubeconfig:
        found = kubeconfig_mod.load(kubeconfig, context=context, exec_plugins=exec_plugins)
        authorization = _fixed(found.authorization)
    elif (in_cluster := incluster.load(environ, sa_dir)) is not None:
        found = access.Access(server=in_cluster.server, ca_file=in_cluster.ca_path)
        token_file = incluster.TokenFile(in_cluster.token_path, clock=clock)
        token_file.current()  # a token that cannot be read fails here, at start-up
        authorization = _rotating(token_file)
    else:
        found = kubeconfig_mod.load(
            environ.get("KUBECONFIG") or str(_DEFAULT_KUBECONFIG), context=context, exec_plugins=exec_plugins
        )
        authorization = _fixed(found.authorization)
    exec_credentials = None
    if found.exec_plugin is not None:
        exec_credentials = execcache.ExecCredentials(found.exec_plugin, trust=found, clock=clock)
        await exec_credentials.current()  # a plugin that fails says so now, before any request
    # TLS only for an https server, as kubernetes_asyncio did; the context is built once.
    tls: ssl.SSLContext | bool = access.ssl_context(found) if found.server.startswith("https") else True
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connection_limit, ssl=tls),
        # No proxies from the environment: looking them up per request cost a large share of
        # write CPU at 10,000 objects. The apiserver is reached directly; HTTPS_PROXY for it is
        # not supported.
        trust_env=False,
        read_bufsize=_READ_BUFFER_BYTES,
    )
    return Kube(
        session,
        server=found.server,
        authorization=authorization,
        tls_server_name=found.tls_server_name,
        request_timeout_seconds=request_timeout_seconds,
        exec_credentials=exec_credentials,
    )


def _fixed(authorization: str | None) -> Authorization:
    return lambda: authorization


def _rotating(token_file: incluster.TokenFile) -> Authorization:
    """The token file's current copy before every request; :class:`incluster.TokenFile` re-reads
    it once a minute, as client-go does."""
    return lambda: f"Bearer {token_file.current().value}"


def cached(kube: Kube, key: str, *, ttl_seconds: float) -> bool | None:
    """A discovery answer remembered on ``kube`` if younger than ``ttl_seconds``."""
    hit = kube.cache.get(key)
    if hit is None or time.monotonic() - hit[0] > ttl_seconds:
        return None
    return hit[1]


def remember(kube: Kube, key: str, value: bool) -> None:
    kube.cache[key] = (time.monotonic(), value)


__all__ = ["Kube", "cached", "connect", "remember"]

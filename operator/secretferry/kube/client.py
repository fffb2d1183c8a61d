"""The connection to the apiserver and the raw JSON request helpers every other module uses.

Why raw JSON: at 10,000 objects the generated models' (de)serialisation costs more CPU than the
HTTP round trip. We keep kubernetes_asyncio for what it does well — reading kubeconfigs, TLS,
proxies, bearer-token refresh — and send plain dicts through
``ApiClient.call_api(..., _preload_content=False)``, which hands back the aiohttp response.
In-cluster config comes from :mod:`secretferry.kube.incluster`, the reader kopf's login uses too.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from secretferry.kube import errors, incluster

# Long enough for a slow apiserver on loaded cores, short enough that a hung connection turns into
# a retryable Unavailable within one reconcile's patience.
DEFAULT_REQUEST_TIMEOUT_SECONDS = 30.0
_CONNECT_TIMEOUT_SECONDS = 10.0  # a TCP/TLS handshake on loopback or in-cluster takes milliseconds
_DEFAULT_KUBECONFIG = Path.home() / ".kube" / "config"

QueryValue = str | int | bool | None


class Kube:
    """One apiserver connection pool plus a small cache for discovery answers.

    Create it with :func:`connect`; close it with :meth:`close`. Safe to share between tasks.
    """

    def __init__(self, api: Any, *, request_timeout_seconds: float = DEFAULT_REQUEST_TIMEOUT_SECONDS) -> None:
        self._api = api  # kubernetes_asyncio.client.ApiClient (untyped upstream; kept private)
        self.request_timeout_seconds = request_timeout_seconds
        #: Discovery answers ("is the Argo Rollouts API served?"): name → (monotonic time, value).
        self.cache: dict[str, tuple[float, bool]] = {}

    @property
    def server(self) -> str:
        return str(self._api.configuration.host)

    async def close(self) -> None:
        await self._api.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, QueryValue] | None = None,
        body: Mapping[str, Any] | None = None,
        content_type: str | None = None,
        timeout_seconds: float | None = None,
    ) -> dict[str, Any]:
        """Send one request and return the decoded JSON answer; non-2xx raises a ``KubeError``."""
        timeout = aiohttp.ClientTimeout(
            total=timeout_seconds or self.request_timeout_seconds, sock_connect=_CONNECT_TIMEOUT_SECONDS
        )
        response = await self._send(
            method, path, query=query, body=body, content_type=content_type, client_timeout=timeout
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
        self, path: str, *, query: Mapping[str, QueryValue], read_timeout_seconds: float
    ) -> AsyncIterator[aiohttp.StreamReader]:
        """A GET whose body is read incrementally (watches); non-2xx raises before yielding."""
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=_CONNECT_TIMEOUT_SECONDS, sock_read=read_timeout_seconds
        )
        response = await self._send(
            "GET", path, query=query, body=None, content_type=None, client_timeout=timeout
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
    ) -> aiohttp.ClientResponse:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        params = [(k, _query_text(v)) for k, v in (query or {}).items() if v is not None]
        try:
            response: aiohttp.ClientResponse = await self._api.call_api(
                path,
                method,
                query_params=params,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=client_timeout,
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise _unavailable(method, path, exc) from exc
        return response


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
    connection_limit: int = 100,
    request_timeout_seconds: float = DEFAULT_REQUEST_TIMEOUT_SECONDS,
    env: Mapping[str, str] | None = None,
    service_account_dir: Path | None = None,
    clock: incluster.Clock = incluster.utc_now,
) -> Kube:
    """Connect using, in order: the given kubeconfig, in-cluster config, then $KUBECONFIG (or ~/.kube/config).

    Token, client-certificate and exec kubeconfigs all work (kubernetes_asyncio reads them). In a
    pod the server is ``KUBERNETES_SERVICE_HOST:PORT`` and the projected ServiceAccount token is
    re-read from disk as the kubelet rotates it (:mod:`secretferry.kube.incluster`).
    ``connection_limit`` bounds concurrent connections, watches included. ``env`` (default
    ``os.environ``), ``service_account_dir`` (default ``incluster.SERVICE_ACCOUNT_DIR``) and
    ``clock`` exist so tests can fake a pod.
    """
    environ = os.environ if env is None else env
    sa_dir = incluster.SERVICE_ACCOUNT_DIR if service_account_dir is None else service_account_dir
    configuration = k8s_client.Configuration()
    configuration.connection_pool_maxsize = connection_limit
    try:
        if kubeconfig:
            await k8s_config.load_kube_config(
                config_file=kubeconfig, client_configuration=configuration, persist_config=False
            )
        elif (in_cluster := incluster.load(environ, sa_dir)) is not None:
            token_file = incluster.TokenFile(in_cluster.token_path, clock=clock)
            _use_in_cluster(configuration, in_cluster, token_file)
        else:
            path = environ.get("KUBECONFIG") or str(_DEFAULT_KUBECONFIG)
            await k8s_config.load_kube_config(
                config_file=path, client_configuration=configuration, persist_config=False
            )
    except (k8s_config.ConfigException, OSError, ValueError) as exc:
        raise errors.NotConfigured(0, "NotConfigured", f"no usable Kubernetes configuration: {exc}") from exc
    api = k8s_client.ApiClient(configuration=configuration)
    api.user_agent = "secretferry"
    # kubernetes_asyncio's aiohttp session trusts proxy environment variables, which makes every
    # request look up proxies in a thread (measured: a large share of write CPU at 10,000 objects).
    # The apiserver is reached directly; HTTPS_PROXY for it is not supported.
    session = getattr(getattr(api, "rest_client", None), "pool_manager", None)
    if session is not None and hasattr(session, "_trust_env"):
        session._trust_env = False
    return Kube(api, request_timeout_seconds=request_timeout_seconds)


def _use_in_cluster(
    configuration: Any, config: incluster.InClusterConfig, token_file: incluster.TokenFile
) -> None:
    """Point a kubernetes_asyncio configuration at the in-cluster apiserver.

    kubernetes_asyncio calls ``refresh_api_key_hook`` before every request; ours hands it the
    token file's current copy, which :class:`incluster.TokenFile` re-reads once a minute.
    """
    configuration.host = config.server
    configuration.ssl_ca_cert = str(config.ca_path)
    configuration.api_key_prefix["BearerToken"] = "Bearer"
    configuration.api_key["BearerToken"] = token_file.current().value

    def refresh(conf: Any) -> None:
        conf.api_key["BearerToken"] = token_file.current().value

    configuration.refresh_api_key_hook = refresh


def cached(kube: Kube, key: str, *, ttl_seconds: float) -> bool | None:
    """A discovery answer remembered on ``kube`` if younger than ``ttl_seconds``."""
    hit = kube.cache.get(key)
    if hit is None or time.monotonic() - hit[0] > ttl_seconds:
        return None
    return hit[1]


def remember(kube: Kube, key: str, value: bool) -> None:
    kube.cache[key] = (time.monotonic(), value)


__all__ = ["Kube", "cached", "connect", "remember"]

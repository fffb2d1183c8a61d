"""One pooled HTTP connection to the service: send, map failures to ``errors``, decode bodies.

This is where httpx is used; every httpx exception is translated here (``raise ... from``), so
nothing above this module sees one. Response bodies of successful calls may hold secret values:
they are never echoed into messages, only the endpoint and the schema locations that failed.

Every request's fate (an answer, or nobody answering) is reported to the pool's
``health.HostHealth``, which notices a host that went away and tells listeners when it is back.
"""

from __future__ import annotations

import contextlib
import json
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any, TypeVar

import httpx
import pydantic

from secretferry.service import errors, health, pacing, wire

M = TypeVar("M", bound=pydantic.BaseModel)

# A reachable service accepts a TCP/TLS connection within a few round trips; waiting longer only
# delays the retry. Applies to ordinary calls and to opening a stream.
CONNECT_TIMEOUT_SECONDS = 5.0

# The service sends a heartbeat every 15 s; a stream that has been silent for three of them is dead.
HEARTBEAT_INTERVAL_SECONDS = 15.0
MIN_STREAM_READ_TIMEOUT_SECONDS = 3 * HEARTBEAT_INTERVAL_SECONDS

# httpx exception messages are OS/protocol errors (no headers, no bodies); cap them anyway.
_MAX_TRANSPORT_MESSAGE_LENGTH = 200

# 403 Forbidden (a policy) and 407 Proxy Authentication Required: the answers a proxy gives itself.
_PROXY_AUTH_REQUIRED = 407
_PROXY_REFUSALS = frozenset({403, _PROXY_AUTH_REQUIRED})
# What a 407 asks of the installer. The credentials themselves are never named: they live in the
# proxy URL, which no message, log line or status ever shows (it is not ours to echo).
_PROXY_AUTH_HINT = (
    "the egress proxy requires authentication and the credentials in the proxy URL"
    " (http://user:password@host:port) are missing or refused"
)

Params = Sequence[tuple[str, str]] | None


def ssl_verify(verify: ssl.SSLContext | str | bool) -> ssl.SSLContext | bool:
    """A CA bundle given as text (PEM) or as a file path becomes an SSL context.

    httpx 0.28 deprecates ``verify=<path>``; building the context ourselves also accepts inline PEM,
    which is how a CR's ``spec.tls.caBundle`` arrives.
    """
    if not isinstance(verify, str):
        return verify
    try:
        if "-----BEGIN" in verify:
            return ssl.create_default_context(cadata=verify)
        return ssl.create_default_context(cafile=verify)
    except (OSError, ssl.SSLError) as exc:
        raise errors.ValidationError("the CA bundle cannot be loaded", field="verify") from exc


def _tls_failure(exc: BaseException) -> bool:
    """Whether a failed connect was the TLS handshake with the service (through a tunnel or not)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _verify_failure(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate verification error under an httpx ``ConnectError``, if that is the cause."""
    seen: BaseException | None = exc
    for _ in range(5):  # httpx → httpcore → ssl; a bound against cycles
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLCertVerificationError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _transport_error(
    endpoint: str, exc: httpx.HTTPError, *, proxied: bool = False, host: str = ""
) -> errors.ServiceError:
    detail = f"{type(exc).__name__}: {exc}"[:_MAX_TRANSPORT_MESSAGE_LENGTH]
    verify = _verify_failure(exc) if isinstance(exc, httpx.ConnectError) else None
    if verify is not None:
        # OpenSSL's own words ("unable to get local issuer certificate", "Hostname mismatch…"):
        # about the certificate the server showed, never about anything we hold.
        why = str(verify.verify_message or verify.reason or "certificate verify failed")
        return errors.TLSVerifyFailed(
            f"{endpoint}: the TLS certificate of {host or 'the service'} does not verify: {why}"
            "; nothing was sent (trust its CA with spec.tls.caBundle or spec.tls.caSecretRef)"
        )
    # httpx raises ProxyError when the proxy answers CONNECT with anything but 2xx. The message is
    # the proxy's status line; the proxy URL (which may hold a password) is never part of it.
    if isinstance(exc, httpx.ProxyError):
        if str(exc).startswith(f"{_PROXY_AUTH_REQUIRED} "):  # httpcore: "<status> <reason>"
            return errors.ProxyRefused(f"{endpoint}: {_PROXY_AUTH_HINT} (CONNECT answered {exc})")
        return errors.ProxyRefused(f"{endpoint}: the egress proxy refused the tunnel ({detail})")
    # Behind a proxy every TCP connection goes to the proxy, so a refused connect is the proxy's.
    if proxied and isinstance(exc, httpx.ConnectError) and not _tls_failure(exc):
        return errors.ProxyUnreachable(f"{endpoint}: the egress proxy cannot be reached ({detail})")
    if isinstance(exc, httpx.TimeoutException):
        return errors.Unavailable(f"{endpoint}: timed out ({detail})")
    if isinstance(exc, httpx.DecodingError):
        return errors.ProtocolError(f"{endpoint}: the response could not be decoded ({detail})")
    if isinstance(exc, httpx.TransportError):
        return errors.Unavailable(f"{endpoint}: connection failed ({detail})")
    return errors.ProtocolError(f"{endpoint}: request failed ({detail})")


def _content_type(response: httpx.Response) -> str:
    content_type: str = response.headers.get("content-type", "")
    return content_type.split(";", 1)[0].strip().lower()


class Connection:
    """The shared pool plus URL building; a ``ServiceClient`` and its token views share one."""

    def __init__(
        self,
        base_url: str,
        *,
        verify: ssl.SSLContext | str | bool,
        timeout: float,
        stream_read_timeout: float,
        transport: httpx.AsyncBaseTransport | None,
        user_agent: str,
    ) -> None:
        if stream_read_timeout <= MIN_STREAM_READ_TIMEOUT_SECONDS:
            raise errors.ValidationError(
                f"stream_read_timeout must exceed {MIN_STREAM_READ_TIMEOUT_SECONDS:g} s (three heartbeats)",
                field="stream_read_timeout",
            )
        self.api_root = wire.api_root(base_url)
        url = httpx.URL(self.api_root)
        self.origin = f"{url.host}:{url.port}" if url.port else url.host
        """host[:port] of the service, named in TLS failures."""
        connect = min(CONNECT_TIMEOUT_SECONDS, timeout)
        # Ordinary calls: ``timeout`` (default 10 s) to read an answer; list calls are per scope
        # and small, so a slower answer means an overloaded service, better retried with backoff.
        self._call_timeout = httpx.Timeout(timeout, connect=connect)
        # Streams: silence is normal between events, heartbeats break it every 15 s.
        self._stream_timeout = httpx.Timeout(timeout, connect=connect, read=stream_read_timeout)
        self._http = httpx.AsyncClient(
            verify=ssl_verify(verify),
            timeout=self._call_timeout,
            transport=transport,
            headers={"User-Agent": user_agent, "Accept": "application/json"},
            follow_redirects=False,
        )
        # Whether httpx sends this host's calls through a proxy from the environment (NO_PROXY
        # applied): then a refused connect or a bare 403/407 page is the proxy's, not the service's.
        # ``_transport_for_url`` is httpx's own lookup (private, stable across 0.27 and 0.28).
        self.proxied = self._http._transport_for_url(httpx.URL(self.api_root)) is not self._http._transport
        self.health = health.HostHealth(self.api_root, probe=self._probe)
        # Rate-limit budgets per route of this host, learned from the answers (``pacing``).
        self.pacer = pacing.HostPacer(self.api_root)

    def url(self, path: str) -> str:
        """``/api/v4/secrets`` → ``<api root>/v4/secrets`` (paths are written as in the reference)."""
        if not path.startswith("/api/"):
            raise ValueError(f"API paths start with /api/: {path!r}")
        return self.api_root + path[len("/api") :]

    async def aclose(self) -> None:
        await self.pacer.aclose()
        await self.health.aclose()
        await self._http.aclose()

    async def _probe(self) -> None:
        """One ``GET /api/status`` for ``health``; its outcome reaches ``health`` through ``send``."""
        path = health.PROBE_PATH
        await self.send("GET", path, endpoint=f"GET {path}", token=None, probe=True)

    def _observe(self, response: httpx.Response, *, probe: bool = False, stream: bool = False) -> None:
        """Report an answer to ``health``; a 429's retry-after holds for the host (not a stream's:
        that refusal counts open streams of one identity and project, not calls from this IP)."""
        if response.status_code in health.HOST_DOWN_STATUSES:
            self.health.failed(probe=probe)
        elif response.status_code == 429 and not stream:
            seconds = wire.retry_after(response.headers.get("retry-after"))
            default = errors.DEFAULT_RATE_LIMIT_RETRY_AFTER_SECONDS
            self.health.answered(retry_after=default if seconds is None else seconds)
        else:
            self.health.answered()

    def _failed(self, error: errors.ServiceError, *, probe: bool = False) -> errors.ServiceError:
        """Nobody answered (connection, timeout) unless the answer itself was unreadable."""
        if isinstance(error, errors.Unavailable):
            self.health.failed(probe=probe)
        return error

    async def send(
        self,
        method: str,
        path: str,
        *,
        endpoint: str,
        token: str | None,
        params: Params = None,
        json_body: object | None = None,
        headers: Mapping[str, str] | None = None,
        probe: bool = False,
    ) -> httpx.Response:
        """Send one request and read its answer; transport failures become ``errors``."""
        all_headers = dict(headers or {})
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        if not probe:  # the status probe is on the server's allow list: never limited
            await self.pacer.acquire(endpoint)
            pacing.sending()
        try:
            response = await self._http.request(
                method,
                self.url(path),
                params=tuple(params) if params else None,
                json=json_body,
                headers=all_headers,
            )
        except BaseException as exc:
            if not probe:
                self.pacer.failed(endpoint)
            if isinstance(exc, httpx.HTTPError):
                raise self._failed(
                    _transport_error(endpoint, exc, proxied=self.proxied, host=self.origin), probe=probe
                ) from exc
            raise
        if not probe:
            self.pacer.answered(endpoint, status=response.status_code, headers=response.headers)
        self._observe(response, probe=probe)
        return response

    def raise_for_status(self, response: httpx.Response, *, endpoint: str, subscribe: bool = False) -> None:
        if 200 <= response.status_code < 300:
            return
        body = wire.decode_error_body(response.content)
        # Through a proxy, plain-http calls are answered by the proxy when its policy refuses them:
        # a 403/407 without the service's JSON error body is the proxy's page (never echoed).
        if self.proxied and response.status_code in _PROXY_REFUSALS and not body:
            why = (
                f"{_PROXY_AUTH_HINT} (HTTP 407)"
                if response.status_code == _PROXY_AUTH_REQUIRED
                else f"the egress proxy refused the request (HTTP {response.status_code})"
            )
            raise errors.ProxyRefused(f"{endpoint}: {why}", status_code=response.status_code)
        raise wire.error_for(
            response.status_code,
            body,
            endpoint=endpoint,
            retry_after_header=response.headers.get("retry-after"),
            subscribe=subscribe,
            reason=response.reason_phrase,
        )

    def json(self, response: httpx.Response, *, endpoint: str) -> Any:
        """The JSON body of a successful answer (content type and syntax checked)."""
        self.raise_for_status(response, endpoint=endpoint)
        content_type = _content_type(response)
        if content_type and not (content_type == "application/json" or content_type.endswith("+json")):
            raise errors.ProtocolError(
                f"{endpoint}: expected a JSON answer, got content type {content_type!r}",
                status_code=response.status_code,
            )
        try:
            return json.loads(response.content)
        except ValueError as exc:
            raise errors.ProtocolError(
                f"{endpoint}: the answer is not valid JSON", status_code=response.status_code
            ) from exc

    @staticmethod
    def validate(model: type[M], data: Any, *, endpoint: str) -> M:
        """Validate a decoded body; failures name the endpoint and locations, never the values."""
        try:
            return model.model_validate(data)
        except pydantic.ValidationError as exc:
            locations = sorted({".".join(str(p) for p in error["loc"]) or "<body>" for error in exc.errors()})
            shown = ", ".join(locations[:5]) + (", …" if len(locations) > 5 else "")
            raise errors.ProtocolError(
                f"{endpoint}: the answer does not match the expected schema (at {shown})"
            ) from None

    async def call(
        self,
        model: type[M],
        method: str,
        path: str,
        *,
        endpoint: str,
        token: str | None,
        params: Params = None,
        json_body: object | None = None,
    ) -> M:
        response = await self.send(
            method, path, endpoint=endpoint, token=token, params=params, json_body=json_body
        )
        return self.validate(model, self.json(response, endpoint=endpoint), endpoint=endpoint)

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        endpoint: str,
        token: str | None,
        json_body: object | None = None,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Open an SSE response; refusals (JSON errors before the stream) raise mapped errors."""
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        request = self._http.build_request(
            method, self.url(path), json=json_body, headers=headers, timeout=self._stream_timeout
        )
        await self.pacer.acquire(endpoint)
        try:
            response = await self._http.send(request, stream=True)
        except BaseException as exc:
            self.pacer.failed(endpoint)
            if isinstance(exc, httpx.HTTPError):
                raise self._failed(
                    _transport_error(endpoint, exc, proxied=self.proxied, host=self.origin)
                ) from exc
            raise
        self.pacer.answered(endpoint, status=response.status_code, headers=response.headers)
        self._observe(response, stream=True)
        chunks = self._chunks(response, endpoint=endpoint)
        try:
            if not 200 <= response.status_code < 300:
                try:
                    await response.aread()
                except httpx.HTTPError as exc:
                    raise _transport_error(endpoint, exc) from exc
                self.raise_for_status(response, endpoint=endpoint, subscribe=True)
            content_type = _content_type(response)
            if content_type != "text/event-stream":
                raise errors.ProtocolError(
                    f"{endpoint}: expected text/event-stream, got content type {content_type or 'none'!r}",
                    status_code=response.status_code,
                )
            yield chunks
        finally:
            await chunks.aclose()
            await response.aclose()

    @staticmethod
    async def _chunks(response: httpx.Response, *, endpoint: str) -> AsyncGenerator[bytes, None]:
        try:
            async for chunk in response.aiter_bytes():
                yield chunk
        except httpx.HTTPError as exc:
            raise _transport_error(f"{endpoint} (stream)", exc) from exc

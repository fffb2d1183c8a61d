"""Errors raised by the secrets-service client.

Every failure that leaves ``secretferry.service`` is one of these; httpx and pydantic exceptions are
wrapped with ``raise ... from`` and never escape. Callers decide what to do by class, never by
message text::

    ServiceError                      anything the service (or the way to it) did wrong
    ├── Unavailable                   retriable: connect/read/write timeouts, broken connections, 5xx
    │   ├── RateLimited               429; ``retry_after`` from the header (60 s when absent)
    │   │   └── StreamLimitReached    429 on subscribe: too many open streams for (project, identity)
    │   ├── ProxyRefused              the egress proxy answered instead of the service: a refused
    │   │                             CONNECT, or a 403/407 page that is not the service's JSON
    │   ├── ProxyUnreachable          the egress proxy itself could not be reached
    │   └── TLSVerifyFailed           the server's certificate does not verify against the trusted CAs
    ├── AuthenticationError           401, or 403 with error "TokenError": log in again
    │   ├── StreamError               ``event: error`` on an open stream (token/permission re-check failed)
    │   └── LoginRejected             a login that retrying soon cannot fix (404: no such client id,
    │       │                         identity or auth method); ``retry_after_seconds`` is long
    │       └── TokenReviewAudienceRejected   the service's TokenReview found the token's audiences
    │           │                             invalid (``KubernetesTokenReviewError``), lists parsed
    │           └── ServerIgnoresAudience     ...because the server reviews against the apiserver's
    │                                         own audiences (it sends none): no MachineIdentity can log in
    ├── PermissionDenied              403 otherwise; ``details`` as the service sent them
    ├── NotFound                      404 from the service: a project, folder or object does not exist
    │   └── RouteNotFound             404 from the web framework: this server has no such endpoint
    ├── Conflict                      409 (e.g. a secret of that name already exists)
    ├── ValidationError               400/422, or our own input checks (``field`` names the field)
    │   ├── PlanNotSupported          400 on subscribe: the plan lacks event subscriptions
    │   └── FilterNotSupported        the route answered without applying a filter we asked for
    └── ProtocolError                 wrong content type, unparseable or schema-violating body

Messages name endpoints, status codes, request ids and field names; they never carry secret values
or tokens (bodies of successful responses are never echoed).
"""

from __future__ import annotations

from typing import ClassVar

# When the service answers 429 without a usable ``retry-after`` header (docs/service-contract.md):
# its rate-limit windows are one minute long.
DEFAULT_RATE_LIMIT_RETRY_AFTER_SECONDS = 60.0


class ServiceError(Exception):
    """Base of every error raised by the service client."""

    retriable: ClassVar[bool] = False

    def __init__(self, message: str, *, status_code: int | None = None, req_id: str | None = None) -> None:
        self.message = message
        self.status_code = status_code
        self.req_id = req_id
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.message]
        if self.status_code is not None:
            parts.append(f"status {self.status_code}")
        if self.req_id:
            parts.append(f"reqId {self.req_id}")
        return parts[0] if len(parts) == 1 else f"{parts[0]} ({', '.join(parts[1:])})"

    @property
    def is_retriable(self) -> bool:
        """Whether the same call may succeed later unchanged (decided by class)."""
        return type(self).retriable


class Unavailable(ServiceError):
    """The service could not be reached or failed on its side; try again later."""

    retriable = True

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        req_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.retry_after = retry_after
        super().__init__(message, status_code=status_code, req_id=req_id)


class RateLimited(Unavailable):
    """429: wait ``retry_after`` seconds."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = 429,
        req_id: str | None = None,
        retry_after: float | None = DEFAULT_RATE_LIMIT_RETRY_AFTER_SECONDS,
    ) -> None:
        super().__init__(
            message,
            status_code=status_code,
            req_id=req_id,
            retry_after=DEFAULT_RATE_LIMIT_RETRY_AFTER_SECONDS if retry_after is None else retry_after,
        )


class StreamLimitReached(RateLimited):
    """429 on subscribe: too many streams are open for this (project, identity)."""


class AuthenticationError(ServiceError):
    """The token is missing, expired or rejected: log in again (with fresh credentials)."""


class StreamError(AuthenticationError):
    """The service closed an event stream with ``event: error`` after re-checking the token."""


class LoginRejected(AuthenticationError):
    """The service refused a login in a way that retrying soon cannot change: it knows no such
    client id or identity, or the identity has no such auth method (404 on the 2024-10 self-hosted
    release), or its TokenReview rejected the token's audience. Only a change at the service or of
    the identity fixes it, and neither is seen from here: the next attempt waits
    ``retry_after_seconds`` (a new identity generation starts a new session at once)."""

    # Long enough that a broken identity costs a handful of logins an hour, short enough that a fix
    # made at the service (an auth method attached) shows without touching the identity.
    retry_after_seconds: ClassVar[float] = 600.0


class TokenReviewAudienceRejected(LoginRejected):
    """401 ``KubernetesTokenReviewError``: the apiserver found the token's audiences invalid for the
    audiences the service's TokenReview asked for (both lists as the apiserver printed them)."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = 401,
        req_id: str | None = None,
        token_audiences: tuple[str, ...] = (),
        target_audiences: tuple[str, ...] = (),
    ) -> None:
        self.token_audiences = token_audiences
        self.target_audiences = target_audiences
        super().__init__(message, status_code=status_code, req_id=req_id)


class ServerIgnoresAudience(TokenReviewAudienceRejected):
    """The TokenReview was checked against the apiserver's own audiences: the server sends no
    ``spec.audiences`` (the 2024-10 self-hosted release), so only a token valid for the Kubernetes
    API itself would pass. That does not change by itself: the server must be upgraded."""

    # It will not fix itself: an hour between attempts (an identity change retries at once).
    retry_after_seconds: ClassVar[float] = 3600.0


class PermissionDenied(ServiceError):
    """The identity lacks a permission; ``details`` is what the service sent, unparsed."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = 403,
        req_id: str | None = None,
        details: object | None = None,
    ) -> None:
        self.details = details
        super().__init__(message, status_code=status_code, req_id=req_id)


class NotFound(ServiceError):
    """404: the project, environment, identity or object does not exist."""


class RouteNotFound(NotFound):
    """404 for the endpoint itself: the server is of a version without it (e.g. no v4 list).

    A ``NotFound`` still, so callers that only care whether something is there need not know; the
    list fallback (``listroutes``) tells the two apart, because only a missing route may switch a
    host to another endpoint, never missing data.
    """


class Conflict(ServiceError):
    """409: the object already exists or was changed concurrently."""


class ValidationError(ServiceError):
    """The request was invalid; ``field`` names the offending field when known (wire name)."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        req_id: str | None = None,
        field: str | None = None,
    ) -> None:
        self.field = field
        super().__init__(message, status_code=status_code, req_id=req_id)


class PlanNotSupported(ValidationError):
    """400 on subscribe: the organization's plan does not include event subscriptions."""


class FilterNotSupported(ValidationError):
    """The list route cannot apply a filter we asked for, and its answer does not carry what we need
    to apply it ourselves (``listfilters``): refused, because the unfiltered answer would widen
    what lands in a Secret. ``field`` names the filter (``metadataFilter`` or ``tagSlugs``)."""


class ProtocolError(ServiceError):
    """The service answered something we cannot understand (content type, JSON, schema).

    Retriable: what answers like that is most often not the service at all but a gateway or proxy
    in front of it (a maintenance page served with 200, a truncated body), which goes away. The
    caller's backoff bounds what retrying a server that keeps answering nonsense costs.
    """

    retriable = True


def is_retriable(exc: BaseException) -> bool:
    """Whether ``exc`` is a service error that may go away on its own."""
    return isinstance(exc, ServiceError) and exc.is_retriable


class ProxyRefused(Unavailable):
    """The egress proxy (``HTTPS_PROXY``/``HTTP_PROXY``) refused to relay the call.

    Retriable like any outage: the proxy's policy is the installer's to fix, and nothing about the
    call itself changes. Kept apart so status can say the proxy, not the service, is in the way.
    """


class ProxyUnreachable(Unavailable):
    """Nothing answers at the egress proxy's address: the service was never reached."""


class TLSVerifyFailed(Unavailable):
    """The server's TLS certificate did not verify (unknown CA, wrong host name, expired).

    Nothing was sent: verification ends the handshake before any request. Retried like a
    connection failure: the server may rotate to a certificate the trusted CAs verify, or the
    identity's CA bundle may change.
    """

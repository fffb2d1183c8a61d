"""Map failures at the boundaries to ``problems.Problem``: a condition reason, a message, a retry.

Retry is decided by the exception class: the service's own ``retriable`` (only
``Unavailable``, its 429 children and a malformed answer: the same call may succeed later) says
whether to back off;
anything else waits for a change (the pass looks again at the SecretSync's refresh, since the
service can change its mind without Kubernetes hearing of it). For Kubernetes errors the class
decides here: RBAC that may be granted or an apiserver that may come back are retried; a conflict
or a rejected object waits for an edit.

The words before the colon are ours; whatever the service wrote arrives inside ``exc.message``
already quoted, cut to 200 characters and marked ``service said: "…"`` (``service.wire``), and a
request id only when it looks like one. Any host can answer a login, so its text is never
presented as the operator's own.
"""

from __future__ import annotations

from secretferry.kube import errors as kube_errors
from secretferry.reconcile import problems, reasons
from secretferry.service import errors as service_errors


def from_service_error(exc: service_errors.ServiceError, *, scope_text: str) -> problems.Problem:
    req = f" (reqId {exc.req_id})" if exc.req_id else ""
    detail = f"{scope_text}: {exc.message}{req}"
    reason, what = _service_reason(exc)
    retry_after = exc.retry_after if isinstance(exc, service_errors.Unavailable) else None
    return problems.Problem(reason, f"{what}, {detail}", retriable=exc.is_retriable, retry_after=retry_after)


def _service_reason(exc: service_errors.ServiceError) -> tuple[str, str]:
    if isinstance(exc, service_errors.RateLimited):
        return reasons.RATE_LIMITED, "rate limited by the service"
    if isinstance(exc, service_errors.TLSVerifyFailed):
        return reasons.TLS_VERIFY_FAILED, "TLS verification failed"
    if isinstance(exc, service_errors.ProxyRefused):
        return reasons.PROXY_REFUSED, "refused by the egress proxy"
    if isinstance(exc, service_errors.ProxyUnreachable):
        return reasons.PROXY_UNREACHABLE, "the egress proxy cannot be reached"
    if isinstance(exc, service_errors.Unavailable):
        return reasons.SERVICE_UNAVAILABLE, "service unavailable"
    if isinstance(exc, service_errors.ProtocolError):
        return reasons.SERVICE_UNAVAILABLE, "malformed answer from the service"
    if isinstance(exc, service_errors.ServerIgnoresAudience):
        return reasons.SERVER_IGNORES_AUDIENCE, "login impossible on this server"
    if isinstance(exc, service_errors.AuthenticationError):
        return reasons.AUTH_FAILED, "login rejected"
    if isinstance(exc, service_errors.PermissionDenied):
        return reasons.FORBIDDEN, "permission denied"
    if isinstance(exc, service_errors.FilterNotSupported):
        return reasons.FILTER_NOT_SUPPORTED, "filter not supported by the service"
    if isinstance(exc, service_errors.NotFound):
        return reasons.SOURCE_NOT_FOUND, "not found"
    if isinstance(exc, service_errors.ValidationError):
        return reasons.SOURCE_NOT_FOUND, "the service refused the request"
    return reasons.SERVICE_UNAVAILABLE, "service error"


def auth_reason(exc: service_errors.AuthenticationError) -> str:
    """The identity's reason for a failed login or a rejected token."""
    return _service_reason(exc)[0]


def from_kube_error(exc: kube_errors.KubeError, *, what: str) -> problems.Problem:
    if isinstance(exc, kube_errors.Conflict):
        return problems.Problem(
            # Server-side apply's field ownership, or a write that lost a race (resourceVersion, the
            # uid precondition of a replace): the apiserver's own words say which.
            reasons.TARGET_CONFLICT,
            f"{what}: conflict with another writer: {exc}",
        )
    if isinstance(exc, kube_errors.Invalid):
        return problems.Problem(reasons.KUBERNETES_ERROR, f"{what}: the apiserver rejected it: {exc}")
    if isinstance(exc, kube_errors.Forbidden):
        # RBAC can be granted without an event we watch: try again.
        return problems.Problem(
            reasons.KUBERNETES_ERROR, f"{what}: the operator is not allowed: {exc}", retriable=True
        )
    return problems.Problem(reasons.KUBERNETES_ERROR, f"{what}: {exc}", retriable=True)

"""Map failures at the boundaries to condition reasons and retry delays.

Retry is decided by the exception class (style.md): a transient service failure backs off, a
spec problem waits for the user to change something (a watch event brings it back).

The words before the colon are ours; whatever the service wrote arrives inside ``exc.message``
already quoted, cut to 200 characters and marked ``service said: "…"`` (``service.wire``), and a
request id only when it looks like one. Any host can answer a login, so its text is never
presented as the operator's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from secretferry.kube import errors as kube_errors
from secretferry.reconcile import reasons
from secretferry.service import errors as service_errors


@dataclass(frozen=True)
class Failure:
    reason: str
    message: str
    retriable: bool
    retry_after: float | None = None


def from_service_error(exc: service_errors.ServiceError, *, scope_text: str) -> Failure:
    req = f" (reqId {exc.req_id})" if exc.req_id else ""
    detail = f"{scope_text}: {exc.message}{req}"
    if isinstance(exc, service_errors.RateLimited):
        return Failure(reasons.RATE_LIMITED, f"rate limited by the service, {detail}", True, exc.retry_after)
    if isinstance(exc, service_errors.Unavailable):
        return Failure(reasons.SERVICE_UNAVAILABLE, f"service unavailable, {detail}", True, exc.retry_after)
    if isinstance(exc, service_errors.ProtocolError):
        return Failure(reasons.SERVICE_UNAVAILABLE, f"malformed answer from the service, {detail}", True)
    if isinstance(exc, service_errors.AuthenticationError):
        return Failure(reasons.AUTH_FAILED, f"login rejected, {detail}", True)
    if isinstance(exc, service_errors.PermissionDenied):
        return Failure(reasons.FORBIDDEN, f"permission denied, {detail}", True)
    if isinstance(exc, service_errors.NotFound):
        return Failure(reasons.SOURCE_NOT_FOUND, f"not found, {detail}", True)
    if isinstance(exc, service_errors.ValidationError):
        return Failure(reasons.SOURCE_NOT_FOUND, f"the service refused the request, {detail}", True)
    return Failure(reasons.SERVICE_UNAVAILABLE, f"service error, {detail}", True)


def from_kube_error(exc: kube_errors.KubeError, *, what: str) -> Failure:
    if isinstance(exc, kube_errors.Conflict):
        return Failure(reasons.TARGET_CONFLICT, f"{what}: fields are owned by another manager: {exc}", False)
    if isinstance(exc, kube_errors.Forbidden):
        return Failure(reasons.KUBERNETES_ERROR, f"{what}: the operator is not allowed: {exc}", True)
    if isinstance(exc, kube_errors.Invalid):
        return Failure(reasons.KUBERNETES_ERROR, f"{what}: the apiserver rejected it: {exc}", False)
    return Failure(reasons.KUBERNETES_ERROR, f"{what}: {exc}", True)

"""Service and Kubernetes errors become Problems; the error's class decides whether to retry."""

from __future__ import annotations

import pytest

from secretferry.kube import errors as kube_errors
from secretferry.reconcile import outcomes, problems, reasons
from secretferry.service import errors as service_errors


@pytest.mark.parametrize(
    ("exc", "reason", "retriable", "retry_after"),
    [
        (service_errors.Unavailable("down", status_code=503), reasons.SERVICE_UNAVAILABLE, True, None),
        (service_errors.Unavailable("slow", retry_after=7.0), reasons.SERVICE_UNAVAILABLE, True, 7.0),
        (service_errors.ProxyRefused("POST /login: proxy 403"), reasons.PROXY_REFUSED, True, None),
        (service_errors.ProxyUnreachable("POST /login: no proxy"), reasons.PROXY_UNREACHABLE, True, None),
        (service_errors.RateLimited("429", retry_after=30.0), reasons.RATE_LIMITED, True, 30.0),
        (service_errors.AuthenticationError("401", status_code=401), reasons.AUTH_FAILED, False, None),
        (service_errors.PermissionDenied("403", status_code=403), reasons.FORBIDDEN, False, None),
        (service_errors.NotFound("404", status_code=404), reasons.SOURCE_NOT_FOUND, False, None),
        (service_errors.ValidationError("400", status_code=400), reasons.SOURCE_NOT_FOUND, False, None),
        (service_errors.ProtocolError("not json"), reasons.SERVICE_UNAVAILABLE, True, None),
    ],
)
def test_a_service_error_is_retried_only_when_its_class_says_so(
    exc: service_errors.ServiceError, reason: str, retriable: bool, retry_after: float | None
) -> None:
    problem = outcomes.from_service_error(exc, scope_text="project p environment dev path /")
    assert (problem.reason, problem.retriable, problem.retry_after) == (reason, retriable, retry_after)
    assert problem.retriable is exc.is_retriable
    assert problem.message.endswith(f"project p environment dev path /: {exc.message}")


def test_a_request_id_is_named_in_the_message() -> None:
    exc = service_errors.PermissionDenied("no access", status_code=403, req_id="req-42")
    assert "(reqId req-42)" in outcomes.from_service_error(exc, scope_text="s").message


@pytest.mark.parametrize(
    ("exc", "reason", "retriable"),
    [
        (kube_errors.Conflict(409, "Conflict", "owned by kubectl"), reasons.TARGET_CONFLICT, False),
        (kube_errors.Invalid(422, "Invalid", "bad"), reasons.KUBERNETES_ERROR, False),
        (kube_errors.Forbidden(403, "Forbidden", "rbac"), reasons.KUBERNETES_ERROR, True),
        (kube_errors.Unavailable(503, "ServiceUnavailable", "etcd"), reasons.KUBERNETES_ERROR, True),
    ],
)
def test_kubernetes_errors_retry_what_may_pass_and_wait_for_an_edit_otherwise(
    exc: kube_errors.KubeError, reason: str, retriable: bool
) -> None:
    problem = outcomes.from_kube_error(exc, what="writing Secret ns/app")
    assert (problem.reason, problem.retriable) == (reason, retriable)
    assert problem.message.startswith("writing Secret ns/app: ")


def test_problems_compare_by_what_they_say() -> None:
    assert problems.Problem("A", "m", retriable=True) == problems.Problem("A", "m", retriable=True)
    assert problems.Problem("A", "m") != problems.Problem("A", "m", retriable=True)
    assert str(problems.Problem("A", "the message")) == "the message"


def test_a_certificate_that_does_not_verify_is_its_own_reason() -> None:
    exc = service_errors.TLSVerifyFailed("POST /api/v1/auth/universal-auth/login: does not verify")
    problem = outcomes.from_service_error(exc, scope_text="login")
    assert problem.reason == reasons.TLS_VERIFY_FAILED
    assert problem.retriable

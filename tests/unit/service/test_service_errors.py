"""The error tree: retry decided by class, defaults, rendering."""

from __future__ import annotations

import pytest

from secretferry.service import errors


@pytest.mark.parametrize(
    ("exc", "retriable"),
    [
        (errors.ServiceError("x"), False),
        (errors.Unavailable("x"), True),
        (errors.RateLimited("x"), True),
        (errors.StreamLimitReached("x"), True),
        (errors.AuthenticationError("x"), False),
        (errors.StreamError("x"), False),
        (errors.PermissionDenied("x"), False),
        (errors.NotFound("x"), False),
        (errors.Conflict("x"), False),
        (errors.ValidationError("x"), False),
        (errors.PlanNotSupported("x"), False),
        (errors.ProtocolError("x"), True),
    ],
)
def test_retriable_by_class(exc: errors.ServiceError, retriable: bool) -> None:
    assert exc.is_retriable is retriable
    assert errors.is_retriable(exc) is retriable


def test_foreign_exceptions_are_not_retriable() -> None:
    assert errors.is_retriable(TimeoutError()) is False


def test_hierarchy() -> None:
    assert issubclass(errors.StreamLimitReached, errors.RateLimited)
    assert issubclass(errors.RateLimited, errors.Unavailable)
    assert issubclass(errors.StreamError, errors.AuthenticationError)
    assert issubclass(errors.PlanNotSupported, errors.ValidationError)
    assert issubclass(errors.RouteNotFound, errors.NotFound)  # whoever only asks "is it there?"


def test_rate_limited_defaults_to_sixty_seconds() -> None:
    assert errors.RateLimited("x").retry_after == 60.0
    assert errors.RateLimited("x", retry_after=None).retry_after == 60.0
    assert errors.StreamLimitReached("x", retry_after=3).retry_after == 3
    assert errors.Unavailable("x").retry_after is None


def test_rendering_and_attributes() -> None:
    exc = errors.ValidationError("bad", status_code=422, req_id="r1", field="slug")
    assert str(exc) == "bad (status 422, reqId r1)"
    assert (exc.message, exc.status_code, exc.req_id, exc.field) == ("bad", 422, "r1", "slug")
    assert str(errors.NotFound("gone")) == "gone"
    assert errors.PermissionDenied("no", details={"a": 1}).details == {"a": 1}

"""authwire + wire.error_for: the auth answers of real servers that need more than a status code."""

from __future__ import annotations

from typing import Any

import pytest

from secretferry.service import authwire, errors, wire

API = "https://kubernetes.default.svc.cluster.local"
MISMATCH = (
    '[invalid bearer token, token audiences ["infisical-real" "b"] is invalid for the target '
    f'audiences ["{API}"]]'
)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"error": "KubernetesTokenReviewError", "message": MISMATCH}, (("infisical-real", "b"), (API,))),
        ({"error": "UnauthorizedError", "message": MISMATCH}, None),  # another error: not a review
        ({"error": "KubernetesTokenReviewError", "message": "Kubernetes token not authenticated"}, None),
        ({"error": "KubernetesTokenReviewError", "message": ["x"]}, None),
    ],
)
def test_audience_mismatch(body: dict[str, Any], expected: object) -> None:
    assert authwire.audience_mismatch(body) == expected


@pytest.mark.parametrize(
    ("body", "cls"),
    [
        ({"statusCode": 401, "error": "ValidationFailure", "message": "bad"}, errors.ValidationError),
        (
            {"statusCode": 401, "error": "ValidationFailure", "message": [{"message": "x"}]},
            errors.ValidationError,
        ),
        ({"statusCode": 401, "error": "UnauthorizedError", "message": "expired"}, errors.AuthenticationError),
        (
            {"statusCode": 401, "error": "KubernetesTokenReviewError", "message": MISMATCH},
            errors.TokenReviewAudienceRejected,
        ),
    ],
)
def test_401_classes(body: dict[str, Any], cls: type[errors.ServiceError]) -> None:
    assert type(wire.error_for(401, body, endpoint="POST /x")) is cls


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        (
            {
                "message": "You are not allowed to access this resource",
                "error": "Identity is not a member of the specified project with ID 'p1'",
            },
            "You are not allowed to access this resource: "
            "Identity is not a member of the specified project with ID 'p1'",
        ),
        (
            {"message": "You are not allowed to read on secrets", "error": "PermissionDenied"},
            "You are not allowed to read on secrets",
        ),
        ({"error": "Identity is not a member"}, "Identity is not a member"),
    ],
)
def test_a_403_shows_the_text_in_error(body: dict[str, Any], shown: str) -> None:
    exc = wire.error_for(403, body, endpoint="GET /x")
    assert isinstance(exc, errors.PermissionDenied)
    assert exc.message == f"GET /x: {wire.service_said(shown)}"


def test_a_403_error_text_is_cut_and_marked_like_every_service_text() -> None:
    exc = wire.error_for(403, {"message": "m", "error": "x y\n" + "z" * 400}, endpoint="GET /x")
    assert exc.message.startswith('GET /x: service said: "m: x y z') and exc.message.endswith('…"')
    assert "\n" not in exc.message

"""apiserver Status bodies → our error classes."""

from __future__ import annotations

import json

import pytest

from secretferry.kube import errors


def _status(code: int, reason: str, message: str = "m", **details: object) -> bytes:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason}
    body["message"] = message
    if details:
        body["details"] = details
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (400, "BadRequest", errors.BadRequest),
        (401, "Unauthorized", errors.Unauthorized),
        (403, "Forbidden", errors.Forbidden),
        (404, "NotFound", errors.NotFound),
        (409, "Conflict", errors.Conflict),
        (409, "AlreadyExists", errors.AlreadyExists),
        (410, "Expired", errors.Gone),
        (422, "Invalid", errors.Invalid),
        (429, "TooManyRequests", errors.Unavailable),
        (500, "InternalError", errors.Unavailable),
        (503, "ServiceUnavailable", errors.Unavailable),
    ],
)
def test_class_by_status(code: int, reason: str, cls: type[errors.KubeError]) -> None:
    error = errors.from_status(code, _status(code, reason))
    assert type(error) is cls
    assert (error.status, error.reason, error.message) == (code, reason, "m")


def test_field_manager_conflicts_are_exposed() -> None:
    body = _status(
        409,
        "Conflict",
        'Apply failed with 2 conflicts: conflict with "other" using v1: .data.a',
        causes=[
            {
                "reason": "FieldManagerConflict",
                "message": 'conflict with "other" using v1',
                "field": ".data.a",
            },
            {"reason": "FieldValueInvalid", "message": "not a conflict", "field": ".data.c"},
            {
                "reason": "FieldManagerConflict",
                "message": 'conflict with "kubectl-edit" with subresource "status" using v1',
                "field": ".data.b",
            },
        ],
    )
    error = errors.from_status(409, body)
    assert isinstance(error, errors.Conflict)
    assert error.fields == (".data.a", ".data.b")
    assert error.managers == {"other", "kubectl-edit"}


def test_plain_text_body_is_cut_short() -> None:
    error = errors.from_status(502, b"x" * 1000)
    assert isinstance(error, errors.Unavailable)
    assert error.reason == "Unknown"
    assert len(error.message) == 200


def test_details_kind() -> None:
    error = errors.from_status(404, _status(404, "NotFound", kind="namespaces", name="nope"))
    assert error.details_kind == "namespaces"


def test_watch_error_event_object() -> None:
    """A watch ERROR event carries a Status dict, not bytes; 410 in it means relist."""
    status = {
        "kind": "Status",
        "code": 410,
        "reason": "Expired",
        "message": "too old resource version: 1 (5)",
    }
    error = errors.from_status(410, status)
    assert isinstance(error, errors.Gone)
    assert error.message.startswith("too old")


def test_an_invalid_object_names_its_fields_without_the_detail_text() -> None:
    """Go's JSON errors quote the offending character of a value: only field and kind are kept."""
    body = _status(
        422,
        "Invalid",
        'Secret "s" is invalid: data[.dockercfg]: Invalid value: "<secret contents redacted>": invalid'
        " character 'N' looking for beginning of value",
        causes=[
            {"reason": "FieldValueInvalid", "message": "invalid character 'N'", "field": "data[.dockercfg]"},
            {"reason": "FieldValueRequired", "message": "Required value", "field": "data[ssh-privatekey]"},
            {"message": "no field"},
        ],
    )
    error = errors.from_status(422, body)
    assert isinstance(error, errors.Invalid)
    assert error.fields == (
        "data[.dockercfg]: FieldValueInvalid",
        "data[ssh-privatekey]: FieldValueRequired",
        "?: invalid",
    )
    assert "'N'" not in " ".join(error.fields)

"""Query parsing: zod's strict ``true``/``false``, repeated parameters, the lenient folder boolean."""

from __future__ import annotations

import pytest
from starlette.datastructures import QueryParams

from secretferry.devserver import query
from secretferry.devserver.errors import ApiError


@pytest.mark.parametrize(
    ("qs", "default", "value", "issues"),
    [
        ("", True, True, 0),
        ("", False, False, 0),
        ("f=true", False, True, 0),
        ("f=false", True, False, 0),
        ("f=True", False, False, 1),
        ("f=1", False, False, 1),
        ("f=", True, True, 1),
        ("f=true&f=true", False, False, 1),
    ],
)
def test_flag(qs: str, default: bool, value: bool, issues: int) -> None:
    found = query.Issues()
    assert query.flag(QueryParams(qs), "f", found, default=default) is value
    assert len(found.items) == issues


@pytest.mark.parametrize(
    ("qs", "value", "issues"),
    [("", None, 0), ("t=%20a%20", "a", 0), ("t=", "", 0), ("t=a&t=b", None, 1)],
)
def test_text(qs: str, value: str | None, issues: int) -> None:
    found = query.Issues()
    assert query.text(QueryParams(qs), "t", found) == value
    assert len(found.items) == issues


@pytest.mark.parametrize(
    ("qs", "value"),
    [
        ("", False),
        ("b=true", True),
        ("b=True", True),
        ("b=yes", True),
        ("b=1", True),
        ("b=false", False),
        ("b=FALSE", False),
        ("b=0", False),
        ("b=0.0", False),
        ("b=", False),
    ],
)
def test_lenient_flag(qs: str, value: bool) -> None:
    assert query.lenient_flag(QueryParams(qs), "b", default=False) is value


def test_issues_answer_as_one_422() -> None:
    found = query.Issues()
    found.raise_if_any()  # nothing to report
    found.add("a", "invalid_enum_value", "x")
    found.add("b", "invalid_type", "y")
    with pytest.raises(ApiError) as raised:
        found.raise_if_any()
    assert raised.value.status == 422 and [i["path"] for i in raised.value.message] == [["a"], ["b"]]  # type: ignore[union-attr]

"""secretferry.models.base / errors / labels: durations, selectors, error descriptions, label values."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from secretferry import models
from secretferry.models import base, labels


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("1h30m", 5400.0),
        ("1h0m5s", 3605.0),
        ("90m", 5400.0),
        ("0s", 0.0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert models.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "m", "1d", "5m1h", "1.5h", " 5m", "5m ", "-5m", "5M", "1h1h"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"^must be a duration such as 30s, 5m, 1h or 1h30m$"):
        models.parse_duration(text)


@given(st.integers(0, 999), st.integers(0, 999), st.integers(0, 999))
def test_parse_duration_agrees_with_crd_pattern(h: int, m: int, s: int) -> None:
    text = f"{h}h{m}m{s}s"
    assert re.fullmatch(base.DURATION_PATTERN, text)
    assert models.parse_duration(text) == h * 3600 + m * 60 + s


@pytest.mark.parametrize(
    ("selector", "labels_", "expected"),
    [
        ({}, {}, True),
        ({"matchLabels": {"team": "a"}}, {"team": "a", "x": "y"}, True),
        ({"matchLabels": {"team": "a"}}, {"team": "b"}, False),
        (
            {"matchExpressions": [{"key": "env", "operator": "In", "values": ["dev", "qa"]}]},
            {"env": "qa"},
            True,
        ),
        ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["dev"]}]}, {}, False),
        ({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}, {}, True),
        (
            {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]},
            {"env": "prod"},
            False,
        ),
        ({"matchExpressions": [{"key": "env", "operator": "Exists"}]}, {"env": ""}, True),
        ({"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]}, {"env": ""}, False),
        (
            {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]},
            {"a": "1"},
            False,
        ),
    ],
)
def test_label_selector(selector: dict[str, object], labels_: dict[str, str], expected: bool) -> None:
    assert models.LabelSelector.model_validate(selector).matches(labels_) is expected


@pytest.mark.parametrize(
    ("loc", "path"),
    [((), "(root)"), (("spec",), "spec"), (("spec", "sources", 0, "projectId"), "spec.sources[0].projectId")],
)
def test_field_path(loc: tuple[int | str, ...], path: str) -> None:
    from secretferry.models import errors

    assert errors.field_path(loc) == path


def test_describe_validation_error_limits_count() -> None:
    with pytest.raises(ValidationError) as info:
        models.Condition.model_validate({"type": "", "status": "maybe", "reason": 5, "message": 7})
    text = models.describe_validation_error(info.value)
    assert text.startswith("type: ")
    assert text.endswith("and 1 more")


def test_find_condition() -> None:
    ready = models.Condition(type="Ready", status="True")
    assert models.find_condition([ready], "Ready") is ready
    assert models.find_condition([ready], "Other") is None


@pytest.mark.parametrize("name", ["a", "x" * 63, "x" * 64, "a." * 100 + "b", "ab-" * 80 + "c"])
def test_sync_label_value_is_a_valid_label_value(name: str) -> None:
    value = labels.sync_label_value(name)
    assert len(value) <= labels.LABEL_VALUE_MAX
    assert re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", value)
    assert (value == name) is (len(name) <= labels.LABEL_VALUE_MAX)


def test_sync_label_value_distinguishes_long_names() -> None:
    assert labels.sync_label_value("x" * 70 + "a") != labels.sync_label_value("x" * 70 + "b")

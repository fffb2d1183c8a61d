"""Input checks: they name the field and never the value."""

from __future__ import annotations

import datetime

import pytest

from secretferry.service import errors, validation


@pytest.mark.parametrize("value", ["a", "x" * 60])
def test_slug_accepts_1_to_60(value: str) -> None:
    assert validation.slug(value) == value


@pytest.mark.parametrize("value", ["", "x" * 61])
def test_slug_refuses_outside_1_to_60(value: str) -> None:
    with pytest.raises(errors.ValidationError) as info:
        validation.slug(value, field="privilegeDetails.slug")
    assert info.value.field == "privilegeDetails.slug"


def test_non_empty_names_the_field_not_the_value() -> None:
    with pytest.raises(errors.ValidationError) as info:
        validation.non_empty("", field="identityId")
    assert info.value.field == "identityId"
    assert "identityId" in str(info.value)


@pytest.mark.parametrize("value", ["1m", "1h", "1d", "30s", "2w", "1y", "500ms", "90m"])
def test_temporary_range_accepts(value: str) -> None:
    assert validation.temporary_range(value) == value


@pytest.mark.parametrize("value", ["", "1", "h", "0h", "1 h", "1.5h", "1H", "-1h", "1hour", "1h "])
def test_temporary_range_refuses(value: str) -> None:
    with pytest.raises(errors.ValidationError) as info:
        validation.temporary_range(value)
    assert info.value.field == "temporaryRange"


@pytest.mark.parametrize(
    ("n", "ok"),
    [(0, False), (1, True), (10, True), (11, False)],
)
def test_count(n: int, ok: bool) -> None:
    items = list(range(n))
    if ok:
        validation.count(items, field="register", minimum=1, maximum=10)
    else:
        with pytest.raises(errors.ValidationError) as info:
            validation.count(items, field="register", minimum=1, maximum=10)
        assert info.value.field == "register"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (datetime.datetime(2025, 1, 2, 3, 4, 5, tzinfo=datetime.UTC), "2025-01-02T03:04:05Z"),
        (
            datetime.datetime(
                2025, 1, 2, 5, 4, 5, 120000, tzinfo=datetime.timezone(datetime.timedelta(hours=2))
            ),
            "2025-01-02T03:04:05.120000Z",
        ),
    ],
)
def test_timestamp_is_utc_iso(value: datetime.datetime, text: str) -> None:
    assert validation.timestamp(value, field="temporaryAccessStartTime") == text


def test_timestamp_refuses_naive() -> None:
    with pytest.raises(errors.ValidationError) as info:
        validation.timestamp(datetime.datetime(2025, 1, 1), field="temporaryAccessStartTime")
    assert info.value.field == "temporaryAccessStartTime"

"""The pure rules behind the dev server's strictness: ms durations, zod datetimes, slugs,
metadataFilter pairs, and permission evaluation that never widens access."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_core import PydanticCustomError

from secretferry.devserver import permissions, zodrules

HOUR_MS = 3_600_000.0


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("1h", HOUR_MS),
        ("1 hour", HOUR_MS),
        ("2HRS", 2 * HOUR_MS),
        ("90s", 90_000.0),
        ("5 msecs", 5.0),
        ("250ms", 250.0),
        ("1500", 1500.0),
        (".5d", 12 * HOUR_MS),
        ("1y", 365.25 * 24 * HOUR_MS),
        ("-1m", -60_000.0),  # parsed, and then refused for not being positive
        ("1mo", None),  # months only exist in ms v3: older servers refuse them
        ("1 fortnight", None),
        ("1h ", None),
        ("", None),
        ("1" * 101, None),
    ],
)
def test_duration_ms(text: str, millis: float | None) -> None:
    assert zodrules.duration_ms(text) == millis


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        ("1970-01-01T00:00:00Z", 0.0),
        ("1970-01-01T00:00:01.25Z", 1.25),
        ("2024-02-29T00:00:00Z", 1_709_164_800.0),
        ("2023-02-29T00:00:00Z", None),
        ("1970-01-01T00:00:00+00:00", None),
        ("1970-01-01T00:00:00", None),
        ("1970-01-01T00:00:60Z", None),
    ],
)
def test_datetime_epoch(text: str, epoch: float | None) -> None:
    assert zodrules.datetime_epoch(text) == epoch


@pytest.mark.parametrize(
    ("text", "code"),
    [("Ab", "custom"), ("a b", "custom"), ("", "too_small"), ("a" * 61, "too_big"), ("a_b", "custom")],
)
def test_slug_refusals(text: str, code: str) -> None:
    with pytest.raises(PydanticCustomError) as refused:
        zodrules.slug(text)
    assert refused.value.type == code


def test_uppercase_is_refused_not_lowered() -> None:
    """The newer router lowercases, the older one refuses: the stricter one wins."""
    with pytest.raises(PydanticCustomError, match="Must be lowercase"):
        zodrules.slug("Ab")


@pytest.mark.parametrize(
    ("text", "pairs"),
    [
        (None, []),
        ("key=a,value=b|key=c,value=d", [("a", "b"), ("c", "d")]),
        ("key=a", []),
        ("key=a,value=b=c", [("a", "b")]),  # "=" splits like ","; the stray "c" is an identifier
        ("key=a,key=b,value=c", [("b", "c")]),  # the last key wins
        ("||", []),
    ],
)
def test_metadata_filter_pairs(text: str | None, pairs: list[tuple[str, str]]) -> None:
    assert zodrules.metadata_filter_pairs(text) == pairs


def rule(conditions: dict[str, Any], *, inverted: bool = False) -> dict[str, Any]:
    return {"action": "read", "subject": "secrets", "conditions": conditions, "inverted": inverted}


@pytest.mark.parametrize(
    ("conditions", "met"),
    [
        ({"environment": "dev", "secretPath": "/app"}, True),
        ({"secretPath": "/*"}, False),  # a plain string is equality, not a glob
        ({"secretPath": {"$glob": "/app/**"}}, True),
        ({"secretPath": {"$regex": ".*"}}, None),  # an operator this module does not evaluate
        ({"secretName": "A"}, None),  # a field it is not given
        ({"environment": "prod", "secretName": "A"}, False),
        ({"identityId": "x"}, False),  # a field the checked object lacks: no match, as in CASL
    ],
)
def test_rule_matches(conditions: dict[str, Any], met: bool | None) -> None:
    found = permissions.rule_matches(
        rule(conditions), action="read", subject="secrets", environment="dev", secret_path="/app"
    )
    assert found is met


def test_an_unevaluable_condition_neither_grants_nor_spares() -> None:
    check = {"action": "read", "subject": "secrets", "environment": "dev", "secret_path": "/app"}
    grant = {"permissions": [rule({"secretName": "A"})]}
    assert not permissions.evaluate("no-access", [grant], 0.0, **check)
    deny = {"permissions": [rule({"secretName": "A"}, inverted=True)]}
    assert not permissions.evaluate("viewer", [deny], 0.0, **check)
    assert permissions.evaluate("viewer", [], 0.0, **check)

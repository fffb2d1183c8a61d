"""TemporaryPrivilege's spec rules: pydantic and the CRD's CEL say the same, the slug is derived."""

from __future__ import annotations

import re
from typing import Any

import pydantic
import pytest

from secretferry.models import temporaryprivilege as tp

READ = {"actions": ["read"], "subject": "secrets", "conditions": {"environment": "dev", "secretPath": "/a"}}


def _spec(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "granterRef": {"name": "g"},
        "identityId": "id-1",
        "projectSlug": "p",
        "permissions": [READ],
        "temporaryRange": "1h",
    }
    return {k: v for k, v in {**base, **fields}.items() if v is not None}


@pytest.mark.parametrize(
    "fields",
    [
        {"temporaryRange": None},  # neither a range nor permanent
        {"permanent": True},  # permanent with a range
        {"temporaryRange": "1h30m"},  # one number, one unit
        {"temporaryRange": "0s"},
        {"slug": "Has-Caps"},
        {"slug": "a" * 61},
        {"permissions": []},
        {"permissions": [{"actions": ["read"], "subject": "identity", "conditions": {"environment": "dev"}}]},
        {"permissions": [{"actions": ["read"], "subject": "role", "inverted": True}]},
        {
            "permissions": [
                {"actions": ["read"], "subject": "secret-folders", "conditions": {"secretName": "X"}}
            ]
        },
        {"permissions": [{**READ, "conditions": {"secretPath": "no-slash"}}]},
    ],
)
def test_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        tp.TemporaryPrivilegeSpec.model_validate(_spec(**fields))


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"temporaryRange": None, "permanent": True},
        {"temporaryAccessStartTime": "2030-01-01T00:00:00Z", "temporaryRange": "7d"},
        {"permissions": [{"actions": ["read"], "subject": "identity"}]},
    ],
)
def test_accepted(fields: dict[str, Any]) -> None:
    tp.TemporaryPrivilegeSpec.model_validate(_spec(**fields))


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("grant-read", "grant-read"),
        ("team.a.grant", "team-a-grant"),
        ("a--b", "a-b"),
    ],
)
def test_slug_for(name: str, slug: str) -> None:
    assert tp.slug_for(name) == slug


def test_a_long_name_keeps_a_unique_valid_slug() -> None:
    one, two = tp.slug_for("x" * 70 + "-one"), tp.slug_for("x" * 70 + "-two")
    assert one != two
    for slug in (one, two):
        assert len(slug) <= tp.SLUG_MAX
        assert re.fullmatch(tp.SLUG_PATTERN, slug)


def test_the_spec_slug_wins() -> None:
    body = {"metadata": {"name": "n"}, "spec": _spec(slug="given")}
    assert tp.TemporaryPrivilege.from_body(body).privilege_slug == "given"
    body = {"metadata": {"name": "n.x"}, "spec": _spec()}
    assert tp.TemporaryPrivilege.from_body(body).privilege_slug == "n-x"

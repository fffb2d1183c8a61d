"""Input checks: they name the field and never the value."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import pytest

from secretferry.service import errors, models, validation


@pytest.mark.parametrize("value", ["a", "x" * 60, "0", "ok-slug-2", "a-b-c"])
def test_slug_accepts_1_to_60_in_slug_form(value: str) -> None:
    assert validation.slug(value) == value


@pytest.mark.parametrize(
    "value",
    ["", "x" * 61, "Upper", "a_b", "a--b", "-a", "a-", "a.b", "ä", " a", "a ", "a\n", "a b"],
)
def test_slug_refuses_outside_1_to_60_or_the_slug_form(value: str) -> None:
    """The form is the real server's (devserver/zodrules.py): it trims and lowercases or refuses."""
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


# --- identity privileges ---------------------------------------------------------------------------

READ_DEV = {"actions": ["read"], "subject": "secrets", "conditions": {"environment": "dev"}}
START = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
WINDOW = {"isTemporary": True, "temporaryMode": "relative", "temporaryRange": "1h"}


def _refused_field(call: Callable[[], object]) -> str | None:
    with pytest.raises(errors.ValidationError) as info:
        call()
    return info.value.field


@pytest.mark.parametrize(
    ("permissions", "packed"),
    [([], None), ([models.PermissionSent(action="read", subject="secrets")], None), (None, READ_DEV)],
)
def test_privilege_rules_takes_exactly_one_form(permissions: list[Any] | None, packed: Any) -> None:
    """An empty ``permissions`` list counts as given, as on the real server (and the dev server)."""
    validation.privilege_rules(permissions, packed, field="permissions")


@pytest.mark.parametrize(("permissions", "packed"), [(None, None), ([], READ_DEV)])
def test_privilege_rules_refuses_neither_and_both(permissions: list[Any] | None, packed: Any) -> None:
    """Neither: the real 401 would read as an expired token. Both: ``permissions`` would be ignored."""
    refused = _refused_field(
        lambda: validation.privilege_rules(permissions, packed, field="privilegeDetails.permissions")
    )
    assert refused == "privilegeDetails.permissions"


def _item(**fields: Any) -> models.PermissionSent:
    return models.PermissionSent.model_validate({"action": "read", "subject": "secrets", **fields})


def _conditions(**fields: Any) -> dict[str, Any]:
    return {"conditions": models.PermissionConditions(**fields)}


V1_ACCEPTED = [
    _item(),
    _item(action="delete", subject="identity", inverted=False),
    _item(**_conditions(environment="dev")),
    _item(action="edit", **_conditions(environment="dev", secret_path=models.GlobPattern(glob="/a/**"))),
    _item(**_conditions()),
]


def test_v1_permissions_keep_every_accepted_shape() -> None:
    assert validation.v1_permissions(V1_ACCEPTED, field="permissions") == [p.to_wire() for p in V1_ACCEPTED]


@pytest.mark.parametrize(
    ("item", "field"),
    [
        (_item(action=["read"]), "action"),  # v1 takes one action (422)
        (_item(action="readValue"), "action"),  # a v2 action (422)
        (_item(action=None), "action"),
        (_item(subject=["secrets"]), "subject"),
        (_item(subject=None), "subject"),
        (_item(inverted=True), "inverted"),  # stripped: the deny rule would allow
        (_item(**_conditions(secret_name="A")), "conditions.secretName"),  # stripped: wider
        (_item(**_conditions(secret_tags=models.SecretTagsCondition(in_=["db"]))), "conditions.secretTags"),
        (_item(**_conditions(event_type="x")), "conditions.eventType"),
        (_item(**_conditions(secret_path="/x")), "conditions.secretPath"),  # not {$glob} (422)
        (_item(**_conditions(secret_path=models.GlobPattern(glob=""))), "conditions.secretPath"),
    ],
)
def test_v1_permissions_refuse(item: models.PermissionSent, field: str) -> None:
    items = [_item(), item]
    refused = _refused_field(lambda: validation.v1_permissions(items, field="privilegeDetails.permissions"))
    assert refused == f"privilegeDetails.permissions.1.{field}"


def test_privilege_permission_accepts_a_glob() -> None:
    packed = {**READ_DEV, "conditions": {"environment": "dev", "secretPath": {"$glob": "/x/**"}}}
    assert validation.privilege_permission(packed, field="privilegePermission") == packed


@pytest.mark.parametrize(
    ("packed", "field"),
    [
        ({**READ_DEV, "subject": "identity"}, "subject"),
        ({**READ_DEV, "actions": []}, "actions"),
        ({**READ_DEV, "actions": "read"}, "actions"),
        ({**READ_DEV, "actions": ["read", "lease"]}, "actions"),
        ({"actions": ["read"], "subject": "secrets"}, "conditions"),
        ({**READ_DEV, "conditions": {"secretPath": {"$glob": "/x"}}}, "conditions.environment"),
        ({**READ_DEV, "inverted": True}, "inverted"),  # stripped
        ({**READ_DEV, "conditions": {"environment": "dev", "secretName": "A"}}, "conditions.secretName"),
        ({**READ_DEV, "conditions": {"environment": "dev", "secretPath": "/x"}}, "conditions.secretPath"),
        (
            {**READ_DEV, "conditions": {"environment": "dev", "secretPath": {"$glob": "/x", "$eq": "/y"}}},
            "conditions.secretPath.$eq",
        ),
    ],
)
def test_privilege_permission_refuses(packed: dict[str, Any], field: str) -> None:
    refused = _refused_field(lambda: validation.privilege_permission(packed, field="privilegePermission"))
    assert refused == f"privilegePermission.{field}"


V2_ACCEPTED = [
    _item(action=["describeSecret", "readValue"], inverted=True),
    _item(
        **_conditions(
            environment="dev",
            secret_path="/app",
            secret_name="DB_*",
            secret_tags=models.SecretTagsCondition(in_=["db"]),
            event_type="x",
        )
    ),
    _item(action="lease", subject="dynamic-secrets", **_conditions(secret_path=models.GlobPattern(glob="*"))),
    _item(action="edit", subject="identity", inverted=True),
    _item(action="read", subject="role"),
]


def test_v2_permissions_keep_every_accepted_shape() -> None:
    assert validation.v2_permissions(V2_ACCEPTED, field="permissions") == [p.to_wire() for p in V2_ACCEPTED]


@pytest.mark.parametrize(
    ("item", "field"),
    [
        (_item(action=[]), "action"),
        (_item(action=None), "action"),
        (_item(subject=["secrets"]), "subject"),
        (_item(subject="role", inverted=True), "inverted"),  # stripped: the deny rule would allow
        (_item(subject="role", **_conditions(environment="dev")), "conditions.environment"),
        (_item(subject="identity", **_conditions(environment="dev")), "conditions.environment"),
        (_item(subject="secret-folders", **_conditions(secret_name="A")), "conditions.secretName"),
        (_item(**_conditions(secret_path="app")), "conditions.secretPath"),
        (_item(**_conditions(secret_tags=models.SecretTagsCondition(all_=["db"]))), "conditions.secretTags"),
        (_item(**_conditions(secret_tags=models.SecretTagsCondition())), "conditions.secretTags"),
    ],
)
def test_v2_permissions_refuse(item: models.PermissionSent, field: str) -> None:
    refused = _refused_field(lambda: validation.v2_permissions([item], field="permissions"))
    assert refused == f"permissions.0.{field}"


@pytest.mark.parametrize(
    ("kind", "sent"),
    [
        ({"isTemporary": False}, {"isTemporary": False}),
        (
            {**WINDOW, "temporaryAccessStartTime": START},
            {**WINDOW, "temporaryAccessStartTime": "2030-01-01T00:00:00Z"},
        ),
        (
            {**WINDOW, "temporaryAccessStartTime": "2030-01-01T00:00:00.5Z"},
            {**WINDOW, "temporaryAccessStartTime": "2030-01-01T00:00:00.5Z"},
        ),
    ],
)
def test_privilege_type_accepts(kind: dict[str, Any], sent: dict[str, Any]) -> None:
    assert validation.privilege_type(kind) == sent


@pytest.mark.parametrize(
    ("kind", "field"),
    [
        ({}, "isTemporary"),  # the real discriminated union: 422
        ({"isTemporary": "false"}, "isTemporary"),
        ({"isTemporary": 0}, "isTemporary"),
        ({"isTemporary": True}, "temporaryMode"),
        ({**WINDOW, "temporaryMode": "absolute", "temporaryAccessStartTime": START}, "temporaryMode"),
        ({**WINDOW, "temporaryRange": "1 hour", "temporaryAccessStartTime": START}, "temporaryRange"),
        (WINDOW, "temporaryAccessStartTime"),
        ({**WINDOW, "temporaryAccessStartTime": "2030-01-01T00:00:00+00:00"}, "temporaryAccessStartTime"),
        ({**WINDOW, "temporaryAccessStartTime": "2030-02-30T00:00:00Z"}, "temporaryAccessStartTime"),
        ({**WINDOW, "temporaryAccessStartTime": datetime.datetime(2030, 1, 1)}, "temporaryAccessStartTime"),
        ({"isTemporary": False, "temporaryRange": "1h"}, "temporaryRange"),  # would be dropped
        ({**WINDOW, "temporaryAccessStartTime": START, "extra": 1}, "extra"),
    ],
)
def test_privilege_type_refuses(kind: dict[str, Any], field: str) -> None:
    assert _refused_field(lambda: validation.privilege_type(kind)) == f"type.{field}"


@pytest.mark.parametrize("value", ["absolute", "", "Relative"])
def test_temporary_mode_refuses_unknown_modes(value: str) -> None:
    assert _refused_field(lambda: validation.temporary_mode(value)) == "temporaryMode"

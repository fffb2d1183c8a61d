"""Privilege calls refuse, before sending, what the real server would refuse or silently misread.

Each row goes through the public call over ``httpx.MockTransport`` and names the field; if its rule
is removed the request is sent (and the canned ``{}`` answer is a ``ProtocolError``, not the
``ValidationError`` expected here). What every rule protects against is in ``validation``.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from secretferry.service import client, errors, models

START = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
ADDRESS = {"identity_id": "i", "project_slug": "p"}
V1_ADDRESS = {"privilege_slug": "s", **ADDRESS}
WINDOW = {"temporary_range": "1h", "temporary_access_start_time": START}
READ = models.PermissionSent(action="read", subject="secrets")
READ_DEV = {"actions": ["read"], "subject": "secrets", "conditions": {"environment": "dev"}}
PERMANENT = {"isTemporary": False}

Call = Callable[[client.ServiceClient], Awaitable[Any]]


def _deny(**fields: Any) -> models.PermissionSent:
    return models.PermissionSent.model_validate({"action": "read", "subject": "secrets", **fields})


def _create(**fields: Any) -> Call:
    return lambda c: c.create_identity_privilege_temporary(**ADDRESS, **WINDOW, **fields)


def _update(**fields: Any) -> Call:
    return lambda c: c.update_identity_privilege(**V1_ADDRESS, **fields)


def _update_v2(**fields: Any) -> Call:
    return lambda c: c.update_identity_privilege_v2(
        "pr1", **{"slug": "s", "permissions": [READ], "type": PERMANENT, **fields}
    )


REFUSED: list[tuple[str, Call, str]] = [
    # 1. no rules: the real 401 would read as an expired token (and both: permissions ignored)
    ("create without rules", _create(), "permissions"),
    ("create with both forms", _create(permissions=[READ], privilege_permission=READ_DEV), "permissions"),
    ("update without rules", _update(slug="renamed"), "privilegeDetails.permissions"),
    (
        "update with both forms",
        _update(permissions=[], privilege_permission=READ_DEV),
        "privilegeDetails.permissions",
    ),
    # 2. v1 items: one basic action, no inverted, only environment and secretPath: {$glob}
    ("v1 action list", _create(permissions=[_deny(action=["read"])]), "permissions.0.action"),
    ("v1 inverted", _create(permissions=[READ, _deny(inverted=True)]), "permissions.1.inverted"),
    (
        "v1 secretName",
        _create(permissions=[_deny(conditions={"secretName": "A"})]),
        "permissions.0.conditions.secretName",
    ),
    (
        "v1 string secretPath",
        _update(permissions=[_deny(conditions={"secretPath": "/x"})]),
        "privilegeDetails.permissions.0.conditions.secretPath",
    ),
    (
        "v1 update inverted",
        _update(permissions=[_deny(inverted=True)]),
        "privilegeDetails.permissions.0.inverted",
    ),
    (
        "privilegePermission stripped condition",
        _create(privilege_permission={**READ_DEV, "conditions": {"environment": "dev", "secretName": "A"}}),
        "privilegePermission.conditions.secretName",
    ),
    (
        "v2 inverted on a subject without conditions",
        _update_v2(permissions=[_deny(subject="role", inverted=True)]),
        "permissions.0.inverted",
    ),
    # 3. slugs: lowercase letters, digits and single hyphens
    ("create slug", _create(slug="Bad_Slug", permissions=[READ]), "slug"),
    ("update slug", _update(slug="a--b", permissions=[READ]), "privilegeDetails.slug"),
    ("v2 slug", _update_v2(slug=" padded "), "slug"),
    # 4. the v2 type: {isTemporary: false} or a whole temporary window
    ("v2 empty type", _update_v2(type={}), "type.isTemporary"),
    (
        "v2 window without a start",
        _update_v2(type={"isTemporary": True, "temporaryMode": "relative", "temporaryRange": "1h"}),
        "type.temporaryAccessStartTime",
    ),
]


@pytest.mark.parametrize(("call", "field"), [row[1:] for row in REFUSED], ids=[row[0] for row in REFUSED])
async def test_refused_before_sending(call: Call, field: str) -> None:
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, json={})

    transport = httpx.MockTransport(answer)
    async with client.ServiceClient("https://sf.example", access_token="t", transport=transport) as service:
        with pytest.raises(errors.ValidationError) as info:
            await call(service)
    assert info.value.field == field and info.value.status_code is None
    assert requests == []

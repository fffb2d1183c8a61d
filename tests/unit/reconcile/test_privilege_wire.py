"""TemporaryPrivilege's wire forms, checked against the in-process dev server (which refuses and
strips what the real server does): what the operator sends is accepted and kept as sent, and what
it reads back compares equal to the spec, so a privilege at rest is never updated again."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from secretferry.devserver.app import create_app
from secretferry.devserver.config import DevServerConfig
from secretferry.models import temporaryprivilege as tp
from secretferry.reconcile.privileges import wire
from secretferry.service import client

TOKEN = "admin-token"
TARGET = "aaaaaaaa-0000-4000-8000-00000000000b"
START = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
SEED: dict[str, Any] = {
    "organizations": [{"id": "org-1", "name": "Org", "slug": "org"}],
    "projects": [
        {
            "id": "22222222-2222-4222-8222-222222222222",
            "slug": "proj",
            "environments": [{"slug": "dev", "name": "Dev"}],
        }
    ],
    "identities": [
        {
            "id": "aaaaaaaa-0000-4000-8000-00000000000a",
            "name": "admin",
            "organization": "org",
            "accessTokens": [{"token": TOKEN}],
            "projects": [{"project": "proj", "role": "admin"}],
        },
        {
            "id": TARGET,
            "name": "target",
            "organization": "org",
            "projects": [{"project": "proj", "role": "no-access"}],
        },
    ],
}


def spec(permissions: list[dict[str, Any]], **window: Any) -> tp.TemporaryPrivilegeSpec:
    return tp.TemporaryPrivilegeSpec.model_validate(
        {
            "granterRef": {"name": "g"},
            "identityId": TARGET,
            "projectSlug": "proj",
            "permissions": permissions,
            **(window or {"temporaryRange": "1h"}),
        }
    )


READ_PATH = {
    "actions": ["read"],
    "subject": "secrets",
    "conditions": {"environment": "dev", "secretPath": "/a/**"},
}
TWO_BASIC = {"actions": ["read", "edit"], "subject": "secret-folders", "conditions": {"environment": "dev"}}
RICH = {
    "actions": ["describeSecret", "readValue"],
    "subject": "secrets",
    "inverted": True,
    "conditions": {"environment": "dev", "secretName": "DB_PASSWORD", "secretTags": ["db"]},
}
EVENTS = {"actions": ["subscribe-on-updated"], "subject": "secret-events", "conditions": {"secretPath": "/a"}}
NO_CONDITIONS = {"actions": ["read"], "subject": "identity"}


@pytest.fixture
async def service() -> AsyncIterator[client.ServiceClient]:
    app = create_app(DevServerConfig(seed=SEED, admin_token="unused"))
    transport = httpx.ASGITransport(app=app)
    async with client.ServiceClient("http://dev.test", access_token=TOKEN, transport=transport) as api:
        yield api


@pytest.mark.parametrize(
    ("permissions", "fits"),
    [
        ([READ_PATH], True),
        ([READ_PATH, TWO_BASIC], True),  # two actions: two v1 items
        ([RICH], False),  # non-basic actions, inverted, secretName, secretTags
        ([EVENTS], False),  # a subject's own action
        ([{**READ_PATH, "inverted": True}], False),
    ],
)
def test_fits_v1(permissions: list[dict[str, Any]], fits: bool) -> None:
    assert wire.fits_v1(spec(permissions).permissions) is fits


def test_v1_items_spell_out_one_action_each() -> None:
    items = wire.v1_items(spec([TWO_BASIC]).permissions)
    assert [i.to_wire() for i in items] == [
        {"action": "read", "subject": "secret-folders", "conditions": {"environment": "dev"}},
        {"action": "edit", "subject": "secret-folders", "conditions": {"environment": "dev"}},
    ]


async def test_a_v1_create_reads_back_equal(service: client.ServiceClient) -> None:
    s = spec([READ_PATH, TWO_BASIC])
    created = await service.create_identity_privilege_temporary(
        identity_id=TARGET,
        project_slug="proj",
        slug="p",
        temporary_range="1h",
        temporary_access_start_time=START,
        permissions=wire.v1_items(s.permissions),
    )
    assert wire.difference(created, s, start=START) is None
    listed = await service.list_identity_privileges(identity_id=TARGET, project_slug="proj")
    assert [wire.difference(p, s, start=START) for p in listed] == [None]
    assert created.temporary_access_end_time == START + datetime.timedelta(hours=1)


@pytest.mark.parametrize("permissions", [[RICH, EVENTS, NO_CONDITIONS], [READ_PATH]])
async def test_an_empty_create_then_v2_update_reads_back_equal(
    service: client.ServiceClient, permissions: list[dict[str, Any]]
) -> None:
    """The path for rules v1 cannot carry: nothing granted by the create, all by the update."""
    s = spec(permissions, temporaryRange="30m")
    created = await service.create_identity_privilege_temporary(
        identity_id=TARGET,
        project_slug="proj",
        slug="p",
        temporary_range="30m",
        temporary_access_start_time=START,
        permissions=[],
    )
    assert created.permissions == [] and wire.difference(created, s, start=START) == "permissions"
    assert created.id is not None
    updated = await service.update_identity_privilege_v2(
        created.id, slug="p", permissions=wire.v2_items(s.permissions), type=wire.v2_type(s, START)
    )
    assert wire.difference(updated, s, start=START) is None
    listed = await service.list_identity_privileges(identity_id=TARGET, project_slug="proj")
    assert wire.difference(listed[0], s, start=START) is None


async def test_permanent_via_v2_reads_back_equal(service: client.ServiceClient) -> None:
    s = spec([READ_PATH], permanent=True)
    created = await service.create_identity_privilege_temporary(
        identity_id=TARGET,
        project_slug="proj",
        slug="p",
        temporary_range="1m",
        temporary_access_start_time=START,
        permissions=[],
    )
    assert created.id is not None
    updated = await service.update_identity_privilege_v2(
        created.id, slug="p", permissions=wire.v2_items(s.permissions), type=wire.v2_type(s, START)
    )
    assert not updated.is_temporary and wire.difference(updated, s, start=START) is None


@pytest.mark.parametrize(
    ("change", "what"),
    [
        (
            {"permissions": [{**READ_PATH, "conditions": {"environment": "dev", "secretPath": "/b"}}]},
            "permissions",
        ),
        ({"permissions": [{**READ_PATH, "actions": ["read", "edit"]}]}, "permissions"),
        ({"temporaryRange": "2h"}, "temporaryRange"),
        ({"temporaryRange": None, "permanent": True}, "window (permanent)"),
    ],
)
async def test_a_spec_change_is_a_difference(
    service: client.ServiceClient, change: dict[str, Any], what: str
) -> None:
    s = spec([READ_PATH])
    created = await service.create_identity_privilege_temporary(
        identity_id=TARGET,
        project_slug="proj",
        slug="p",
        temporary_range="1h",
        temporary_access_start_time=START,
        permissions=wire.v1_items(s.permissions),
    )
    body = {**s.model_dump(by_alias=True, exclude_none=True), **change}
    changed = tp.TemporaryPrivilegeSpec.model_validate({k: v for k, v in body.items() if v is not None})
    assert wire.difference(created, changed, start=START) == what
    later = START + datetime.timedelta(minutes=5)
    assert wire.difference(created, s, start=later) == "temporaryAccessStartTime"

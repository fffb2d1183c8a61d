"""Privilege requests the client can build are accepted AND kept as sent by the in-process dev server
(which refuses and strips what the real server does); what the client refuses, the dev server
refuses or misreads.

A valid request that the client refused, or a refusal the server would not make, fails here.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from secretferry.devserver.app import create_app
from secretferry.devserver.config import DevServerConfig
from secretferry.service import client, errors, models

TOKEN = "admin-token"
TARGET = "aaaaaaaa-0000-4000-8000-00000000000b"
ADDRESS = {"identity_id": TARGET, "project_slug": "proj"}
START = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
V1 = "/api/v1/additional-privilege/identity"
V2 = "/api/v2/identity-project-additional-privilege"
SEED: dict[str, Any] = {
    "organizations": [{"id": "org-1", "name": "Org", "slug": "org"}],
    "projects": [
        {
            "id": "22222222-2222-4222-8222-222222222222",
            "slug": "proj",
            "environments": [{"slug": "dev", "name": "Dev"}, {"slug": "prod", "name": "Prod"}],
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
            "projects": [
                {
                    "project": "proj",
                    "role": "viewer",
                    "privileges": [
                        {
                            "id": "priv-1",
                            "slug": "seeded",
                            "permissions": [{"action": "read", "subject": "role"}],
                        }
                    ],
                }
            ],
        },
    ],
}


def _conditions(**fields: Any) -> models.PermissionConditions:
    return models.PermissionConditions(**fields)


V1_ITEMS = [
    models.PermissionSent(
        action="read",
        subject="secrets",
        conditions=_conditions(environment="dev", secret_path=models.GlobPattern(glob="/app/**")),
    ),
    models.PermissionSent(action="edit", subject="secret-folders", inverted=False, conditions=_conditions()),
    models.PermissionSent(action="create", subject="secrets", conditions=_conditions(environment="prod")),
    models.PermissionSent(action="delete", subject="identity"),
]
V2_ITEMS = [
    models.PermissionSent(
        action=["describeSecret", "readValue"],
        subject="secrets",
        inverted=True,
        conditions=_conditions(
            environment="dev",
            secret_path="/app",
            secret_name="DB_*",
            secret_tags=models.SecretTagsCondition(in_=["db"]),
            event_type="x",
        ),
    ),
    models.PermissionSent(
        action="subscribe-on-updated",
        subject="secret-events",
        conditions=_conditions(environment="dev", secret_path=models.GlobPattern(glob="/app/**")),
    ),
    models.PermissionSent(action="edit", subject="identity", inverted=True),
    models.PermissionSent(action="read", subject="role"),
]
PACKED = {
    "actions": ["read", "create"],
    "subject": "secrets",
    "conditions": {"environment": "dev", "secretPath": {"$glob": "/x/**"}},
}


def _as_stored(items: list[models.PermissionSent]) -> list[tuple[Any, ...]]:
    """One rule per action, conditions and inverted exactly as sent: nothing dropped or added."""
    rules = []
    for item in items:
        wire = item.to_wire()
        actions = wire["action"] if isinstance(wire["action"], list) else [wire["action"]]
        for action in actions:
            rules.append((action, wire["subject"], wire.get("conditions", {}), wire.get("inverted", False)))
    return rules


def _stored(privilege: models.IdentityPrivilege) -> list[tuple[Any, ...]]:
    return [(p.action, p.subject, p.conditions, p.inverted) for p in privilege.permissions]


@pytest.fixture
async def service() -> AsyncIterator[client.ServiceClient]:
    app = create_app(DevServerConfig(seed=SEED, admin_token="unused"))
    transport = httpx.ASGITransport(app=app)
    async with client.ServiceClient("http://dev.test", access_token=TOKEN, transport=transport) as api:
        yield api


async def test_v1_create_and_update_are_accepted_as_sent(service: client.ServiceClient) -> None:
    created = await service.create_identity_privilege_temporary(
        **ADDRESS,
        slug="v1-items",
        temporary_range="2h",
        temporary_access_start_time=START,
        permissions=V1_ITEMS,
    )
    assert created.slug == "v1-items" and _stored(created) == _as_stored(V1_ITEMS)
    packed = await service.create_identity_privilege_temporary(
        **ADDRESS,
        slug="packed-2",
        temporary_range="1d",
        temporary_access_start_time=START,
        privilege_permission=PACKED,
    )
    assert _stored(packed) == [(a, "secrets", PACKED["conditions"], False) for a in PACKED["actions"]]
    empty = await service.create_identity_privilege_temporary(
        **ADDRESS, temporary_range="30m", temporary_access_start_time=START, permissions=[]
    )
    assert empty.permissions == []

    updated = await service.update_identity_privilege(
        privilege_slug="v1-items",
        **ADDRESS,
        slug="v1-renamed",
        permissions=V1_ITEMS[:2],
        temporary_mode="relative",
        temporary_range="45m",
        temporary_access_start_time=START,
    )
    assert (updated.id, updated.slug, _stored(updated)) == (
        created.id,
        "v1-renamed",
        _as_stored(V1_ITEMS[:2]),
    )
    assert updated.temporary_access_end_time == START + datetime.timedelta(minutes=45)
    repacked = await service.update_identity_privilege(
        privilege_slug="seeded", **ADDRESS, privilege_permission=PACKED, is_temporary=False
    )
    assert _stored(repacked) == _stored(packed) and not repacked.is_temporary


async def test_v2_updates_are_accepted_as_sent(service: client.ServiceClient) -> None:
    permanent = await service.update_identity_privilege_v2(
        "priv-1", slug="v2-items", permissions=V2_ITEMS, type={"isTemporary": False}
    )
    assert permanent.slug == "v2-items" and not permanent.is_temporary
    assert _stored(permanent) == _as_stored(V2_ITEMS)
    window = {"isTemporary": True, "temporaryMode": "relative", "temporaryRange": "1h"}
    for start in (START, "2030-01-01T00:00:00Z"):
        temporary = await service.update_identity_privilege_v2(
            "priv-1", slug="v2-window", permissions=[], type={**window, "temporaryAccessStartTime": start}
        )
        assert temporary.is_temporary and temporary.temporary_access_start_time == START
        assert temporary.temporary_access_end_time == START + datetime.timedelta(hours=1)


# Raw bodies the client refuses to build, sent past it: each is refused, or kept otherwise than sent.
V1_REFUSED = [
    {"action": ["read"], "subject": "secrets"},
    {"action": "read", "subject": "secrets", "inverted": True},
    {"action": "read", "subject": "secrets", "conditions": {"environment": "dev", "secretName": "A"}},
    {"action": "read", "subject": "secrets", "conditions": {"secretTags": {"$in": ["db"]}}},
    {"action": "read", "subject": "secrets", "conditions": {"eventType": "x"}},
    {"action": "read", "subject": "secrets", "conditions": {"secretPath": "/x"}},
]
V2_REFUSED = [
    {"action": "read", "subject": "role", "inverted": True},
    {"action": "read", "subject": "secret-folders", "conditions": {"secretName": "A"}},
    {"action": "read", "subject": "secrets", "conditions": {"secretTags": {"$all": ["db"]}}},
    {"action": "read", "subject": "secrets", "conditions": {"secretPath": "app"}},
    {"action": [], "subject": "secrets"},
]


def _refused_or_misread(response: httpx.Response, sent: dict[str, Any]) -> bool:
    if response.status_code >= 400:
        return True
    (stored,) = response.json()["privilege"]["permissions"]
    return bool(
        stored["inverted"] != sent.get("inverted", False)
        or stored["conditions"] != sent.get("conditions", {})
    )


async def _raw(method: str, path: str, body: dict[str, Any]) -> httpx.Response:
    app = create_app(DevServerConfig(seed=SEED, admin_token="unused"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dev.test") as raw:
        return await raw.request(method, path, json=body, headers={"Authorization": f"Bearer {TOKEN}"})


@pytest.mark.parametrize("item", V1_REFUSED)
async def test_refused_v1_items_are_refused_or_misread_by_the_server(
    service: client.ServiceClient, item: dict[str, Any]
) -> None:
    with pytest.raises(errors.ValidationError):
        await service.create_identity_privilege_temporary(
            **ADDRESS,
            temporary_range="1h",
            temporary_access_start_time=START,
            permissions=[models.PermissionSent.model_validate(item)],
        )
    body = {
        "identityId": TARGET,
        "projectSlug": "proj",
        "temporaryMode": "relative",
        "temporaryRange": "1h",
        "temporaryAccessStartTime": "2030-01-01T00:00:00Z",
        "permissions": [item],
    }
    assert _refused_or_misread(await _raw("POST", f"{V1}/temporary", body), item)


@pytest.mark.parametrize("item", V2_REFUSED)
async def test_refused_v2_items_are_refused_or_misread_by_the_server(
    service: client.ServiceClient, item: dict[str, Any]
) -> None:
    with pytest.raises(errors.ValidationError):
        await service.update_identity_privilege_v2(
            "priv-1",
            slug="x",
            permissions=[models.PermissionSent.model_validate(item)],
            type={"isTemporary": False},
        )
    body = {"slug": "x", "permissions": [item], "type": {"isTemporary": False}}
    assert _refused_or_misread(await _raw("PATCH", f"{V2}/priv-1", body), item)


@pytest.mark.parametrize(
    "body",
    [
        {"slug": "Bad_Slug", "permissions": [], "type": {"isTemporary": False}},
        {"slug": "x", "permissions": [], "type": {}},
        {"slug": "x", "permissions": [], "type": {"isTemporary": True, "temporaryRange": "1h"}},
    ],
)
async def test_refused_v2_bodies_are_refused_by_the_server(
    service: client.ServiceClient, body: dict[str, Any]
) -> None:
    with pytest.raises(errors.ValidationError):
        await service.update_identity_privilege_v2(
            "priv-1", slug=body["slug"], permissions=[], type=body["type"]
        )
    assert (await _raw("PATCH", f"{V2}/priv-1", body)).status_code == 422


async def test_v1_without_rules_is_refused_by_the_server(service: client.ServiceClient) -> None:
    with pytest.raises(errors.ValidationError):
        await service.update_identity_privilege(privilege_slug="seeded", **ADDRESS, slug="renamed")
    body = {
        "privilegeSlug": "seeded",
        "identityId": TARGET,
        "projectSlug": "proj",
        "privilegeDetails": {"slug": "renamed"},
    }
    assert (await _raw("PATCH", V1, body)).status_code == 401

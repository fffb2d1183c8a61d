"""Identity privilege routes refuse what the real routers refuse (docs/service-contract.md, "Strictness").

Slugs, permission names and shapes, the "permissions or privilegePermission" rule, temporary
windows, and the identity permissions each route needs; each test fails if its rule is removed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from devserver_fixtures import ADMIN, ADMIN_ID, LIMITED, LIMITED_ID, SEED, VIEWER, VIEWER_ID
from fastapi import FastAPI

V1 = "/api/v1/additional-privilege/identity"
V2 = "/api/v2/identity-project-additional-privilege"
READ_DEV = {"actions": ["read"], "subject": "secrets", "conditions": {"environment": "dev"}}


def temporary(**change: Any) -> dict[str, Any]:
    body = {
        "identityId": VIEWER_ID,
        "projectSlug": "proj",
        "temporaryMode": "relative",
        "temporaryRange": "1h",
        "temporaryAccessStartTime": "2026-01-01T00:00:00Z",
        "privilegePermission": READ_DEV,
    }
    body.update(change)
    return {k: v for k, v in body.items() if v is not None}


def v2_body(**change: Any) -> dict[str, Any]:
    return {
        "slug": "renamed",
        "permissions": [{"action": "read", "subject": "secrets"}],
        "type": {"isTemporary": False},
    } | change


def issue_paths(response: httpx.Response) -> list[list[object]]:
    assert response.status_code == 422, response.text
    assert isinstance(response.json()["message"], list)
    return [issue["path"] for issue in response.json()["message"]]


def client_for(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dev")


# --- slugs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "slug",
    ["x" * 61, "", "   ", "Upper", "a_b", "a--b", "-a", "a-", "a.b", "ä"],
    ids=["61", "empty", "blank", "upper", "underscore", "double-hyphen", "lead", "trail", "dot", "non-ascii"],
)
async def test_bad_slugs_are_422(client: httpx.AsyncClient, slug: str) -> None:
    created = await client.post(f"{V1}/temporary", json=temporary(slug=slug), headers=ADMIN)
    assert issue_paths(created) == [["slug"]]
    renamed = await client.patch(f"{V2}/priv-1", json=v2_body(slug=slug), headers=ADMIN)
    assert issue_paths(renamed) == [["slug"]]
    details = {"slug": slug, "privilegePermission": READ_DEV}
    body = {
        "privilegeSlug": "app-only",
        "identityId": LIMITED_ID,
        "projectSlug": "proj",
        "privilegeDetails": details,
    }
    assert issue_paths(await client.patch(V1, json=body, headers=ADMIN)) == [["privilegeDetails", "slug"]]


@pytest.mark.parametrize(("slug", "stored"), [("x" * 60, "x" * 60), (" ok-slug-2 ", "ok-slug-2"), ("a", "a")])
async def test_good_slugs_are_kept_trimmed(client: httpx.AsyncClient, slug: str, stored: str) -> None:
    created = await client.post(f"{V1}/temporary", json=temporary(slug=slug), headers=ADMIN)
    assert created.status_code == 200 and created.json()["privilege"]["slug"] == stored


# --- permissions or privilegePermission ------------------------------------------------------------


async def test_create_without_rules_is_401(client: httpx.AsyncClient) -> None:
    r = await client.post(f"{V1}/temporary", json=temporary(privilegePermission=None), headers=ADMIN)
    assert r.status_code == 401 and r.json()["error"] == "UnauthorizedError"
    assert r.json()["message"] == "Permission or privilegePermission must be provided"


async def test_update_without_rules_is_401(client: httpx.AsyncClient) -> None:
    details = {"slug": "renamed"}
    body = {
        "privilegeSlug": "app-only",
        "identityId": LIMITED_ID,
        "projectSlug": "proj",
        "privilegeDetails": details,
    }
    r = await client.patch(V1, json=body, headers=ADMIN)
    assert (
        r.status_code == 401 and r.json()["message"] == "Permission or privilegePermission must be provided"
    )


async def test_an_empty_permissions_list_counts_as_given(client: httpx.AsyncClient) -> None:
    body = temporary(privilegePermission=None, permissions=[])
    r = await client.post(f"{V1}/temporary", json=body, headers=ADMIN)
    assert r.status_code == 200 and r.json()["privilege"]["permissions"] == []


# --- permission names and shapes -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "path"),
    [
        ({"action": ["read"], "subject": "secrets"}, ["permissions", 0, "action"]),  # one action in v1
        ({"action": "write", "subject": "secrets"}, ["permissions", 0, "action"]),
        ({"action": "readValue", "subject": "secrets"}, ["permissions", 0, "action"]),  # a v2 action
        ({"action": "read", "subject": "secret"}, ["permissions", 0, "subject"]),
        ({"subject": "secrets"}, ["permissions", 0, "action"]),
        ({"action": "read", "subject": "secrets", "conditions": {"secretPath": "/x"}}, None),
        ({"action": "read", "subject": "secrets", "conditions": {"secretPath": {"$glob": ""}}}, None),
        ({"action": "read", "subject": "secrets", "conditions": {"environment": ["dev"]}}, None),
        ("read secrets", ["permissions", 0]),
    ],
)
async def test_v1_permission_items_use_real_names_and_shapes(
    client: httpx.AsyncClient, item: Any, path: list[object] | None
) -> None:
    r = await client.post(
        f"{V1}/temporary", json=temporary(privilegePermission=None, permissions=[item]), headers=ADMIN
    )
    paths = issue_paths(r)
    assert len(paths) == 1 and (path is None or paths == [path])


async def test_v1_items_lose_what_their_schema_does_not_name(client: httpx.AsyncClient) -> None:
    """zod strips ``inverted``, unknown conditions and operators from a v1 item: so does the dev server."""
    item = {
        "action": "read",
        "subject": "identity",
        "inverted": True,
        "conditions": {
            "environment": "dev",
            "secretName": "A",
            "secretPath": {"$glob": "/x/**", "$eq": "/y"},
        },
    }
    r = await client.post(
        f"{V1}/temporary", json=temporary(privilegePermission=None, permissions=[item]), headers=ADMIN
    )
    (stored,) = r.json()["privilege"]["permissions"]
    assert stored == {
        "action": "read",
        "subject": "identity",
        "conditions": {"environment": "dev", "secretPath": {"$glob": "/x/**"}},
        "inverted": False,
    }


@pytest.mark.parametrize(
    ("packed", "path"),
    [
        ({**READ_DEV, "subject": "identity"}, ["privilegePermission", "subject"]),
        ({**READ_DEV, "actions": []}, ["privilegePermission", "actions"]),
        ({**READ_DEV, "actions": "read"}, ["privilegePermission", "actions"]),
        ({**READ_DEV, "actions": ["read", "lease"]}, ["privilegePermission", "actions", 1]),
        ({"actions": ["read"], "subject": "secrets"}, ["privilegePermission", "conditions"]),
        (
            {**READ_DEV, "conditions": {"secretPath": {"$glob": "/x"}}},
            ["privilegePermission", "conditions", "environment"],
        ),
    ],
)
async def test_privilege_permission_is_secrets_in_one_environment(
    client: httpx.AsyncClient, packed: dict[str, Any], path: list[object]
) -> None:
    r = await client.post(f"{V1}/temporary", json=temporary(privilegePermission=packed), headers=ADMIN)
    assert issue_paths(r) == [path]


@pytest.mark.parametrize(
    ("item", "path"),
    [
        ({"action": "read", "subject": "secret"}, ["permissions", 0, "subject"]),
        ({"action": "read"}, ["permissions", 0, "subject"]),
        ({"action": "lease", "subject": "secrets"}, ["permissions", 0, "action"]),
        ({"action": [], "subject": "secrets"}, ["permissions", 0, "action"]),
        ({"action": "subscribe", "subject": "secret-events"}, ["permissions", 0, "action"]),
        ({"action": "read", "subject": "secrets", "conditions": {"secretPath": "app"}}, None),
        ({"action": "read", "subject": "secrets", "conditions": {"secretPath": {"$eq": "app"}}}, None),
        ({"action": "read", "subject": "secrets", "conditions": {"environment": 3}}, None),
        ({"action": "read", "subject": "secrets", "inverted": "yes"}, ["permissions", 0, "inverted"]),
    ],
)
async def test_v2_permission_items_use_real_names_and_shapes(
    client: httpx.AsyncClient, item: dict[str, Any], path: list[object] | None
) -> None:
    r = await client.patch(f"{V2}/priv-1", json=v2_body(permissions=[item]), headers=ADMIN)
    paths = issue_paths(r)
    assert len(paths) == 1 and (path is None or paths[0][: len(path)] == path)


@pytest.mark.parametrize(
    "item",
    [
        {"action": ["describeSecret", "readValue"], "subject": "secrets"},
        {"action": "lease", "subject": "dynamic-secrets", "conditions": {"environment": {"$glob": "d*"}}},
        {"action": "subscribe-on-updated", "subject": "secret-events", "inverted": True},
        {"action": "grant-privileges", "subject": "identity", "conditions": {"identityId": {"$in": ["a"]}}},
        {
            "action": "read",
            "subject": "secrets",
            "conditions": {"secretTags": {"$in": ["db"]}, "eventType": "x"},
        },
    ],
)
async def test_v2_accepts_real_names(client: httpx.AsyncClient, item: dict[str, Any]) -> None:
    r = await client.patch(f"{V2}/priv-1", json=v2_body(permissions=[item]), headers=ADMIN)
    assert r.status_code == 200, r.text


async def test_v2_legacy_read_with_its_replacements_is_400(client: httpx.AsyncClient) -> None:
    item = {"action": ["read", "readValue"], "subject": "secrets"}
    r = await client.patch(f"{V2}/priv-1", json=v2_body(permissions=[item]), headers=ADMIN)
    assert r.status_code == 400 and "legacy action" in r.json()["message"]


@pytest.mark.parametrize(
    "kind",
    [
        {},
        {"isTemporary": "false"},
        {"isTemporary": 0},
        {"isTemporary": True},  # a temporary type needs its mode, range and start
        {"isTemporary": True, "temporaryMode": "relative", "temporaryRange": "1h"},
    ],
)
async def test_v2_type_is_a_discriminated_union(client: httpx.AsyncClient, kind: dict[str, Any]) -> None:
    r = await client.patch(f"{V2}/priv-1", json=v2_body(type=kind), headers=ADMIN)
    assert all(path[0] == "type" for path in issue_paths(r))


# --- temporary windows -----------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["abc", "0h", "-1h", "", "1 fortnight", "1mo", "h", "1." + "1" * 100])
async def test_bad_temporary_range_is_422(client: httpx.AsyncClient, value: str) -> None:
    r = await client.post(f"{V1}/temporary", json=temporary(temporaryRange=value), headers=ADMIN)
    assert issue_paths(r) == [["temporaryRange"]]
    kind = {"isTemporary": True, "temporaryMode": "relative", "temporaryRange": value}
    kind["temporaryAccessStartTime"] = "2026-01-01T00:00:00Z"
    assert issue_paths(await client.patch(f"{V2}/priv-1", json=v2_body(type=kind), headers=ADMIN))


@pytest.mark.parametrize(
    ("value", "end"),
    [
        ("1h", "2026-01-01T01:00:00.000Z"),
        ("30m", "2026-01-01T00:30:00.000Z"),
        ("1 hour", "2026-01-01T01:00:00.000Z"),
        ("2 Days", "2026-01-03T00:00:00.000Z"),
        ("1.5h", "2026-01-01T01:30:00.000Z"),
        ("1500", "2026-01-01T00:00:01.500Z"),  # a bare number is milliseconds
        ("1w", "2026-01-08T00:00:00.000Z"),
    ],
)
async def test_ms_durations_are_read_like_ms(client: httpx.AsyncClient, value: str, end: str) -> None:
    r = await client.post(f"{V1}/temporary", json=temporary(temporaryRange=value), headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["privilege"]["temporaryAccessEndTime"] == end


@pytest.mark.parametrize(
    "value",
    [
        "2026-01-01T00:00:00+00:00",  # zod's datetime() takes Z only
        "2026-01-01",
        "2026-01-01T00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01 00:00:00Z",
        "soon",
    ],
)
async def test_bad_start_time_is_422(client: httpx.AsyncClient, value: str) -> None:
    r = await client.post(f"{V1}/temporary", json=temporary(temporaryAccessStartTime=value), headers=ADMIN)
    assert issue_paths(r) == [["temporaryAccessStartTime"]]


async def test_start_time_with_a_fraction_is_accepted(client: httpx.AsyncClient) -> None:
    body = temporary(temporaryAccessStartTime="2026-01-01T00:00:00.123456Z", temporaryRange="1s")
    r = await client.post(f"{V1}/temporary", json=body, headers=ADMIN)
    assert r.json()["privilege"]["temporaryAccessEndTime"] == "2026-01-01T00:00:01.123Z"


async def test_v1_update_checks_the_window_too(client: httpx.AsyncClient) -> None:
    details = {"privilegePermission": READ_DEV, "temporaryRange": "soon", "temporaryAccessStartTime": "today"}
    body = {
        "privilegeSlug": "app-only",
        "identityId": LIMITED_ID,
        "projectSlug": "proj",
        "privilegeDetails": details,
    }
    paths = issue_paths(await client.patch(V1, json=body, headers=ADMIN))
    assert paths == [["privilegeDetails", "temporaryRange"], ["privilegeDetails", "temporaryAccessStartTime"]]
    details = {"privilegePermission": READ_DEV, "isTemporary": "yes"}
    body["privilegeDetails"] = details
    assert issue_paths(await client.patch(V1, json=body, headers=ADMIN)) == [
        ["privilegeDetails", "isTemporary"]
    ]


async def test_a_temporary_window_is_not_filled_in(client: httpx.AsyncClient) -> None:
    """Turning a permanent privilege temporary without mode, range and start: unknown → refused."""
    details = {"privilegePermission": READ_DEV, "isTemporary": True}
    body = {
        "privilegeSlug": "app-only",
        "identityId": LIMITED_ID,
        "projectSlug": "proj",
        "privilegeDetails": details,
    }
    assert (await client.patch(V1, json=body, headers=ADMIN)).status_code == 400


# --- who may read and change privileges ------------------------------------------------------------


async def test_reads_need_identity_read(client: httpx.AsyncClient) -> None:
    query = {"identityId": LIMITED_ID, "projectSlug": "proj"}
    denied = await client.get(V1, params={"identityId": VIEWER_ID, "projectSlug": "proj"}, headers=LIMITED)
    assert denied.status_code == 403 and denied.json()["details"][0]["action"] == "read"
    assert denied.json()["details"][0]["subject"] == "identity"
    assert (await client.get(f"{V1}/app-only", params=query, headers=LIMITED)).status_code == 403
    viewer = await client.get(V1, params=query, headers=VIEWER)  # viewers may read identities
    assert viewer.status_code == 200 and [p["slug"] for p in viewer.json()["privileges"]] == ["app-only"]


async def test_changes_need_edit_and_grant(client: httpx.AsyncClient) -> None:
    r = await client.post(f"{V1}/temporary", json=temporary(identityId=LIMITED_ID), headers=VIEWER)
    assert r.status_code == 403 and r.json()["details"][0]["action"] == "edit"
    assert (await client.patch(f"{V2}/priv-1", json=v2_body(), headers=VIEWER)).status_code == 403
    assert (await client.delete(f"{V2}/priv-1", headers=VIEWER)).status_code == 403


def seed_with(grants: list[dict[str, Any]], *, role: str = "no-access") -> dict[str, Any]:
    seed = copy.deepcopy(SEED)
    limited = seed["identities"][2]["projects"][0]
    limited["role"] = role
    limited["privileges"].append({"slug": "identity-rights", "permissions": grants})
    return seed


async def test_identity_rules_follow_their_identity_id(make_app: Callable[..., FastAPI]) -> None:
    rule = {"action": ["read"], "subject": "identity", "conditions": {"identityId": VIEWER_ID}}
    async with client_for(make_app(seed=seed_with([rule]))) as c:
        own = await c.get(V1, params={"identityId": VIEWER_ID, "projectSlug": "proj"}, headers=LIMITED)
        assert own.status_code == 200
        other = await c.get(V1, params={"identityId": ADMIN_ID, "projectSlug": "proj"}, headers=LIMITED)
        assert other.status_code == 403


async def test_edit_without_grant_privileges_is_a_boundary_error(make_app: Callable[..., FastAPI]) -> None:
    async with client_for(make_app(seed=seed_with([], role="member"))) as c:
        r = await c.post(f"{V1}/temporary", json=temporary(), headers=LIMITED)
        assert r.status_code == 403 and r.json()["error"] == "PermissionBoundaryError"
    grant = {"action": ["grant-privileges"], "subject": "identity"}
    async with client_for(make_app(seed=seed_with([grant], role="member"))) as c:
        assert (await c.post(f"{V1}/temporary", json=temporary(), headers=LIMITED)).status_code == 200


async def test_a_non_member_target_is_400(client: httpx.AsyncClient) -> None:
    r = await client.get(V1, params={"identityId": "no-such-identity", "projectSlug": "proj"}, headers=ADMIN)
    assert r.status_code == 400 and r.json()["message"] == "Actor doesn't have membership"

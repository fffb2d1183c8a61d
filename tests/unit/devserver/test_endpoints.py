"""Writes, folders, imports, privileges (v1/v2), removals, memberships, dynamic secrets, errors, limits."""

from __future__ import annotations

import copy
from collections.abc import Callable

import httpx
import pytest
from devserver_fixtures import (
    ADMIN,
    ADMIN_ID,
    LIMITED,
    LIMITED_ID,
    OUTSIDER,
    PROJECT,
    SEED,
    VIEWER,
    VIEWER_ID,
)
from fastapi import FastAPI

SECRETS = "/api/v4/secrets"
V1 = "/api/v1/additional-privilege/identity"


async def test_v4_create_update_rename_delete(client: httpx.AsyncClient) -> None:
    body = {"projectId": PROJECT, "environment": "dev", "secretPath": "/new", "secretValue": "v"}
    created = await client.post(f"{SECRETS}/NEW", json={**body, "tagIds": ["db"]}, headers=ADMIN)
    assert created.status_code == 200 and created.json()["secret"]["secretKey"] == "NEW"
    assert (await client.post(f"{SECRETS}/NEW", json=body, headers=ADMIN)).status_code == 400
    renamed = await client.patch(f"{SECRETS}/NEW", json={**body, "newSecretName": "NEWER"}, headers=ADMIN)
    assert renamed.json()["secret"]["secretKey"] == "NEWER" and renamed.json()["secret"]["version"] == 2
    gone = await client.request("DELETE", f"{SECRETS}/NEWER", json=body, headers=ADMIN)
    assert gone.status_code == 200
    missing = await client.request("DELETE", f"{SECRETS}/NEWER", json=body, headers=ADMIN)
    assert missing.status_code == 404 and missing.json()["error"] == "NotFound"
    assert (await client.post(f"{SECRETS}/X", json=body, headers=VIEWER)).status_code == 403


async def test_batch_delete_and_its_minimum(client: httpx.AsyncClient) -> None:
    body = {"projectId": PROJECT, "environment": "dev", "secrets": [{"secretKey": "A", "type": "shared"}]}
    r = await client.request("DELETE", f"{SECRETS}/batch", json=body, headers=ADMIN)
    assert r.status_code == 200 and r.json()["secrets"][0]["secretKey"] == "A"
    assert "secretPath" not in r.json()["secrets"][0]
    empty = await client.request("DELETE", f"{SECRETS}/batch", json={**body, "secrets": []}, headers=ADMIN)
    assert empty.status_code == 422 and isinstance(empty.json()["message"], list)


async def test_folder_create_and_import_reorder(client: httpx.AsyncClient) -> None:
    r = await client.post(
        "/api/v2/folders",
        json={"projectId": PROJECT, "environment": "dev", "name": "svc", "path": "/app"},
        headers=ADMIN,
    )
    assert r.status_code == 200 and r.json()["folder"]["path"] == "/app/svc"
    body = {"projectId": PROJECT, "environment": "dev", "path": "/", "import": {"position": 1}}
    r = await client.patch("/api/v2/secret-imports/imp-2", json=body, headers=ADMIN)
    assert r.status_code == 200 and r.json()["secretImport"]["position"] == 1
    query = {"projectId": PROJECT, "environment": "dev", "include_imports": "true"}
    listed = await client.get(SECRETS, params=query, headers=ADMIN)
    assert [g["secretPath"] for g in listed.json()["imports"]] == ["/other", "/shared"]


async def test_v1_privileges_lifecycle(client: httpx.AsyncClient) -> None:
    create = {
        "identityId": VIEWER_ID,
        "projectSlug": "proj",
        "slug": "tmp",
        "temporaryMode": "relative",
        "temporaryRange": "1h",
        "temporaryAccessStartTime": "2026-01-01T00:00:00Z",
        "privilegePermission": {
            "actions": ["read"],
            "subject": "secrets",
            "conditions": {"environment": "prod"},
        },
    }
    r = await client.post(f"{V1}/temporary", json=create, headers=ADMIN)
    priv = r.json()["privilege"]
    assert r.status_code == 200 and priv["temporaryAccessEndTime"] == "2026-01-01T01:00:00.000Z"
    assert priv["projectMembershipId"]
    query = {"identityId": VIEWER_ID, "projectSlug": "proj"}
    assert (await client.get(f"{V1}/tmp", params=query, headers=ADMIN)).json()["privilege"]["id"] == priv[
        "id"
    ]
    assert len((await client.get(V1, params=query, headers=ADMIN)).json()["privileges"]) == 1
    details = {
        "slug": "tmp2",
        "temporaryRange": "30s",
        "permissions": [{"action": "read", "subject": "secrets"}],
    }
    upd = {**query, "privilegeSlug": "tmp", "privilegeDetails": details}
    r = await client.patch(V1, json=upd, headers=ADMIN)
    assert r.json()["privilege"]["slug"] == "tmp2" and r.json()["privilege"][
        "temporaryAccessEndTime"
    ].endswith("00:30.000Z")
    r = await client.request("DELETE", V1, json={**query, "privilegeSlug": "tmp2"}, headers=ADMIN)
    assert r.status_code == 200
    assert (await client.get(f"{V1}/tmp2", params=query, headers=ADMIN)).status_code == 404
    assert (await client.post(f"{V1}/temporary", json=create, headers=VIEWER)).status_code == 403


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"slug": "x" * 61}, 422),
        ({"slug": ""}, 422),
        ({"identityId": ""}, 422),
        ({"temporaryMode": "absolute"}, 422),
    ],
)
async def test_privilege_limits(client: httpx.AsyncClient, change: dict[str, str], status: int) -> None:
    body = {
        "identityId": VIEWER_ID,
        "projectSlug": "proj",
        "temporaryMode": "relative",
        "temporaryRange": "1m",
        "temporaryAccessStartTime": "2026-01-01T00:00:00Z",
        **change,
    }
    r = await client.post(f"{V1}/temporary", json=body, headers=ADMIN)
    assert r.status_code == status and isinstance(r.json()["message"], list)


async def test_v2_privilege_update_and_delete(client: httpx.AsyncClient) -> None:
    body = {
        "slug": "renamed",
        "permissions": [{"action": ["read"], "subject": "secrets"}],
        "type": {"isTemporary": False},
    }
    r = await client.patch("/api/v2/identity-project-additional-privilege/priv-1", json=body, headers=ADMIN)
    assert r.status_code == 200 and r.json()["privilege"]["slug"] == "renamed"
    assert "projectMembershipId" not in r.json()["privilege"]
    r = await client.delete("/api/v2/identity-project-additional-privilege/priv-1", headers=ADMIN)
    assert r.status_code == 200
    query = {"identityId": LIMITED_ID, "projectSlug": "proj"}
    assert (await client.get(V1, params=query, headers=ADMIN)).json()["privileges"] == []


async def test_remove_auth_methods_and_membership(client: httpx.AsyncClient) -> None:
    r = await client.delete(f"/api/v1/auth/universal-auth/identities/{ADMIN_ID}", headers=ADMIN)
    ua = r.json()["identityUniversalAuth"]
    assert ua["clientId"] == "cid" and "_clientSecret" not in ua and ua["accessTokenTTL"] == 100
    assert (
        await client.delete(f"/api/v1/auth/universal-auth/identities/{ADMIN_ID}", headers=ADMIN)
    ).status_code == 404
    r = await client.delete(f"/api/v1/auth/kubernetes-auth/identities/{ADMIN_ID}", headers=ADMIN)
    assert r.json()["identityKubernetesAuth"]["allowedNamespaces"] == "ns"
    r = await client.delete("/api/v2/organizations/org-1/memberships/mem-1", headers=ADMIN)
    assert r.json()["membership"]["status"] == "invited"
    assert (
        await client.delete("/api/v2/organizations/org-1/memberships/mem-1", headers=VIEWER)
    ).status_code == 403


async def test_dynamic_secret_and_project_slug(client: httpx.AsyncClient) -> None:
    query = {"projectSlug": "proj", "environmentSlug": "dev"}
    r = await client.get("/api/v1/dynamic-secrets/pg", params=query, headers=ADMIN)
    assert r.status_code == 200 and r.json()["dynamicSecret"]["type"] == "sql-database"
    missing = await client.get("/api/v1/dynamic-secrets/pg", params={"projectSlug": "proj"}, headers=ADMIN)
    assert missing.status_code == 422
    r = await client.get("/api/v1/projects/slug/proj", headers=VIEWER)
    assert r.json()["id"] == PROJECT
    assert (await client.get("/api/v1/projects/slug/proj", headers=OUTSIDER)).status_code == 403


async def test_error_shapes(client: httpx.AsyncClient) -> None:
    # No such route: the real server's framework answer (test_notfound.py), not the error shape.
    r = await client.get("/api/v9/nothing", headers=ADMIN)
    assert r.status_code == 404 and r.json() == {
        "message": "Route GET:/api/v9/nothing not found",
        "error": "Not Found",
        "statusCode": 404,
    }
    r = await client.get(SECRETS, params={"projectId": PROJECT, "environment": "dev"})
    assert r.status_code == 401 and r.json()["statusCode"] == 401
    r = await client.get(
        SECRETS, params={"projectId": PROJECT, "environment": "dev", "recursive": "maybe"}, headers=ADMIN
    )
    assert r.status_code == 422 and isinstance(r.json()["message"], list)


@pytest.mark.parametrize(
    ("headers", "status", "error"),
    [
        ({}, 401, "UnauthorizedError"),
        ({"Authorization": "Bearer no-such-token"}, 401, "UnauthorizedError"),
        (OUTSIDER, 403, "PermissionDenied"),  # not a member of the project
        (LIMITED, 403, "PermissionDenied"),  # no-access role; its privilege is on secrets only
        (VIEWER, 403, "PermissionDenied"),  # viewers may read root credentials but not edit them
        (ADMIN, 200, None),
    ],
    ids=["no-token", "unknown-token", "outsider", "limited", "viewer", "admin"],
)
async def test_dynamic_secret_needs_token_and_both_root_credential_actions(
    client: httpx.AsyncClient, headers: dict[str, str], status: int, error: str | None
) -> None:
    """Its ``inputs`` are the provider's root credentials: token, membership and permission first."""
    r = await client.get(
        "/api/v1/dynamic-secrets/pg",
        params={"projectSlug": "proj", "environmentSlug": "dev"},
        headers=headers,
    )
    assert r.status_code == status
    if error is not None:
        assert r.json()["error"] == error and "dynamicSecret" not in r.json()


async def test_dynamic_secret_for_a_non_member_hides_what_exists(client: httpx.AsyncClient) -> None:
    """A non-member gets the same 403 for a missing and an existing definition."""
    for name in ("pg", "no-such-secret"):
        r = await client.get(
            f"/api/v1/dynamic-secrets/{name}",
            params={"projectSlug": "proj", "environmentSlug": "dev"},
            headers=OUTSIDER,
        )
        assert r.status_code == 403
    missing = await client.get(
        "/api/v1/dynamic-secrets/no-such-secret",
        params={"projectSlug": "proj", "environmentSlug": "dev"},
        headers=ADMIN,
    )
    assert missing.status_code == 404


async def test_dynamic_secret_by_privilege_on_its_path(make_app: Callable[..., FastAPI]) -> None:
    seed = copy.deepcopy(SEED)
    limited = seed["identities"][2]
    limited["projects"][0]["privileges"][0]["permissions"].append(
        {
            "action": ["read-root-credential", "edit-root-credential"],
            "subject": "dynamic-secrets",
            "conditions": {"environment": "dev", "secretPath": "/"},
        }
    )
    app = make_app(seed=seed)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dev") as c:
        r = await c.get(
            "/api/v1/dynamic-secrets/pg",
            params={"projectSlug": "proj", "environmentSlug": "dev"},
            headers=LIMITED,
        )
        assert r.status_code == 200

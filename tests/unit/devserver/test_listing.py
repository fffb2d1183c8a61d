"""GET /api/v4/secrets: recursion, imports, overrides, filters, expansion, hidden values, ETag."""

from __future__ import annotations

import httpx
import pytest
from devserver_fixtures import ADMIN, LIMITED, PROJECT, VIEWER, params


def keys(body: dict[str, object]) -> list[tuple[str, str]]:
    return [(s["secretPath"], s["secretKey"]) for s in body["secrets"]]  # type: ignore[attr-defined,index]


async def test_flat_list_expands_references_and_has_paths(client: httpx.AsyncClient) -> None:
    r = await client.get("/api/v4/secrets", params=params(expandSecretReferences="true"), headers=VIEWER)
    assert r.status_code == 200
    values = {s["secretKey"]: s["secretValue"] for s in r.json()["secrets"]}
    assert values == {"A": "a", "B": "ref-a"}
    first = r.json()["secrets"][0]
    assert (
        first["secretPath"] == "/"
        and first["tags"][0]["slug"] == "db"
        and first["secretValueHidden"] is False
    )


async def test_recursive_lists_subfolders_with_paths(client: httpx.AsyncClient) -> None:
    query = params(recursive="true", expandSecretReferences="true")
    r = await client.get("/api/v4/secrets", params=query, headers=VIEWER)
    assert keys(r.json()) == [("/", "A"), ("/", "B"), ("/app", "C"), ("/app/deep", "D")]
    assert r.json()["secrets"][2]["secretValue"] == "s1"  # ${prod.shared.S1}


async def test_recursion_stops_at_depth_20(client: httpx.AsyncClient) -> None:
    deep = "/" + "/".join(f"f{i}" for i in range(21))
    for path in (deep, deep.rsplit("/", 1)[0]):
        r = await client.post(
            "/api/v4/secrets/K",
            json={"projectId": PROJECT, "environment": "prod", "secretPath": path, "secretValue": "v"},
            headers=ADMIN,
        )
        assert r.status_code == 200, r.text
    r = await client.get(
        "/api/v4/secrets", params=params(environment="prod", recursive="true"), headers=ADMIN
    )
    paths = [p for p, k in keys(r.json()) if k == "K"]
    assert paths == [deep.rsplit("/", 1)[0]]


async def test_imports_in_position_order_only_when_asked(client: httpx.AsyncClient) -> None:
    r = await client.get("/api/v4/secrets", params=params(include_imports="true"), headers=VIEWER)
    groups = r.json()["imports"]
    assert [(g["environment"], g["secretPath"]) for g in groups] == [("prod", "/shared"), ("prod", "/other")]
    assert groups[0]["secrets"][0]["secretKey"] == "S1" and "secretPath" not in groups[0]["secrets"][0]
    r = await client.get("/api/v4/secrets", params=params(include_imports="false"), headers=VIEWER)
    assert "imports" not in r.json()


async def test_personal_override_replaces_shared_only_when_asked(client: httpx.AsyncClient) -> None:
    expand = {"expandSecretReferences": "true"}
    plain = await client.get("/api/v4/secrets", params=params(**expand), headers=ADMIN)
    assert {s["secretKey"]: s["secretValue"] for s in plain.json()["secrets"]}["B"] == "ref-a"
    personal = params(includePersonalOverrides="true", **expand)
    r = await client.get("/api/v4/secrets", params=personal, headers=ADMIN)
    by_key = {s["secretKey"]: s for s in r.json()["secrets"]}
    assert by_key["B"]["secretValue"] == "mine" and by_key["B"]["type"] == "personal"
    other = await client.get("/api/v4/secrets", params=personal, headers=VIEWER)
    assert {s["secretKey"]: s["secretValue"] for s in other.json()["secrets"]}["B"] == "ref-a"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"tagSlugs": "db"}, ["A"]),
        ({"tagSlugs": "db,web"}, ["A", "B"]),
        ({"metadataFilter": "key=team,value=x"}, ["A", "B"]),
        ({"metadataFilter": "key=team,value=x|key=tier,value=1"}, ["A"]),
        ({"metadataFilter": "key=secret,value=s"}, []),  # encrypted metadata never matches
        ({"tagSlugs": "web", "metadataFilter": "key=tier,value=1"}, []),
    ],
)
async def test_tag_and_metadata_filters(
    client: httpx.AsyncClient, query: dict[str, str], expected: list[str]
) -> None:
    r = await client.get("/api/v4/secrets", params=params(**query), headers=VIEWER)
    assert [s["secretKey"] for s in r.json()["secrets"]] == expected


async def test_hidden_values_and_unexpanded_references(client: httpx.AsyncClient) -> None:
    hidden = params(viewSecretValue="false", include_imports="true")
    r = await client.get("/api/v4/secrets", params=hidden, headers=VIEWER)
    assert all(s["secretValueHidden"] and s["secretValue"] != "a" for s in r.json()["secrets"])
    assert all(s["secretValue"] != "s1" for g in r.json()["imports"] for s in g["secrets"])
    r = await client.get("/api/v4/secrets", params=params(expandSecretReferences="false"), headers=VIEWER)
    assert {s["secretKey"]: s["secretValue"] for s in r.json()["secrets"]}["B"] == "ref-${A}"


async def test_etag_304_and_change_through_import(client: httpx.AsyncClient) -> None:
    query = params(include_imports="true")
    r = await client.get("/api/v4/secrets", params=query, headers=VIEWER)
    etag = r.headers["etag"]
    again = await client.get("/api/v4/secrets", params=query, headers={**VIEWER, "If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    await client.patch(
        "/api/v4/secrets/S1",
        json={"projectId": PROJECT, "environment": "prod", "secretPath": "/shared", "secretValue": "new"},
        headers=ADMIN,
    )
    changed = await client.get("/api/v4/secrets", params=query, headers={**VIEWER, "If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag


async def test_missing_project_or_environment_is_400(client: httpx.AsyncClient) -> None:
    r = await client.get("/api/v4/secrets", params={"projectId": PROJECT}, headers=VIEWER)
    assert r.status_code == 400 and r.json()["message"] == "Missing project id or environment"


async def test_privilege_glob_limits_reads(client: httpx.AsyncClient) -> None:
    denied = await client.get("/api/v4/secrets", params=params(), headers=LIMITED)
    assert denied.status_code == 403
    assert denied.json()["error"] == "PermissionDenied" and denied.json()["details"]
    ok = await client.get(
        "/api/v4/secrets", params=params(secretPath="/app", recursive="true"), headers=LIMITED
    )
    assert keys(ok.json()) == [("/app", "C"), ("/app/deep", "D")]
    prod = await client.get(
        "/api/v4/secrets", params=params(environment="prod", secretPath="/app"), headers=LIMITED
    )
    assert prod.status_code == 403

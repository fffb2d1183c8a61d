"""GET /api/v4/secrets refuses what the real v4 route refuses (docs/service-contract.md, "Strictness").

Each test fails if its rule is removed: lenient booleans, the imports spelling, the real defaults,
the metadataFilter reading and limit, the order of 422 before 400, repeated keys.
"""

from __future__ import annotations

import httpx
import pytest
from devserver_fixtures import PROJECT, VIEWER, params

SECRETS = "/api/v4/secrets"
FLAGS = (
    "viewSecretValue",
    "expandSecretReferences",
    "recursive",
    "include_imports",
    "includePersonalOverrides",
)


def issue_paths(response: httpx.Response) -> list[list[object]]:
    body = response.json()
    assert response.status_code == 422, response.text
    assert body["error"] == "ValidationFailure" and isinstance(body["message"], list)
    return [issue["path"] for issue in body["message"]]


def listed_keys(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [s["secretKey"] for s in response.json()["secrets"]]


@pytest.mark.parametrize("flag", FLAGS)
@pytest.mark.parametrize("value", ["1", "0", "TRUE", "False", "yes", ""])
async def test_booleans_are_exactly_true_or_false(client: httpx.AsyncClient, flag: str, value: str) -> None:
    r = await client.get(SECRETS, params=params(**{flag: value}), headers=VIEWER)
    assert issue_paths(r) == [[flag]]
    (issue,) = r.json()["message"]
    assert issue["code"] == "invalid_enum_value" and "'true' | 'false'" in issue["message"]


@pytest.mark.parametrize("flag", FLAGS)
async def test_a_repeated_boolean_is_refused(client: httpx.AsyncClient, flag: str) -> None:
    query = [*params().items(), (flag, "true"), (flag, "true")]
    assert issue_paths(await client.get(SECRETS, params=query, headers=VIEWER)) == [[flag]]


@pytest.mark.parametrize("name", ["projectId", "environment", "secretPath", "tagSlugs", "metadataFilter"])
async def test_a_repeated_string_is_refused(client: httpx.AsyncClient, name: str) -> None:
    """Fastify hands a repeated key over as an array; the route's ``z.string()`` refuses it."""
    value = {"projectId": PROJECT, "environment": "dev", "secretPath": "/"}.get(name, "x")
    query = [*params().items(), (name, value), (name, value)]
    assert [name] in issue_paths(await client.get(SECRETS, params=query, headers=VIEWER))


async def test_every_issue_in_one_answer(client: httpx.AsyncClient) -> None:
    r = await client.get(SECRETS, params=params(recursive="1", viewSecretValue="no"), headers=VIEWER)
    assert issue_paths(r) == [["viewSecretValue"], ["recursive"]]


async def test_validation_comes_before_the_missing_project_check(client: httpx.AsyncClient) -> None:
    r = await client.get(SECRETS, params={"environment": "dev", "recursive": "1"}, headers=VIEWER)
    assert issue_paths(r) == [["recursive"]]


@pytest.mark.parametrize(
    "query",
    [
        {"environment": "dev"},
        {"projectId": PROJECT},
        {"projectId": " ", "environment": "dev"},
        {"workspaceId": PROJECT, "environment": "dev"},  # the v3 name is an unknown key in v4
    ],
    ids=["no-project", "no-environment", "blank-project", "workspaceId"],
)
async def test_missing_project_or_environment_is_400(
    client: httpx.AsyncClient, query: dict[str, str]
) -> None:
    r = await client.get(SECRETS, params=query, headers=VIEWER)
    assert r.status_code == 400 and r.json()["message"] == "Missing project id or environment"


async def test_real_defaults_no_references_no_imports(client: httpx.AsyncClient) -> None:
    body = (await client.get(SECRETS, params=params(), headers=VIEWER)).json()
    values = {s["secretKey"]: s["secretValue"] for s in body["secrets"]}
    assert values == {"A": "a", "B": "ref-${A}"}  # viewSecretValue defaults to true, expansion to false
    assert "imports" not in body


@pytest.mark.parametrize("value", ["true", "1", "anything"])
async def test_include_imports_camel_case_is_an_unknown_key(client: httpx.AsyncClient, value: str) -> None:
    r = await client.get(SECRETS, params=params(includeImports=value), headers=VIEWER)
    assert r.status_code == 200 and "imports" not in r.json()
    both = await client.get(
        SECRETS, params=params(includeImports="false", include_imports="true"), headers=VIEWER
    )
    assert [g["secretPath"] for g in both.json()["imports"]] == ["/shared", "/other"]


def pairs(n: int, *, extra: str = "") -> str:
    return "|".join(f"key=k{i},value=v{i}" for i in range(n)) + extra


async def test_more_than_ten_metadata_pairs_is_422(client: httpx.AsyncClient) -> None:
    r = await client.get(SECRETS, params=params(metadataFilter=pairs(11)), headers=VIEWER)
    assert issue_paths(r) == [["metadataFilter"]]
    assert r.json()["message"][0]["message"] == "You can only filter by up to 10 metadata fields"
    ten = await client.get(SECRETS, params=params(metadataFilter=pairs(10)), headers=VIEWER)
    assert listed_keys(ten) == []


async def test_incomplete_pairs_do_not_count_towards_the_limit(client: httpx.AsyncClient) -> None:
    r = await client.get(
        SECRETS, params=params(metadataFilter=pairs(10, extra="|key=a|value=b|=")), headers=VIEWER
    )
    assert r.status_code == 200


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key=team", ["A", "B"]),  # dropped: no filter at all, not "team with any value"
        ("key=tier", ["A", "B"]),
        ("key=tier,value=", ["A", "B"]),
        ("key=,value=1", ["A", "B"]),
        ("=1", ["A", "B"]),
        ("tier", ["A", "B"]),
        ("key=tier,value=1|key=team", ["A"]),  # only the incomplete pair is dropped
        ("KEY=tier,Value=1", ["A"]),  # identifiers are case-insensitive
        (" key = tier , value = 1 ", ["A"]),  # and everything is trimmed
        ("value=1,key=tier", ["A"]),
        ("key=tier,value=2", []),
    ],
)
async def test_metadata_filter_is_read_like_the_real_route(
    client: httpx.AsyncClient, text: str, expected: list[str]
) -> None:
    r = await client.get(SECRETS, params=params(metadataFilter=text), headers=VIEWER)
    assert listed_keys(r) == expected


async def test_an_empty_tag_slug_still_filters(client: httpx.AsyncClient) -> None:
    """``","`` is two empty slugs for the real route: a tag filter nothing matches."""
    assert listed_keys(await client.get(SECRETS, params=params(tagSlugs=","), headers=VIEWER)) == []
    assert listed_keys(await client.get(SECRETS, params=params(tagSlugs=""), headers=VIEWER)) == ["A", "B"]


@pytest.mark.parametrize("path", ["", "app", " "])
async def test_a_secret_path_must_start_with_a_slash(client: httpx.AsyncClient, path: str) -> None:
    r = await client.get(SECRETS, params=params(secretPath=path), headers=VIEWER)
    assert issue_paths(r) == [["secretPath"]]


async def test_the_operator_query_is_accepted(client: httpx.AsyncClient) -> None:
    """What ``service.wire.list_secrets_params`` sends: every boolean, both import spellings."""
    query = [
        ("projectId", PROJECT),
        ("environment", "dev"),
        ("secretPath", "/"),
        ("viewSecretValue", "true"),
        ("expandSecretReferences", "true"),
        ("recursive", "false"),
        ("includePersonalOverrides", "false"),
        ("includeImports", "true"),
        ("include_imports", "true"),
        ("tagSlugs", "db,web"),
        ("metadataFilter", "key=team,value=x"),
    ]
    r = await client.get(SECRETS, params=query, headers=VIEWER)
    assert listed_keys(r) == ["A", "B"] and r.json()["secrets"][1]["secretValue"] == "ref-a"
    assert len(r.json()["imports"]) == 2

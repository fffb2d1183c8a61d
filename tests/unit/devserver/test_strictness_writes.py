"""Writes and import moves are taken as the real server takes them: no defaults it lacks, no
lenient types, no clamping (docs/service-contract.md, "Strictness")."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from devserver_fixtures import ADMIN, PROJECT, SEED
from fastapi import FastAPI

SECRETS = "/api/v4/secrets"
IMPORTS = "/api/v2/secret-imports"


def issue_paths(response: httpx.Response) -> list[list[object]]:
    assert response.status_code == 422, response.text
    return [issue["path"] for issue in response.json()["message"]]


async def test_create_needs_a_value(client: httpx.AsyncClient) -> None:
    body = {"projectId": PROJECT, "environment": "dev"}
    assert issue_paths(await client.post(f"{SECRETS}/NEW", json=body, headers=ADMIN)) == [["secretValue"]]


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"skipMultilineEncoding": "true"}, ["skipMultilineEncoding"]),
        ({"skipMultilineEncoding": 1}, ["skipMultilineEncoding"]),
        ({"secretReminderRepeatDays": "5"}, ["secretReminderRepeatDays"]),
        ({"secretMetadata": [{"key": "k", "isEncrypted": "yes"}]}, ["secretMetadata", "0", "isEncrypted"]),
    ],
)
async def test_json_types_are_not_coerced(
    client: httpx.AsyncClient, change: dict[str, Any], path: list[object]
) -> None:
    body = {"projectId": PROJECT, "environment": "dev", "secretValue": "v", **change}
    for method in ("POST", "PATCH"):
        name = "NEW" if method == "POST" else "A"
        r = await client.request(method, f"{SECRETS}/{name}", json=body, headers=ADMIN)
        assert [[str(p) for p in issue] for issue in issue_paths(r)] == [[str(p) for p in path]]


def move(position: Any, **extra: Any) -> dict[str, Any]:
    return {
        "projectId": PROJECT,
        "environment": "dev",
        "path": "/",
        "import": {"position": position, **extra},
    }


async def positions(client: httpx.AsyncClient) -> list[tuple[str, int]]:
    """The imports of dev ``/`` as stored, in the order a list shows them."""
    query = {"projectId": PROJECT, "environment": "dev", "include_imports": "true"}
    listed = await client.get(SECRETS, params=query, headers=ADMIN)
    state = client.app.state.dev  # type: ignore[attr-defined]
    env = state.store.environment(PROJECT, "dev")
    stored = [(imp.import_path, imp.position) for imp in state.store.imports_in(env.id, "/")]
    assert [g["secretPath"] for g in listed.json()["imports"]] == [path for path, _ in stored]
    return stored


@pytest.mark.parametrize(
    ("position", "expected"),
    [
        (1, [("/other", 1), ("/shared", 2)]),  # imp-2 moves first, imp-1 shifts down
        (2, [("/shared", 1), ("/other", 2)]),  # already there
        (9, [("/shared", 1), ("/other", 9)]),  # kept as given, not clamped to 2
        (0, [("/other", 0), ("/shared", 1)]),  # 0 skips the shift but is still stored
        (-1, [("/other", -1), ("/shared", 2)]),  # siblings from -1 up to the old place shift
    ],
)
async def test_import_position_is_taken_as_given(
    client: httpx.AsyncClient, position: int, expected: list[tuple[str, int]]
) -> None:
    r = await client.patch(f"{IMPORTS}/imp-2", json=move(position), headers=ADMIN)
    assert r.status_code == 200 and r.json()["secretImport"]["position"] == position
    assert await positions(client) == expected


@pytest.mark.parametrize("position", [1.5, 2**31])
async def test_a_position_the_database_cannot_hold_is_500(client: httpx.AsyncClient, position: float) -> None:
    r = await client.patch(f"{IMPORTS}/imp-2", json=move(position), headers=ADMIN)
    assert r.status_code == 500 and r.json()["message"] == "Something went wrong"
    assert await positions(client) == [("/shared", 1), ("/other", 2)]


@pytest.mark.parametrize("position", ["1", True, None])
async def test_a_position_must_be_a_number(client: httpx.AsyncClient, position: Any) -> None:
    body = move(position)
    if position is None:
        body["import"]["position"] = {}
    assert issue_paths(await client.patch(f"{IMPORTS}/imp-2", json=body, headers=ADMIN))


async def test_an_unknown_import_environment_is_404(client: httpx.AsyncClient) -> None:
    r = await client.patch(f"{IMPORTS}/imp-2", json=move(1, environment="nope"), headers=ADMIN)
    assert r.status_code == 404


async def test_a_cyclic_import_is_refused(make_app: Callable[..., FastAPI]) -> None:
    seed = copy.deepcopy(SEED)
    seed["projects"][0]["imports"].append(
        {
            "id": "imp-3",
            "environment": "prod",
            "path": "/shared",
            "from": {"environment": "dev", "path": "/app"},
        }
    )
    app = make_app(seed=seed)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dev") as c:
        body = {"projectId": PROJECT, "environment": "prod", "path": "/shared", "import": {"path": "/"}}
        r = await c.patch(f"{IMPORTS}/imp-3", json=body, headers=ADMIN)  # dev / already imports prod /shared
        assert r.status_code == 400 and r.json()["message"] == "Cyclic import not allowed"
        body["import"] = {"path": "/app/deep"}
        assert (await c.patch(f"{IMPORTS}/imp-3", json=body, headers=ADMIN)).status_code == 200

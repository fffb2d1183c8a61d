"""GET /api/v2/folders: children or the subtree, membership only, the real lenient boolean."""

from __future__ import annotations

import httpx
import pytest
from devserver_fixtures import ADMIN, LIMITED, OUTSIDER, PROJECT

FOLDERS = "/api/v2/folders"


def q(**extra: str) -> dict[str, str]:
    return {"projectId": PROJECT, "environment": "dev", "path": "/", **extra}


async def test_children_only_without_paths(client: httpx.AsyncClient) -> None:
    r = await client.get(FOLDERS, params=q(), headers=ADMIN)
    folders = r.json()["folders"]
    assert r.status_code == 200 and [f["name"] for f in folders] == ["app"]
    assert "path" not in folders[0] and "relativePath" not in folders[0]
    deeper = await client.get(FOLDERS, params=q(path="/app"), headers=ADMIN)
    assert [f["name"] for f in deeper.json()["folders"]] == ["deep"]


@pytest.mark.parametrize("value", ["true", "True", "1", "yes"])
async def test_recursive_lists_the_subtree_with_relative_paths(client: httpx.AsyncClient, value: str) -> None:
    r = await client.get(FOLDERS, params=q(recursive=value), headers=ADMIN)
    assert [f["relativePath"] for f in r.json()["folders"]] == ["/app", "/app/deep"]


@pytest.mark.parametrize("value", ["false", "False", "0", ""])
async def test_false_spellings_of_the_lenient_boolean(client: httpx.AsyncClient, value: str) -> None:
    r = await client.get(FOLDERS, params=q(recursive=value), headers=ADMIN)
    assert [f["name"] for f in r.json()["folders"]] == ["app"]


async def test_new_folders_are_listed(client: httpx.AsyncClient) -> None:
    created = await client.post(
        FOLDERS, json={"projectId": PROJECT, "environment": "dev", "name": "svc", "path": "/"}, headers=ADMIN
    )
    assert created.status_code == 200
    r = await client.get(FOLDERS, params=q(), headers=ADMIN)
    assert [f["id"] for f in r.json()["folders"] if f["name"] == "svc"] == [created.json()["folder"]["id"]]


@pytest.mark.parametrize(
    ("params", "headers", "status"),
    [
        ({"projectId": PROJECT, "environment": "dev"}, ADMIN, 422),  # path is required
        (q(lastSecretModified="yesterday"), ADMIN, 422),
        (q(environment="nope"), ADMIN, 404),
        (q(), OUTSIDER, 403),
    ],
    ids=["no-path", "bad-datetime", "unknown-env", "outsider"],
)
async def test_refusals(
    client: httpx.AsyncClient, params: dict[str, str], headers: dict[str, str], status: int
) -> None:
    assert (await client.get(FOLDERS, params=params, headers=headers)).status_code == status


async def test_members_list_without_folder_permission_and_missing_parents_are_empty(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get(FOLDERS, params=q(), headers=LIMITED)  # no-access role, still a member
    assert r.status_code == 200 and r.json()["folders"]
    missing = await client.get(FOLDERS, params=q(path="/nowhere"), headers=ADMIN)
    assert missing.json() == {"folders": []}
    # No folder records when its secrets last changed, so a filter on it keeps none.
    since = await client.get(FOLDERS, params=q(lastSecretModified="2020-01-01T00:00:00Z"), headers=ADMIN)
    assert since.json() == {"folders": []}

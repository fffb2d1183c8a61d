"""/api/v3/secrets/raw: list and by-name routes over the v4 store, listing and event fan-out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from devserver_fixtures import ADMIN, OUTSIDER, PROJECT, VIEWER
from fastapi import FastAPI

from secretferry.devserver.schemas_v3 import trim_value

RAW = "/api/v3/secrets/raw"
FLAGS = ("viewSecretValue", "expandSecretReferences", "recursive", "include_imports")


def q(**extra: str) -> dict[str, str]:
    return {"workspaceId": PROJECT, "environment": "dev", **extra}


def body(**extra: Any) -> dict[str, Any]:
    """What the official Python SDK sends (None fields are left out by it)."""
    return {"workspaceId": PROJECT, "environment": "dev", "secretPath": "/", "type": "shared", **extra}


def values(listed: dict[str, Any]) -> dict[str, str]:
    return {s["secretKey"]: s["secretValue"] for s in listed["secrets"]}


# -- list ---------------------------------------------------------------------------------------


async def test_list_matches_the_v4_list_for_the_same_flags(client: httpx.AsyncClient) -> None:
    flags = {"expandSecretReferences": "true", "include_imports": "true", "recursive": "true"}
    v3 = await client.get(RAW, params=q(**flags), headers=VIEWER)
    v4 = await client.get(
        "/api/v4/secrets", params={"projectId": PROJECT, "environment": "dev", **flags}, headers=VIEWER
    )
    assert v3.status_code == 200 and v3.json() == v4.json()
    by_slug = await client.get(
        RAW, params={"workspaceSlug": "proj", "environment": "dev", **flags}, headers=VIEWER
    )
    assert by_slug.json() == v3.json()


async def test_list_defaults_leave_references_and_imports_out(client: httpx.AsyncClient) -> None:
    r = await client.get(RAW, params=q(), headers=VIEWER)
    assert values(r.json()) == {"A": "a", "B": "ref-${A}"} and "imports" not in r.json()
    # v3 spells the imports flag only one way; the v4 spelling is ignored like any unknown field.
    r = await client.get(RAW, params=q(includeImports="true"), headers=VIEWER)
    assert "imports" not in r.json()
    r = await client.get(RAW, params=q(viewSecretValue="false"), headers=VIEWER)
    assert {s["secretValueHidden"] for s in r.json()["secrets"]} == {True}


async def test_list_etag_and_conditional_get(client: httpx.AsyncClient) -> None:
    first = await client.get(RAW, params=q(), headers=VIEWER)
    again = await client.get(RAW, params=q(), headers={**VIEWER, "If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


@pytest.mark.parametrize(
    ("params", "status", "message"),
    [
        ({"environment": "dev"}, 400, "You must provide projectSlug or workspaceId"),
        ({"projectId": PROJECT, "environment": "dev"}, 400, "You must provide projectSlug or workspaceId"),
        ({"workspaceId": PROJECT}, 400, "Missing project id or environment"),
        ({"workspaceSlug": "nope", "environment": "dev"}, 404, "No project found with slug nope"),
    ],
    ids=["no-project", "v4-spelling", "no-environment", "unknown-slug"],
)
async def test_list_project_and_environment_are_required(
    client: httpx.AsyncClient, params: dict[str, str], status: int, message: str
) -> None:
    r = await client.get(RAW, params=params, headers=VIEWER)
    assert (r.status_code, r.json()["message"]) == (status, message)


async def test_a_slug_tells_a_non_member_nothing(client: httpx.AsyncClient) -> None:
    r = await client.get(RAW, params={"workspaceSlug": "proj", "environment": "dev"}, headers=OUTSIDER)
    assert r.status_code == 403 and r.json()["error"] == "PermissionDenied"


@pytest.mark.parametrize("flag", FLAGS)
@pytest.mark.parametrize("value", ["1", "0", "True", "", "yes"])
async def test_list_booleans_are_exactly_true_or_false(
    client: httpx.AsyncClient, flag: str, value: str
) -> None:
    r = await client.get(RAW, params=q(**{flag: value}), headers=VIEWER)
    assert r.status_code == 422 and r.json()["error"] == "ValidationFailure"
    assert [issue["path"] for issue in r.json()["message"]] == [[flag]]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"metadataFilter": "|".join(f"key=k{i},value=v" for i in range(11))}, "metadataFilter"),
        ({"secretPath": "app"}, "secretPath"),
    ],
    ids=["11-metadata-pairs", "relative-path"],
)
async def test_list_shares_the_v4_lists_other_rules(
    client: httpx.AsyncClient, extra: dict[str, str], field: str
) -> None:
    r = await client.get(RAW, params=q(**extra), headers=VIEWER)
    assert r.status_code == 422 and r.json()["message"][0]["path"] == [field]


async def test_every_bad_flag_is_reported_at_once(client: httpx.AsyncClient) -> None:
    params = [*q().items(), ("recursive", "true"), ("recursive", "false"), ("include_imports", "1")]
    r = await client.get(RAW, params=params, headers=VIEWER)
    assert r.status_code == 422
    assert sorted(issue["path"][0] for issue in r.json()["message"]) == ["include_imports", "recursive"]


# -- get by name ------------------------------------------------------------------------------------


async def test_get_by_name_in_the_list_form(client: httpx.AsyncClient) -> None:
    r = await client.get(f"{RAW}/B", params=q(), headers=VIEWER)
    secret = r.json()["secret"]
    assert r.status_code == 200 and secret["secretValue"] == "ref-${A}"
    assert secret["secretPath"] == "/" and secret["tags"][0]["slug"] == "web" and secret["createdAt"]
    expanded = await client.get(f"{RAW}/B", params=q(expandSecretReferences="true"), headers=VIEWER)
    assert expanded.json()["secret"]["secretValue"] == "ref-a"
    hidden = await client.get(f"{RAW}/B", params=q(viewSecretValue="false"), headers=VIEWER)
    assert hidden.json()["secret"]["secretValueHidden"] is True
    assert hidden.json()["secret"]["secretValue"] != "ref-${A}"


async def test_get_falls_back_to_imports_only_when_asked(client: httpx.AsyncClient) -> None:
    missing = await client.get(f"{RAW}/S1", params=q(), headers=VIEWER)
    assert missing.status_code == 404 and missing.json()["message"] == "Secret with name 'S1' not found"
    r = await client.get(f"{RAW}/S1", params=q(include_imports="true"), headers=VIEWER)
    secret = r.json()["secret"]
    assert (secret["environment"], secret["secretPath"], secret["secretValue"]) == ("prod", "/shared", "s1")
    assert secret["createdAt"] and secret["updatedAt"]


async def test_get_a_missing_folder_is_a_named_404(client: httpx.AsyncClient) -> None:
    r = await client.get(f"{RAW}/A", params=q(secretPath="/nowhere"), headers=VIEWER)
    assert r.status_code == 404 and r.json()["error"] == "GetSecretByName"
    assert r.json()["message"] == "Folder with path '/nowhere' in environment with slug 'dev' not found"


async def test_get_version_type_and_their_validation(client: httpx.AsyncClient) -> None:
    assert (await client.get(f"{RAW}/A", params=q(version="1"), headers=VIEWER)).status_code == 200
    # Only the current version is kept: any other is missing.
    assert (await client.get(f"{RAW}/A", params=q(version="2"), headers=VIEWER)).status_code == 404
    mine = await client.get(f"{RAW}/B", params=q(type="personal"), headers=ADMIN)
    assert mine.json()["secret"]["type"] == "personal"
    for bad in ({"version": "abc"}, {"type": "team"}, {"include_imports": "1"}):
        r = await client.get(f"{RAW}/A", params=q(**bad), headers=VIEWER)
        assert r.status_code == 422 and r.json()["message"][0]["path"] == list(bad)


# -- writes ----------------------------------------------------------------------------------------


async def test_create_update_rename_delete(client: httpx.AsyncClient) -> None:
    created = await client.post(
        f"{RAW}/NEW",
        json=body(secretValue="  v \n", secretComment=" c ", skipMultilineEncoding=False),
        headers=ADMIN,
    )
    secret = created.json()["secret"]
    assert created.status_code == 200, created.text
    assert (secret["secretKey"], secret["secretValue"], secret["secretComment"]) == ("NEW", "v\n", "c")
    assert "secretPath" not in secret and secret["workspace"] == PROJECT
    again = await client.post(f"{RAW}/NEW", json=body(secretValue="v"), headers=ADMIN)
    assert (again.status_code, again.json()["message"]) == (400, "Secret already exists")

    updated = await client.patch(f"{RAW}/NEW", json=body(newSecretName="NEWER"), headers=ADMIN)
    secret = updated.json()["secret"]
    # The real answer echoes the update: no value or comment sent, "" answered.
    assert (secret["secretKey"], secret["version"], secret["secretValue"], secret["secretComment"]) == (
        "NEWER",
        2,
        "",
        "",
    )
    listed = await client.get(RAW, params=q(), headers=ADMIN)
    assert values(listed.json())["NEWER"] == "v\n"
    clash = await client.patch(f"{RAW}/NEWER", json=body(newSecretName="A"), headers=ADMIN)
    assert (clash.status_code, clash.json()["message"]) == (400, "Secret with the new name already exists")

    deleted = await client.request("DELETE", f"{RAW}/NEWER", json=body(), headers=ADMIN)
    assert deleted.status_code == 200 and deleted.json()["secret"]["secretValue"] == "v\n"
    gone = await client.request("DELETE", f"{RAW}/NEWER", json=body(), headers=ADMIN)
    assert (gone.status_code, gone.json()["message"]) == (404, "Secret not found")
    missing = await client.patch(f"{RAW}/NEWER", json=body(secretValue="x"), headers=ADMIN)
    assert (missing.status_code, missing.json()["message"]) == (404, "Secret with name NEWER not found")


async def test_writes_by_project_slug(client: httpx.AsyncClient) -> None:
    location = {"projectSlug": "proj", "environment": "dev"}
    assert (
        await client.post(f"{RAW}/BY_SLUG", json={**location, "secretValue": "s"}, headers=ADMIN)
    ).status_code == 200
    assert (await client.request("DELETE", f"{RAW}/BY_SLUG", json=location, headers=ADMIN)).status_code == 200


@pytest.mark.parametrize(
    ("method", "operation"), [("POST", "CreateSecret"), ("PATCH", "UpdateSecret"), ("DELETE", "DeleteSecret")]
)
async def test_writes_need_an_existing_folder(client: httpx.AsyncClient, method: str, operation: str) -> None:
    r = await client.request(
        method, f"{RAW}/A", json=body(secretPath="/nowhere", secretValue="v"), headers=ADMIN
    )
    assert r.status_code == 404 and r.json()["error"] == operation


@pytest.mark.parametrize(
    ("method", "message"),
    [
        ("POST", "Must be user to create personal secret"),
        ("PATCH", "Must be user to create personal secret"),
        ("DELETE", "Must be user to delete personal secret"),
    ],
)
async def test_a_machine_identity_writes_no_personal_secret(
    client: httpx.AsyncClient, method: str, message: str
) -> None:
    r = await client.request(method, f"{RAW}/B", json=body(type="personal", secretValue="v"), headers=ADMIN)
    assert (r.status_code, r.json()["message"]) == (400, message)


async def test_tags_are_ids_that_must_exist(client: httpx.AsyncClient) -> None:
    listed = await client.get(RAW, params=q(), headers=ADMIN)
    db_tag = listed.json()["secrets"][0]["tags"][0]
    ok = await client.post(f"{RAW}/TAGGED", json=body(secretValue="t", tagIds=[db_tag["id"]]), headers=ADMIN)
    assert ok.status_code == 200
    by_slug = await client.post(f"{RAW}/TAGGED2", json=body(secretValue="t", tagIds=["db"]), headers=ADMIN)
    assert (by_slug.status_code, by_slug.json()["message"]) == (404, "Tag not found. Found ")


@pytest.mark.parametrize(
    "change",
    [
        {"secretValue": None},  # required on create
        {"skipMultilineEncoding": "true"},
        {"secretReminderRepeatDays": "5"},
        {"secretReminderNote": "x" * 1025},
        {"environment": None},
    ],
    ids=["no-value", "string-bool", "string-number", "long-note", "no-environment"],
)
async def test_create_body_is_strict(client: httpx.AsyncClient, change: dict[str, Any]) -> None:
    sent = {k: v for k, v in {**body(secretValue="v"), **change}.items() if v is not None}
    r = await client.post(f"{RAW}/STRICT", json=sent, headers=ADMIN)
    assert r.status_code == 422 and isinstance(r.json()["message"], list)


@pytest.mark.parametrize(("method", "action"), [("POST", "create"), ("PATCH", "edit"), ("DELETE", "delete")])
async def test_writes_need_the_v4_permission(client: httpx.AsyncClient, method: str, action: str) -> None:
    r = await client.request(
        method, f"{RAW}/{'X' if method == 'POST' else 'A'}", json=body(secretValue="v"), headers=VIEWER
    )
    assert r.status_code == 403 and r.json()["details"][0]["action"] == action


# -- events ----------------------------------------------------------------------------------------


Published = list[tuple[str, list[tuple[str, str, str | None]]]]


def recording(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> Published:
    """Every publish on the app's event bus, as (event, [(environment, path, key)]); import
    mutations arrive one call per importing path (``publish_each`` goes through ``publish``)."""
    bus = app.state.dev.bus
    original = bus.publish
    seen: Published = []

    def publish(project_id: str, event: str, changes: list[Any], now: float) -> int:
        seen.append((event, [(c.environment, c.secret_path, c.secret_key) for c in changes]))
        result: int = original(project_id, event, changes, now)
        return result

    monkeypatch.setattr(bus, "publish", publish)
    return seen


async def test_a_v3_write_publishes_what_a_v4_write_does(
    make_app: Callable[..., FastAPI], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes under prod /shared, which dev / imports: direct events and the import mutation."""
    app = make_app()
    seen = recording(app, monkeypatch)
    v4 = {"projectId": PROJECT, "environment": "prod", "secretPath": "/shared"}
    v3 = {"workspaceId": PROJECT, "environment": "prod", "secretPath": "/shared"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dev") as c:
        for prefix, location in (("/api/v4/secrets", v4), (RAW, v3)):
            assert (
                await c.post(f"{prefix}/K", json={**location, "secretValue": "1"}, headers=ADMIN)
            ).status_code == 200
            assert (
                await c.patch(f"{prefix}/K", json={**location, "secretValue": "2"}, headers=ADMIN)
            ).status_code == 200
            assert (await c.request("DELETE", f"{prefix}/K", json=location, headers=ADMIN)).status_code == 200
    half = len(seen) // 2
    assert seen[:half] == seen[half:]
    assert [event for event, _ in seen[:half]] == [
        "secret:create",
        "secret:import-mutation",
        "secret:update",
        "secret:import-mutation",
        "secret:delete",
        "secret:import-mutation",
    ]
    assert seen[0][1] == [("prod", "/shared", "K")] and seen[1][1] == [("dev", "/", None)]


def test_trim_value_keeps_one_trailing_newline() -> None:
    assert [trim_value(v) for v in ("  a  ", "a\n\n", " a \n", "\n")] == ["a", "a\n", "a\n", "\n"]


async def test_personal_override_of_the_caller_only(client: httpx.AsyncClient) -> None:
    r = await client.get(f"{RAW}/B", params=q(type="personal"), headers=ADMIN)
    assert r.json()["secret"]["secretValue"] == "mine"  # the seed's override belongs to the admin
    other = await client.get(f"{RAW}/B", params=q(type="personal"), headers=VIEWER)
    assert other.status_code == 404

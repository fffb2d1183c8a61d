"""Contract: secrets (list with every query parameter, batch delete, v4 writes), folders, imports."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from contract_support import (
    ADMIN_TOKEN,
    IMPORT_EDITABLE,
    LIMITED_TOKEN,
    PROJECT,
    by_key,
    client,
    dev_server,
    keys,
    request_count,
)

from secretferry.devserver.testing import DevServer
from secretferry.service import errors, wire
from secretferry.service.models import ListSecretsQuery, NotModified, SecretList

pytestmark = pytest.mark.integration

BATCH_ROUTE = "DELETE /api/v4/secrets/batch"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with dev_server(tmp_path_factory) as running:
        yield running


async def _list(server: DevServer, token: str | None = None, **query: object) -> SecretList:
    kwargs = {"token": token} if token else {}
    async with client(server, **kwargs) as service:
        listed = await service.list_secrets(ListSecretsQuery(project_id=PROJECT, **query))  # type: ignore[arg-type]
    assert isinstance(listed, SecretList)
    return listed


# --- GET /api/v4/secrets -----------------------------------------------------------------------------


async def test_list_one_folder(server: DevServer) -> None:
    listed = await _list(server, environment="dev")
    assert keys(listed.secrets) == ["APP_NAME", "CROSS", "DATABASE_URL", "GREETING"]
    assert {s.secret_path for s in listed.secrets} == {"/"}
    app = by_key(listed.secrets)["APP_NAME"]
    assert (app.secret_value, app.environment, app.workspace, app.type) == (
        "contract",
        "dev",
        PROJECT,
        "shared",
    )
    assert [t.slug for t in app.tags] == ["public"]
    assert app.created_at is not None and app.version == 1
    assert listed.etag


async def test_list_recursive_gives_secret_path_per_item(server: DevServer) -> None:
    listed = await _list(server, environment="dev", recursive=True, include_imports=False)
    paths = {(s.secret_path, s.secret_key) for s in listed.secrets}
    assert {
        ("/", "APP_NAME"),
        ("/backend", "API_KEY"),
        ("/backend", "LOG_LEVEL"),
        ("/backend/deep", "NESTED"),
    } <= paths
    sub = await _list(
        server, environment="dev", secret_path="/backend", recursive=True, include_imports=False
    )
    assert sorted((s.secret_path, s.secret_key) for s in sub.secrets) == [
        ("/backend", "API_KEY"),
        ("/backend", "LOG_LEVEL"),
        ("/backend/deep", "NESTED"),
    ]
    assert sub.imports == []


async def test_recursive_depth_limit_is_20(server: DevServer) -> None:
    """Limits table: recursion stops 20 folders below the listed path (enforced by the server)."""
    folders = [f"/l{i}" for i in range(1, 22)]
    server.set_secret(PROJECT, "staging", "".join(folders[:20]), "AT_DEPTH_20", "ok")
    server.set_secret(PROJECT, "staging", "".join(folders[:21]), "AT_DEPTH_21", "too-deep")
    listed = await _list(
        server, environment="staging", secret_path="/", recursive=True, include_imports=False
    )
    found = keys(listed.secrets)
    assert "AT_DEPTH_20" in found
    assert "AT_DEPTH_21" not in found


async def test_list_imports_in_position_order(server: DevServer) -> None:
    listed = await _list(server, environment="dev")
    assert [(g.environment, g.secret_path) for g in listed.imports] == [
        ("prod", "/shared"),
        ("staging", "/common"),
    ]
    assert [keys(g.secrets) for g in listed.imports] == [["SENTRY_DSN"], ["COMMON"]]
    assert listed.imports[0].secrets[0].secret_value == "https://s.example/1"
    assert all(g.folder_id for g in listed.imports)
    without = await _list(server, environment="dev", include_imports=False)
    assert without.imports == []


async def test_personal_overrides(server: DevServer) -> None:
    shared = await _list(server, environment="dev", secret_path="/backend")
    assert by_key(shared.secrets)["LOG_LEVEL"].secret_value == "debug"
    personal = await _list(server, environment="dev", secret_path="/backend", include_personal_overrides=True)
    log_level = by_key(personal.secrets)["LOG_LEVEL"]
    assert (log_level.secret_value, log_level.type) == ("trace", "personal")
    assert keys(personal.secrets) == ["API_KEY", "LOG_LEVEL"]  # replaced, not added


async def test_tag_slugs(server: DevServer) -> None:
    assert keys((await _list(server, environment="dev", tag_slugs=("database",))).secrets) == ["DATABASE_URL"]
    both = await _list(server, environment="dev", tag_slugs=("database", "public"))
    assert keys(both.secrets) == ["APP_NAME", "DATABASE_URL"]
    assert (await _list(server, environment="dev", tag_slugs=("no-such-tag",))).secrets == []


async def test_metadata_filter(server: DevServer) -> None:
    matched = await _list(server, environment="dev", metadata_filter=(("team", "payments"),))
    assert keys(matched.secrets) == ["DATABASE_URL"]
    entry = matched.secrets[0].secret_metadata[0]
    assert (entry.key, entry.value, entry.is_encrypted) == ("team", "payments", False)
    assert (await _list(server, environment="dev", metadata_filter=(("team", "billing"),))).secrets == []
    # Only unencrypted values can be filtered on.
    assert (await _list(server, environment="dev", metadata_filter=(("vault", "sealed"),))).secrets == []
    with pytest.raises(errors.ValidationError) as bad:
        await _list(server, environment="dev", metadata_filter=(("a|b", "c"),))
    assert bad.value.field == "metadataFilter"


async def test_expand_secret_references_on_and_off(server: DevServer) -> None:
    expanded = by_key((await _list(server, environment="dev")).secrets)
    assert expanded["GREETING"].secret_value == "hello contract"
    assert expanded["CROSS"].secret_value == "https://s.example/1"  # ${env.path.KEY}
    raw = by_key((await _list(server, environment="dev", expand_secret_references=False)).secrets)
    assert raw["GREETING"].secret_value == "hello ${APP_NAME}"
    assert raw["CROSS"].secret_value == "${prod.shared.SENTRY_DSN}"


async def test_view_secret_value_false_hides_values(server: DevServer) -> None:
    listed = await _list(server, environment="dev", view_secret_value=False)
    assert listed.secrets and all(s.secret_value_hidden for s in listed.secrets)
    assert all("contract" not in s.secret_value and "postgres" not in s.secret_value for s in listed.secrets)
    assert all(s.secret_value_hidden for g in listed.imports for s in g.secrets)
    visible = await _list(server, environment="dev")
    assert not any(s.secret_value_hidden for s in visible.secrets)


async def test_etag_gives_not_modified_until_a_change(server: DevServer) -> None:
    query = ListSecretsQuery(project_id=PROJECT, environment="prod", secret_path="/etag")
    server.set_secret(PROJECT, "prod", "/etag", "E", "1")
    async with client(server) as service:
        first = await service.list_secrets(query)
        assert isinstance(first, SecretList) and first.etag
        again = await service.list_secrets(query, etag=first.etag)
        assert again == NotModified(etag=first.etag)
        server.set_secret(PROJECT, "prod", "/etag", "E", "2")
        changed = await service.list_secrets(query, etag=first.etag)
    assert isinstance(changed, SecretList)
    assert changed.etag != first.etag
    assert by_key(changed.secrets)["E"].secret_value == "2"


async def test_list_missing_or_unknown_environment(server: DevServer) -> None:
    before = request_count(server)
    async with client(server) as service:
        with pytest.raises(errors.ValidationError) as missing:
            await service.list_secrets(ListSecretsQuery(project_id=PROJECT, environment=""))
        assert missing.value.field == "environment"
        assert request_count(server) == before  # refused client-side
        with pytest.raises(errors.NotFound):
            await service.list_secrets(ListSecretsQuery(project_id=PROJECT, environment="qa"))


def test_server_refuses_list_without_environment(server: DevServer) -> None:
    """The server refuses a list without an environment too (400, as the contract says)."""
    response = httpx.get(
        f"{server.base_url}/api/v4/secrets",
        params={"projectId": PROJECT},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert response.status_code == 400
    mapped = wire.error_for(response.status_code, response.json(), endpoint="GET /api/v4/secrets")
    assert isinstance(mapped, errors.ValidationError)
    assert "Missing project id or environment" in mapped.message


async def test_permission_outside_grant_is_denied_with_details(server: DevServer) -> None:
    inside = await _list(server, LIMITED_TOKEN, environment="dev", secret_path="/backend", recursive=True)
    assert keys(inside.secrets) == ["API_KEY", "LOG_LEVEL", "NESTED"]
    for path, env in (("/", "dev"), ("/backend", "prod")):
        with pytest.raises(errors.PermissionDenied) as denied:
            await _list(server, LIMITED_TOKEN, environment=env, secret_path=path)
        assert denied.value.status_code == 403
        assert denied.value.details == [
            {"action": "read", "subject": "secrets", "conditions": {"environment": env, "secretPath": path}}
        ]
    async with client(server, token=LIMITED_TOKEN) as limited:
        with pytest.raises(errors.PermissionDenied):
            await limited.create_secret(
                "NOPE", project_id=PROJECT, environment="dev", secret_path="/backend", value="x"
            )


# --- DELETE /api/v4/secrets/batch --------------------------------------------------------------------


async def test_batch_delete(server: DevServer) -> None:
    for key in ("B1", "B2", "B3"):
        server.set_secret(PROJECT, "prod", "/batch", key, f"value-{key}")
    async with client(server) as service:
        deleted = await service.delete_secrets_batch(
            project_id=PROJECT,
            environment="prod",
            secret_path="/batch",
            secrets=[("B1", "shared"), ("B2", "shared")],
        )
        assert sorted(keys(deleted)) == ["B1", "B2"]
        assert all(s.secret_path is None and s.tags == [] for s in deleted)  # batch answers omit them
        assert {s.environment for s in deleted} == {"prod"}
        left = await service.list_secrets(
            ListSecretsQuery(project_id=PROJECT, environment="prod", secret_path="/batch")
        )
        assert isinstance(left, SecretList) and keys(left.secrets) == ["B3"]
        # All or nothing: one missing key deletes nothing.
        with pytest.raises(errors.NotFound):
            await service.delete_secrets_batch(
                project_id=PROJECT,
                environment="prod",
                secret_path="/batch",
                secrets=[("B3", "shared"), ("GONE", "shared")],
            )
        left = await service.list_secrets(
            ListSecretsQuery(project_id=PROJECT, environment="prod", secret_path="/batch")
        )
        assert isinstance(left, SecretList) and keys(left.secrets) == ["B3"]


async def test_batch_delete_empty_list_refused_before_any_request(server: DevServer) -> None:
    before_route, before_all = request_count(server, BATCH_ROUTE), request_count(server)
    async with client(server) as service:
        with pytest.raises(errors.ValidationError) as empty:
            await service.delete_secrets_batch(project_id=PROJECT, environment="prod", secrets=[])
    assert empty.value.field == "secrets"
    assert "secrets" in str(empty.value)
    assert empty.value.status_code is None
    assert request_count(server, BATCH_ROUTE) == before_route
    assert request_count(server) == before_all


def test_batch_delete_empty_list_refused_by_the_server_too(server: DevServer) -> None:
    """Limits table ("at least 1 item") enforced server-side: bypass the client with raw httpx."""
    before = request_count(server, BATCH_ROUTE)
    response = httpx.request(
        "DELETE",
        f"{server.base_url}/api/v4/secrets/batch",
        json={"projectId": PROJECT, "environment": "prod", "secrets": []},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert response.status_code == 422
    body = response.json()
    assert body["error"] == "ValidationFailure"
    assert [issue["path"] for issue in body["message"]] == [["secrets"]]
    assert isinstance(wire.error_for(422, body, endpoint=BATCH_ROUTE), errors.ValidationError)
    assert request_count(server, BATCH_ROUTE) == before + 1


# --- POST/PATCH/DELETE /api/v4/secrets/{secretName} --------------------------------------------------


async def test_create_update_delete_secret(server: DevServer) -> None:
    where = {"project_id": PROJECT, "environment": "prod", "secret_path": "/writes"}
    async with client(server) as service:
        created = await service.create_secret(
            "WRITTEN",
            value="v1",
            comment="made by a test",
            tag_ids=["public"],
            metadata={"owner": "qa"},
            **where,
        )
        assert (created.secret_key, created.secret_value, created.version, created.type) == (
            "WRITTEN",
            "v1",
            1,
            "shared",
        )
        assert created.secret_comment == "made by a test"
        with pytest.raises(errors.ValidationError) as exists:  # the service answers 400 "already exists"
            await service.create_secret("WRITTEN", value="again", **where)
        assert exists.value.status_code == 400

        updated = await service.update_secret("WRITTEN", value="v2", **where)
        assert (updated.secret_value, updated.version) == ("v2", 2)
        renamed = await service.update_secret("WRITTEN", new_name="RENAMED", **where)
        assert renamed.secret_key == "RENAMED"
        listed = await service.list_secrets(
            ListSecretsQuery(project_id=PROJECT, environment="prod", secret_path="/writes")
        )
        assert isinstance(listed, SecretList)
        (only,) = listed.secrets
        assert (only.secret_key, only.secret_value, [t.slug for t in only.tags]) == (
            "RENAMED",
            "v2",
            ["public"],
        )
        assert [(m.key, m.value) for m in only.secret_metadata] == [("owner", "qa")]

        with pytest.raises(errors.NotFound):
            await service.update_secret("WRITTEN", value="v3", **where)
        deleted = await service.delete_secret("RENAMED", **where)
        assert deleted.secret_key == "RENAMED"
        with pytest.raises(errors.NotFound):
            await service.delete_secret("RENAMED", **where)
        with pytest.raises(errors.NotFound):
            await service.create_secret("X", project_id=PROJECT, environment="qa", value="x")
        with pytest.raises(errors.ValidationError) as empty_name:
            await service.create_secret("", value="x", **where)
        assert empty_name.value.field == "secretName"


# --- POST /api/v2/folders ----------------------------------------------------------------------------


async def test_create_folder(server: DevServer) -> None:
    async with client(server) as service:
        folder = await service.create_folder(
            project_id=PROJECT,
            environment="dev",
            name="payments",
            path="/backend",
            description="payments team",
        )
        assert (folder.name, folder.path, folder.description) == (
            "payments",
            "/backend/payments",
            "payments team",
        )
        assert folder.id and folder.env_id and folder.parent_id and folder.version == 1
        with pytest.raises(errors.ValidationError):  # already exists (400)
            await service.create_folder(
                project_id=PROJECT, environment="dev", name="payments", path="/backend"
            )
        with pytest.raises(errors.NotFound):
            await service.create_folder(project_id=PROJECT, environment="qa", name="x")
        before = request_count(server)
        with pytest.raises(errors.ValidationError) as empty:
            await service.create_folder(project_id=PROJECT, environment="dev", name="")
        assert empty.value.field == "name"
        assert request_count(server) == before
    async with client(server, token=LIMITED_TOKEN) as limited:
        with pytest.raises(errors.PermissionDenied):
            await limited.create_folder(project_id=PROJECT, environment="dev", name="nope", path="/backend")


# --- PATCH /api/v2/secret-imports/{secretImportId} ---------------------------------------------------


async def test_update_secret_import(server: DevServer) -> None:
    async with client(server) as service:
        updated = await service.update_secret_import(
            IMPORT_EDITABLE,
            project_id=PROJECT,
            environment="staging",
            path="/importer",
            import_environment="prod",
            import_path="/shared",
            position=1,
        )
        assert updated.id == IMPORT_EDITABLE
        assert (updated.import_path, updated.position) == ("/shared", 1)
        assert updated.import_env is not None and updated.import_env.slug == "prod"
        assert updated.folder_id and updated.is_replication is False
        listed = await service.list_secrets(
            ListSecretsQuery(project_id=PROJECT, environment="staging", secret_path="/importer")
        )
        assert isinstance(listed, SecretList)
        assert [(g.environment, g.secret_path, keys(g.secrets)) for g in listed.imports] == [
            ("prod", "/shared", ["SENTRY_DSN"])
        ]
        with pytest.raises(errors.NotFound):
            await service.update_secret_import(
                "0c0a0000-0000-4000-8000-0000000000ff",
                project_id=PROJECT,
                environment="staging",
                path="/importer",
            )
        with pytest.raises(errors.ValidationError) as empty:
            await service.update_secret_import("", project_id=PROJECT, environment="staging")
        assert empty.value.field == "secretImportId"

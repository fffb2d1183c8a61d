"""The official Python SDK (``infisicalsdk``) against the dev server, driven only through the SDK.

The SDK speaks v3 raw secrets, ``/api/v2/folders`` and ``/api/v1/dynamic-secrets``; if it works
here, a real client works against the dev server. No assertion shows a secret value: values are
compared in a statement of their own and only key names reach an assertion message.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from infisical_sdk import InfisicalSDKClient
from infisical_sdk.infisical_requests import APIError

from secretferry.devserver.testing import DevServer, run_dev_server

pytestmark = pytest.mark.integration

PROJECT = "44444444-4444-4444-8444-444444444444"
SLUG = "sdk"
CLIENT_ID = "sdk-client"
CLIENT_SECRET = secrets.token_urlsafe(24)  # a fresh credential per run, never printed
VALUES = {key: secrets.token_urlsafe(12) for key in ("A", "S1", "DEEP")}


def seed() -> dict[str, Any]:
    return {
        "organizations": [{"id": "org-sdk", "name": "SDK", "slug": "sdk-org"}],
        "projects": [
            {
                "id": PROJECT,
                "slug": SLUG,
                "environments": [{"slug": "dev", "name": "Dev"}, {"slug": "prod", "name": "Prod"}],
                "secrets": [
                    {"environment": "dev", "key": "A", "value": VALUES["A"]},
                    {"environment": "dev", "key": "REF", "value": "${A}"},
                    {"environment": "dev", "path": "/app", "key": "DEEP", "value": VALUES["DEEP"]},
                    {"environment": "prod", "path": "/shared", "key": "S1", "value": VALUES["S1"]},
                ],
                "imports": [
                    {
                        "id": "imp-sdk",
                        "environment": "dev",
                        "path": "/",
                        "from": {"environment": "prod", "path": "/shared"},
                    }
                ],
                "dynamicSecrets": [{"name": "pg", "environment": "dev", "path": "/", "type": "sql-database"}],
            }
        ],
        "identities": [
            {
                "id": "sdk-identity",
                "name": "sdk",
                "organization": "sdk-org",
                "universalAuth": {"clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET},
                "projects": [{"project": SLUG, "role": "member"}],
            }
        ],
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with run_dev_server(seed=seed(), data_dir=tmp_path_factory.mktemp("sdk")) as srv:
        yield srv


@pytest.fixture
def client(server: DevServer) -> Iterator[InfisicalSDKClient]:
    """Logged in with universal auth; the SDK's cache is off so every call reaches the server."""
    with InfisicalSDKClient(host=server.base_url, cache_ttl=None) as sdk:
        login = sdk.auth.universal_auth.login(client_id=CLIENT_ID, client_secret=CLIENT_SECRET)
        assert login.tokenType == "Bearer" and login.expiresIn > 0
        yield sdk


def mismatched(got: Mapping[str, str], want: Mapping[str, str]) -> list[str]:
    """Names of the keys whose values differ (never the values)."""
    return sorted(k for k in got.keys() | want.keys() if got.get(k) != want.get(k))


def status_of(error: pytest.ExceptionInfo[APIError]) -> int:
    return int(error.value.status_code)


def test_login_with_a_wrong_secret_fails(server: DevServer) -> None:
    with InfisicalSDKClient(host=server.base_url, cache_ttl=None) as sdk, pytest.raises(APIError) as failed:
        sdk.auth.universal_auth.login(client_id=CLIENT_ID, client_secret="not-it")
    assert status_of(failed) == 401


def test_list_secrets_with_references_and_imports(client: InfisicalSDKClient) -> None:
    listed = client.secrets.list_secrets(environment_slug="dev", secret_path="/", project_id=PROJECT)
    got = {s.secretKey: s.secretValue for s in listed.secrets}
    wrong = mismatched(got, {"A": VALUES["A"], "REF": VALUES["A"]})  # REF expanded (SDK default)
    assert wrong == []
    groups = [(i.environment, i.secretPath, [s["secretKey"] for s in i.secrets]) for i in listed.imports]
    assert groups == [("prod", "/shared", ["S1"])]
    by_slug = client.secrets.list_secrets(
        environment_slug="dev", secret_path="/", project_slug=SLUG, recursive=True, include_imports=False
    )
    keys = sorted((s.secretPath, s.secretKey) for s in by_slug.secrets)
    assert keys == [("/", "A"), ("/", "REF"), ("/app", "DEEP")] and by_slug.imports == []


def test_get_secret_direct_and_through_an_import(client: InfisicalSDKClient) -> None:
    direct = client.secrets.get_secret_by_name(
        secret_name="A", environment_slug="dev", secret_path="/", project_id=PROJECT
    )
    imported = client.secrets.get_secret_by_name(
        secret_name="S1", environment_slug="dev", secret_path="/", project_slug=SLUG
    )
    wrong = mismatched(
        {"A": direct.secretValue, "S1": imported.secretValue}, {"A": VALUES["A"], "S1": VALUES["S1"]}
    )
    assert wrong == []
    assert (imported.environment, imported.secretPath) == ("prod", "/shared")
    with pytest.raises(APIError) as missing:
        client.secrets.get_secret_by_name(
            secret_name="NOPE", environment_slug="dev", secret_path="/", project_id=PROJECT
        )
    assert status_of(missing) == 404


def test_create_update_rename_delete(client: InfisicalSDKClient) -> None:
    first, second = secrets.token_urlsafe(12), secrets.token_urlsafe(12)
    location: dict[str, Any] = {"secret_path": "/", "environment_slug": "dev", "project_id": PROJECT}
    created = client.secrets.create_secret_by_name(
        secret_name="MADE", secret_value=first, secret_comment="by the SDK", **location
    )
    assert (created.secretKey, created.version, created.secretComment) == ("MADE", 1, "by the SDK")
    with pytest.raises(APIError) as twice:
        client.secrets.create_secret_by_name(secret_name="MADE", secret_value=first, **location)
    assert status_of(twice) == 400

    updated = client.secrets.update_secret_by_name(
        current_secret_name="MADE", secret_value=second, new_secret_name="RENAMED", **location
    )
    assert (updated.secretKey, updated.version) == ("RENAMED", 2)
    fetched = client.secrets.get_secret_by_name(secret_name="RENAMED", **location)
    wrong = mismatched({"RENAMED": fetched.secretValue}, {"RENAMED": second})
    assert wrong == [] and fetched.secretComment == "by the SDK"

    deleted = client.secrets.delete_secret_by_name(secret_name="RENAMED", **location)
    assert deleted.secretKey == "RENAMED"
    with pytest.raises(APIError) as gone:
        client.secrets.get_secret_by_name(secret_name="RENAMED", **location)
    assert status_of(gone) == 404


def test_writes_by_project_slug_and_into_a_missing_folder(client: InfisicalSDKClient) -> None:
    location: dict[str, Any] = {"secret_path": "/", "environment_slug": "dev", "project_slug": SLUG}
    client.secrets.create_secret_by_name(secret_name="BY_SLUG", secret_value="x", **location)
    client.secrets.delete_secret_by_name(secret_name="BY_SLUG", **location)
    with pytest.raises(APIError) as no_folder:
        client.secrets.create_secret_by_name(
            secret_name="K",
            secret_value="x",
            secret_path="/not-there",
            environment_slug="dev",
            project_id=PROJECT,
        )
    assert status_of(no_folder) == 404 and no_folder.value.response["error"] == "CreateSecret"


def test_folders_create_list_and_use(client: InfisicalSDKClient) -> None:
    folder = client.folders.create_folder(name="svc", environment_slug="dev", project_id=PROJECT, path="/app")
    assert folder.name == "svc" and folder.path == "/app/svc"
    top = client.folders.list_folders(project_id=PROJECT, environment_slug="dev", path="/")
    assert [f.name for f in top.folders] == ["app"]
    deep = client.folders.list_folders(project_id=PROJECT, environment_slug="dev", path="/", recursive=True)
    assert [f.relativePath for f in deep.folders] == ["/app", "/app/svc"]
    location: dict[str, Any] = {"secret_path": "/app/svc", "environment_slug": "dev", "project_id": PROJECT}
    client.secrets.create_secret_by_name(secret_name="IN_SVC", secret_value="x", **location)
    listed = client.secrets.list_secrets(**location)
    assert [s.secretKey for s in listed.secrets] == ["IN_SVC"]


def test_dynamic_secret_by_name(client: InfisicalSDKClient) -> None:
    dynamic = client.dynamic_secrets.get_by_name(name="pg", project_slug=SLUG, environment_slug="dev")
    assert (dynamic.name, dynamic.type, dynamic.version) == ("pg", "sql-database", 1)
    with pytest.raises(APIError) as missing:
        client.dynamic_secrets.get_by_name(name="nope", project_slug=SLUG, environment_slug="dev")
    assert status_of(missing) == 404


def test_without_a_token_nothing_is_served(server: DevServer) -> None:
    with (
        InfisicalSDKClient(host=server.base_url, cache_ttl=None) as anonymous,
        pytest.raises(APIError) as refused,
    ):
        anonymous.secrets.list_secrets(environment_slug="dev", secret_path="/", project_id=PROJECT)
    assert status_of(refused) == 401


def test_the_sdk_leaves_no_trace_in_the_server_log(server: DevServer) -> None:
    """The dev server never logs a value it stores (the credential included)."""
    log = Path(server.log_path).read_text(errors="replace")
    leaked = [name for name, value in {**VALUES, "clientSecret": CLIENT_SECRET}.items() if value in log]
    assert leaked == []

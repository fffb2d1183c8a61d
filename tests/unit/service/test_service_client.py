"""ServiceClient over httpx.MockTransport: request shapes, error mapping, decoding."""

from __future__ import annotations

import datetime
import json
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from secretferry.service import client, errors, models

BASE = "https://sf.example"
TOKEN = "tok-secret-123"
SECRET = {"id": "s1", "secretKey": "A", "secretValue": "value-a", "environment": "dev", "version": 1}
PRIVILEGE = {"id": "pr1", "slug": "temp", "permissions": [], "isTemporary": True, "temporaryRange": "1h"}
START = datetime.datetime(2025, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
READ_DEV = {"actions": ["read"], "subject": "secrets", "conditions": {"environment": "dev"}}


class Recorder:
    """A MockTransport handler that records requests and answers with a canned response."""

    def __init__(self, response: httpx.Response | Callable[[httpx.Request], httpx.Response]) -> None:
        self.requests: list[httpx.Request] = []
        self._response = response

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if callable(self._response):
            return self._response(request)
        return self._response

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]


def make(
    response: httpx.Response | Callable[[httpx.Request], httpx.Response], **kwargs: Any
) -> tuple[client.ServiceClient, Recorder]:
    recorder = Recorder(response)
    kwargs.setdefault("access_token", TOKEN)
    return client.ServiceClient(BASE, transport=httpx.MockTransport(recorder), **kwargs), recorder


def body_of(request: httpx.Request) -> Any:
    return json.loads(request.content) if request.content else None


Call = Callable[[client.ServiceClient], Awaitable[Any]]

# (name, call, method, path, query, body, response json, check on the result)
ENDPOINTS: list[tuple[str, Call, str, str, dict[str, str] | None, Any, Any, Callable[[Any], bool]]] = [
    (
        "delete_secrets_batch",
        lambda c: c.delete_secrets_batch(
            project_id="p1", environment="dev", secrets=[("A", "shared"), ("B", "personal")]
        ),
        "DELETE",
        "/api/v4/secrets/batch",
        None,
        {
            "projectId": "p1",
            "environment": "dev",
            "secretPath": "/",
            "secrets": [{"secretKey": "A", "type": "shared"}, {"secretKey": "B", "type": "personal"}],
        },
        {"secrets": [SECRET]},
        lambda r: r[0].secret_key == "A",
    ),
    (
        "create_secret",
        lambda c: c.create_secret(
            "A/B",
            project_id="p1",
            environment="dev",
            value="v",
            secret_path="/app",
            comment="c",
            tag_ids=["t1"],
            metadata={"team": "x"},
            skip_multiline_encoding=True,
        ),
        "POST",
        "/api/v4/secrets/A%2FB",
        None,
        {
            "projectId": "p1",
            "environment": "dev",
            "secretPath": "/app",
            "type": "shared",
            "secretValue": "v",
            "secretComment": "c",
            "tagIds": ["t1"],
            "secretMetadata": [{"key": "team", "value": "x"}],
            "skipMultilineEncoding": True,
        },
        {"secret": SECRET},
        lambda r: r.secret_key == "A",
    ),
    (
        "create_secret minimal",
        lambda c: c.create_secret("A", project_id="p1", environment="dev", value=""),
        "POST",
        "/api/v4/secrets/A",
        None,
        {"projectId": "p1", "environment": "dev", "secretPath": "/", "type": "shared", "secretValue": ""},
        {"secret": SECRET},
        lambda r: r.secret_key == "A",
    ),
    (
        "update_secret",
        lambda c: c.update_secret("A", project_id="p1", environment="dev", value="v2", new_name="B"),
        "PATCH",
        "/api/v4/secrets/A",
        None,
        {
            "projectId": "p1",
            "environment": "dev",
            "secretPath": "/",
            "type": "shared",
            "secretValue": "v2",
            "newSecretName": "B",
        },
        {"secret": SECRET},
        lambda r: r.secret_key == "A",
    ),
    (
        "delete_secret",
        lambda c: c.delete_secret("A", project_id="p1", environment="dev", type="personal"),
        "DELETE",
        "/api/v4/secrets/A",
        None,
        {"projectId": "p1", "environment": "dev", "secretPath": "/", "type": "personal"},
        {"secret": SECRET},
        lambda r: r.secret_key == "A",
    ),
    (
        "create_folder",
        lambda c: c.create_folder(project_id="p1", environment="dev", name="app", path="/x", description="d"),
        "POST",
        "/api/v2/folders",
        None,
        {"projectId": "p1", "environment": "dev", "name": "app", "path": "/x", "description": "d"},
        {"folder": {"id": "f1", "name": "app", "path": "/x/app"}},
        lambda r: r.name == "app",
    ),
    (
        "update_secret_import",
        lambda c: c.update_secret_import(
            "i1",
            project_id="p1",
            environment="dev",
            import_environment="prod",
            import_path="/shared",
            position=2,
        ),
        "PATCH",
        "/api/v2/secret-imports/i1",
        None,
        {
            "projectId": "p1",
            "environment": "dev",
            "path": "/",
            "import": {"environment": "prod", "path": "/shared", "position": 2},
        },
        {
            "message": "ok",
            "secretImport": {
                "id": "i1",
                "importPath": "/shared",
                "position": 2,
                "importEnv": {"slug": "prod"},
            },
        },
        lambda r: r.import_env.slug == "prod",
    ),
    (
        "create_identity_privilege_temporary",
        lambda c: c.create_identity_privilege_temporary(
            identity_id="id1",
            project_slug="proj",
            temporary_range="1h",
            temporary_access_start_time=START,
            slug="temp",
            permissions=[
                models.PermissionSent(
                    action="read",
                    subject="secrets",
                    conditions=models.PermissionConditions(
                        environment="dev", secret_path=models.GlobPattern(glob="/a/**")
                    ),
                )
            ],
        ),
        "POST",
        "/api/v1/additional-privilege/identity/temporary",
        None,
        {
            "identityId": "id1",
            "projectSlug": "proj",
            "slug": "temp",
            "temporaryMode": "relative",
            "temporaryRange": "1h",
            "temporaryAccessStartTime": "2025-01-02T03:04:05Z",
            "permissions": [
                {
                    "action": "read",
                    "subject": "secrets",
                    "conditions": {"environment": "dev", "secretPath": {"$glob": "/a/**"}},
                }
            ],
        },
        {"privilege": PRIVILEGE},
        lambda r: r.is_temporary,
    ),
    (
        "update_identity_privilege",
        lambda c: c.update_identity_privilege(
            privilege_slug="temp",
            identity_id="id1",
            project_slug="proj",
            slug="temp2",
            privilege_permission=READ_DEV,
            is_temporary=False,
        ),
        "PATCH",
        "/api/v1/additional-privilege/identity",
        None,
        {
            "privilegeSlug": "temp",
            "identityId": "id1",
            "projectSlug": "proj",
            "privilegeDetails": {"slug": "temp2", "privilegePermission": READ_DEV, "isTemporary": False},
        },
        {"privilege": PRIVILEGE},
        lambda r: r.slug == "temp",
    ),
    (
        "delete_identity_privilege",
        lambda c: c.delete_identity_privilege(privilege_slug="temp", identity_id="id1", project_slug="proj"),
        "DELETE",
        "/api/v1/additional-privilege/identity",
        None,
        {"privilegeSlug": "temp", "identityId": "id1", "projectSlug": "proj"},
        {"privilege": PRIVILEGE},
        lambda r: r.id == "pr1",
    ),
    (
        "get_identity_privilege",
        lambda c: c.get_identity_privilege("temp", identity_id="id1", project_slug="proj"),
        "GET",
        "/api/v1/additional-privilege/identity/temp",
        {"identityId": "id1", "projectSlug": "proj"},
        None,
        {"privilege": PRIVILEGE},
        lambda r: r.id == "pr1",
    ),
    (
        "list_identity_privileges",
        lambda c: c.list_identity_privileges(identity_id="id1", project_slug="proj"),
        "GET",
        "/api/v1/additional-privilege/identity",
        {"identityId": "id1", "projectSlug": "proj"},
        None,
        {"privileges": [PRIVILEGE, PRIVILEGE]},
        lambda r: len(r) == 2,
    ),
    (
        "update_identity_privilege_v2",
        lambda c: c.update_identity_privilege_v2(
            "pr1",
            slug="s",
            permissions=[models.PermissionSent(action=["read"], subject="secrets", inverted=False)],
            type={"isTemporary": False},
        ),
        "PATCH",
        "/api/v2/identity-project-additional-privilege/pr1",
        None,
        {
            "slug": "s",
            "permissions": [{"action": ["read"], "subject": "secrets", "inverted": False}],
            "type": {"isTemporary": False},
        },
        {"privilege": PRIVILEGE},
        lambda r: r.project_membership_id is None,
    ),
    (
        "delete_identity_privilege_v2",
        lambda c: c.delete_identity_privilege_v2("pr1"),
        "DELETE",
        "/api/v2/identity-project-additional-privilege/pr1",
        None,
        None,
        {"privilege": PRIVILEGE},
        lambda r: r.id == "pr1",
    ),
    (
        "remove_universal_auth",
        lambda c: c.remove_universal_auth("id1"),
        "DELETE",
        "/api/v1/auth/universal-auth/identities/id1",
        None,
        None,
        {"identityUniversalAuth": {"id": "u1", "clientId": "c", "accessTokenTTL": 2592000}},
        lambda r: r.access_token_ttl == 2592000,
    ),
    (
        "remove_kubernetes_auth",
        lambda c: c.remove_kubernetes_auth("id1"),
        "DELETE",
        "/api/v1/auth/kubernetes-auth/identities/id1",
        None,
        None,
        {"identityKubernetesAuth": {"id": "k1", "tokenReviewMode": "api", "kubernetesHost": "https://k"}},
        lambda r: r.token_review_mode == "api",
    ),
    (
        "delete_org_membership",
        lambda c: c.delete_org_membership("o1", "m1"),
        "DELETE",
        "/api/v2/organizations/o1/memberships/m1",
        None,
        None,
        {"membership": {"id": "m1", "status": "invited"}},
        lambda r: r.status == "invited",
    ),
    (
        "get_dynamic_secret",
        lambda c: c.get_dynamic_secret("db", project_slug="proj", environment_slug="dev"),
        "GET",
        "/api/v1/dynamic-secrets/db",
        {"projectSlug": "proj", "environmentSlug": "dev", "path": "/"},
        None,
        {"dynamicSecret": {"id": "d1", "name": "db", "defaultTTL": "1h", "inputs": {"password": "x"}}},
        lambda r: r.default_ttl == "1h",
    ),
    (
        "get_project_by_slug bare",
        lambda c: c.get_project_by_slug("my-proj"),
        "GET",
        "/api/v1/projects/slug/my-proj",
        None,
        None,
        {"id": "p1", "slug": "my-proj", "name": "Mine"},
        lambda r: r.id == "p1",
    ),
    (
        "get_project_by_slug project",
        lambda c: c.get_project_by_slug("my-proj"),
        "GET",
        "/api/v1/projects/slug/my-proj",
        None,
        None,
        {"project": {"id": "p1", "slug": "my-proj"}},
        lambda r: r.id == "p1",
    ),
    (
        "get_project_by_slug workspace",
        lambda c: c.get_project_by_slug("my-proj"),
        "GET",
        "/api/v1/projects/slug/my-proj",
        None,
        None,
        {"workspace": {"_id": "p1", "name": "Mine"}},
        lambda r: r.id == "p1" and r.name == "Mine",
    ),
]


@pytest.mark.parametrize(
    ("name", "call", "method", "path", "query", "body", "answer", "check"),
    ENDPOINTS,
    ids=[case[0] for case in ENDPOINTS],
)
async def test_endpoint_request_shape(
    name: str,
    call: Call,
    method: str,
    path: str,
    query: dict[str, str] | None,
    body: Any,
    answer: Any,
    check: Callable[[Any], bool],
) -> None:
    service, recorder = make(httpx.Response(200, json=answer))
    async with service:
        result = await call(service)
    request = recorder.last
    assert request.method == method
    assert request.url.raw_path.decode().split("?")[0] == path
    assert dict(request.url.params) == (query or {})
    assert body_of(request) == body
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["user-agent"].startswith("secretferry/")
    assert check(result)


@pytest.mark.parametrize(
    ("call", "path", "body"),
    [
        (
            lambda c: c.login_kubernetes(identity_id="id1", jwt="sa-jwt"),
            "/api/v1/auth/kubernetes-auth/login",
            {"identityId": "id1", "jwt": "sa-jwt"},
        ),
        (
            lambda c: c.login_kubernetes(identity_id="id1", jwt="sa-jwt", organization_slug="org"),
            "/api/v1/auth/kubernetes-auth/login",
            {"identityId": "id1", "jwt": "sa-jwt", "organizationSlug": "org"},
        ),
        (
            lambda c: c.login_oidc(identity_id="id1", jwt="sa-jwt"),
            "/api/v1/auth/oidc-auth/login",
            {"identityId": "id1", "jwt": "sa-jwt"},
        ),
        (
            lambda c: c.login_jwt(identity_id="id1", jwt="sa-jwt"),
            "/api/v1/auth/jwt-auth/login",
            {"identityId": "id1", "jwt": "sa-jwt"},
        ),
        (
            lambda c: c.login_universal(client_id="cid", client_secret="csecret"),
            "/api/v1/auth/universal-auth/login",
            {"clientId": "cid", "clientSecret": "csecret"},
        ),
        (lambda c: c.renew_token("old-token"), "/api/v1/auth/token/renew", {"accessToken": "old-token"}),
    ],
)
async def test_login_calls_send_no_bearer(call: Call, path: str, body: Any) -> None:
    answer = {
        "accessToken": "new-token",
        "expiresIn": 7200,
        "accessTokenMaxTTL": 2592000,
        "tokenType": "Bearer",
    }
    service, recorder = make(httpx.Response(200, json=answer), access_token=None)
    async with service:
        result = await call(service)
    assert recorder.last.method == "POST"
    assert recorder.last.url.path == path
    assert body_of(recorder.last) == body
    assert "authorization" not in recorder.last.headers
    assert isinstance(result, models.LoginResult)
    assert (result.access_token, result.expires_in, result.access_token_max_ttl) == (
        "new-token",
        7200,
        2592000,
    )


async def test_revoke_token() -> None:
    service, recorder = make(httpx.Response(200, json={"message": "revoked"}), access_token=None)
    async with service:
        await service.revoke_token("old")
    assert recorder.last.url.path == "/api/v1/auth/token/revoke"
    assert body_of(recorder.last) == {"accessToken": "old"}


async def test_dynamic_secret_needs_a_token() -> None:
    service, recorder = make(httpx.Response(200, json={"dynamicSecret": {"name": "db"}}), access_token=None)
    async with service:
        with pytest.raises(errors.AuthenticationError):
            await service.get_dynamic_secret("db", project_slug="p", environment_slug="dev", path="/x")
    assert recorder.requests == []
    service, recorder = make(httpx.Response(200, json={"dynamicSecret": {"name": "db"}}))
    async with service:
        await service.get_dynamic_secret("db", project_slug="p", environment_slug="dev", path="/x")
    assert recorder.last.headers["authorization"].startswith("Bearer ")
    assert recorder.last.url.params["path"] == "/x"


async def test_calls_needing_a_token_refuse_without_one() -> None:
    service, recorder = make(httpx.Response(200, json={}), access_token=None)
    async with service:
        with pytest.raises(errors.AuthenticationError):
            await service.remove_universal_auth("id1")
    assert recorder.requests == []


async def test_list_secrets_query_etag_and_imports() -> None:
    answer = {
        "secrets": [SECRET | {"secretPath": "/"}],
        "imports": [
            {"secretPath": "/shared", "environment": "prod", "folderId": "f", "secrets": [{"secretKey": "S"}]}
        ],
    }
    service, recorder = make(httpx.Response(200, json=answer, headers={"ETag": 'W/"abc"'}))
    query = models.ListSecretsQuery(
        project_id="p1", environment="dev", secret_path="/app", tag_slugs=["a", "b"]
    )
    async with service:
        listed = await service.list_secrets(query)
    assert isinstance(listed, models.SecretList)
    assert listed.etag == 'W/"abc"'
    assert listed.secrets[0].secret_value == "value-a"
    assert listed.imports[0].secrets[0].secret_key == "S"
    request = recorder.last
    assert (request.method, request.url.path) == ("GET", "/api/v4/secrets")
    assert request.url.params.multi_items() == [
        ("projectId", "p1"),
        ("environment", "dev"),
        ("secretPath", "/app"),
        ("viewSecretValue", "true"),
        ("expandSecretReferences", "true"),
        ("recursive", "false"),
        ("includePersonalOverrides", "false"),
        ("includeImports", "true"),
        ("include_imports", "true"),
        ("tagSlugs", "a,b"),
    ]
    assert "if-none-match" not in request.headers


async def test_list_secrets_not_modified() -> None:
    service, recorder = make(httpx.Response(304, headers={"ETag": '"e1"'}))
    async with service:
        result = await service.list_secrets(
            models.ListSecretsQuery(project_id="p1", environment="dev"), etag='"e1"'
        )
    assert result == models.NotModified(etag='"e1"')
    assert recorder.last.headers["if-none-match"] == '"e1"'


async def test_list_secrets_not_modified_without_etag_header_keeps_ours() -> None:
    service, _ = make(httpx.Response(304))
    async with service:
        result = await service.list_secrets(
            models.ListSecretsQuery(project_id="p1", environment="dev"), etag='"e1"'
        )
    assert result == models.NotModified(etag='"e1"')


ERROR_CASES = [
    (400, {"message": "Missing project id or environment"}, {}, errors.ValidationError),
    (
        401,
        {"statusCode": 401, "message": "Token expired", "error": "UnauthorizedError"},
        {},
        errors.AuthenticationError,
    ),
    (403, {"statusCode": 403, "message": "expired", "error": "TokenError"}, {}, errors.AuthenticationError),
    (
        403,
        {"statusCode": 403, "message": "no", "error": "PermissionDenied", "details": {"x": 1}},
        {},
        errors.PermissionDenied,
    ),
    (404, {"statusCode": 404, "message": "Env not found", "error": "NotFound"}, {}, errors.NotFound),
    (
        422,
        {"statusCode": 422, "message": [{"message": "Required", "path": ["projectId"]}]},
        {},
        errors.ValidationError,
    ),
    (429, {"message": "slow down"}, {"retry-after": "7"}, errors.RateLimited),
    (500, {"message": "Something went wrong"}, {}, errors.Unavailable),
    (503, None, {}, errors.Unavailable),
]


@pytest.mark.parametrize(("status", "body", "headers", "cls"), ERROR_CASES)
async def test_error_mapping(
    status: int, body: Any, headers: dict[str, str], cls: type[errors.ServiceError]
) -> None:
    response = (
        httpx.Response(status, json=body | {"reqId": "req-1"}, headers=headers)
        if body is not None
        else httpx.Response(status, text="<html>upstream down</html>", headers={"content-type": "text/html"})
    )
    service, _ = make(response)
    async with service:
        with pytest.raises(cls) as info:
            await service.list_secrets(models.ListSecretsQuery(project_id="p1", environment="dev"))
    exc = info.value
    assert type(exc) is cls
    assert exc.status_code == status
    assert "GET /api/v4/secrets" in str(exc)
    assert TOKEN not in str(exc)
    assert "upstream down" not in str(exc)
    if body is not None:
        assert exc.req_id == "req-1"
    if cls is errors.RateLimited:
        assert isinstance(exc, errors.RateLimited) and exc.retry_after == 7.0


@pytest.mark.parametrize(
    ("exception", "cls"),
    [
        (httpx.ConnectError("refused"), errors.Unavailable),
        (httpx.ConnectTimeout("slow"), errors.Unavailable),
        (httpx.ReadTimeout("slow"), errors.Unavailable),
        (httpx.RemoteProtocolError("peer closed"), errors.Unavailable),
        (httpx.DecodingError("bad gzip"), errors.ProtocolError),
    ],
)
async def test_transport_failures_are_wrapped(exception: Exception, cls: type[errors.ServiceError]) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise exception

    service, _ = make(fail)
    async with service:
        with pytest.raises(cls) as info:
            await service.delete_org_membership("o1", "m1")
    assert info.value.__cause__ is exception
    assert not isinstance(info.value, httpx.HTTPError)


@pytest.mark.parametrize(
    ("response", "fragment"),
    [
        (
            httpx.Response(200, text="<html>login</html>", headers={"content-type": "text/html"}),
            "content type",
        ),
        (
            httpx.Response(200, content=b"{broken", headers={"content-type": "application/json"}),
            "not valid JSON",
        ),
        (httpx.Response(200, json={"secrets": [{"secretValue": "leaky-value"}]}), "secrets.0.secretKey"),
        (httpx.Response(200, json={"secret": SECRET}), "secrets"),
        (httpx.Response(302, headers={"location": "https://elsewhere"}), "redirect"),
    ],
)
async def test_bad_success_answers_are_protocol_errors(response: httpx.Response, fragment: str) -> None:
    service, _ = make(response)
    async with service:
        with pytest.raises(errors.ProtocolError) as info:
            await service.list_secrets(models.ListSecretsQuery(project_id="p1", environment="dev"))
    assert fragment in str(info.value)
    assert "leaky-value" not in str(info.value)
    assert isinstance(info.value, errors.ProtocolError)
    assert "GET /api/v4/secrets" in str(info.value)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda c: c.delete_secrets_batch(project_id="p1", environment="dev", secrets=[]), "secrets"),
        (
            lambda c: c.delete_secrets_batch(project_id="", environment="dev", secrets=[("A", "shared")]),
            "projectId",
        ),
        (lambda c: c.create_secret("", project_id="p1", environment="dev", value="v"), "secretName"),
        (lambda c: c.create_folder(project_id="p1", environment="dev", name=""), "name"),
        (lambda c: c.get_identity_privilege("", identity_id="i", project_slug="p"), "privilegeSlug"),
        (lambda c: c.list_identity_privileges(identity_id="", project_slug="p"), "identityId"),
        (
            lambda c: c.delete_identity_privilege(privilege_slug="s", identity_id="i", project_slug=""),
            "projectSlug",
        ),
        (
            lambda c: c.create_identity_privilege_temporary(
                identity_id="i", project_slug="p", temporary_range="1 hour", temporary_access_start_time=START
            ),
            "temporaryRange",
        ),
        (
            lambda c: c.create_identity_privilege_temporary(
                identity_id="i",
                project_slug="p",
                temporary_range="1h",
                temporary_access_start_time=START,
                slug="x" * 61,
            ),
            "slug",
        ),
        (
            lambda c: c.create_identity_privilege_temporary(
                identity_id="i",
                project_slug="p",
                temporary_range="1h",
                temporary_access_start_time=datetime.datetime(2025, 1, 1),
            ),
            "temporaryAccessStartTime",
        ),
        (
            lambda c: c.update_identity_privilege(
                privilege_slug="s", identity_id="i", project_slug="p", temporary_range="forever"
            ),
            "privilegeDetails.temporaryRange",
        ),
        (lambda c: c.update_identity_privilege_v2("pr1", slug="", permissions=[], type={}), "slug"),
        (lambda c: c.get_dynamic_secret("db", project_slug="p", environment_slug=""), "environmentSlug"),
        (lambda c: c.get_dynamic_secret("", project_slug="p", environment_slug="dev"), "name"),
        (lambda c: c.login_kubernetes(identity_id="", jwt="j"), "identityId"),
        (lambda c: c.login_oidc(identity_id="", jwt="j"), "identityId"),
        (lambda c: c.login_jwt(identity_id="i", jwt=""), "jwt"),
        (lambda c: c.list_secrets(models.ListSecretsQuery(project_id="p1", environment="")), "environment"),
    ],
)
async def test_validation_before_any_request(call: Call, field: str) -> None:
    service, recorder = make(httpx.Response(200, json={}))
    async with service:
        with pytest.raises(errors.ValidationError) as info:
            await call(service)
    assert info.value.field == field
    assert recorder.requests == []


@pytest.mark.parametrize(
    "base_url",
    ["https://sf.example", "https://sf.example/", "https://sf.example/api", "https://sf.example/api/"],
)
async def test_base_url_with_or_without_api(base_url: str) -> None:
    recorder = Recorder(httpx.Response(200, json={"membership": {}}))
    async with client.ServiceClient(
        base_url, access_token=TOKEN, transport=httpx.MockTransport(recorder)
    ) as service:
        await service.delete_org_membership("o1", "m1")
    assert str(recorder.last.url) == "https://sf.example/api/v2/organizations/o1/memberships/m1"


async def test_with_token_shares_the_pool_and_keeps_it_open() -> None:
    service, recorder = make(httpx.Response(200, json={"membership": {}}), access_token=None)
    view = service.with_token("other-token")
    assert view._conn is service._conn
    async with view:
        await view.delete_org_membership("o1", "m1")
    # closing the view leaves the shared pool usable
    await service.with_token("third").delete_org_membership("o1", "m1")
    await service.aclose()
    assert [r.headers["authorization"] for r in recorder.requests] == ["Bearer other-token", "Bearer third"]
    assert "other-token" not in repr(view)


def test_stream_read_timeout_must_exceed_three_heartbeats() -> None:
    with pytest.raises(errors.ValidationError) as info:
        client.ServiceClient(BASE, stream_read_timeout=45.0)
    assert info.value.field == "stream_read_timeout"


async def test_custom_user_agent_and_ca_bundle_errors() -> None:
    service, recorder = make(httpx.Response(200, json={"membership": {}}), user_agent="probe/1")
    async with service:
        await service.delete_org_membership("o", "m")
    assert recorder.last.headers["user-agent"] == "probe/1"
    with pytest.raises(errors.ValidationError) as info:
        client.ServiceClient(BASE, verify="/nonexistent/ca.pem")
    assert info.value.field == "verify"


async def test_unrequested_not_modified_is_a_protocol_error() -> None:
    service, _ = make(httpx.Response(304))
    async with service:
        with pytest.raises(errors.ProtocolError):
            await service.list_secrets(models.ListSecretsQuery(project_id="p1", environment="dev"))


async def test_a_certificate_that_does_not_verify_is_TLSVerifyFailed_naming_the_host() -> None:
    verify = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    verify.verify_message = "unable to get local issuer certificate"
    failure = httpx.ConnectError(str(verify))
    failure.__cause__ = verify

    def fail(request: httpx.Request) -> httpx.Response:
        raise failure

    service, _ = make(fail)
    async with service:
        with pytest.raises(errors.TLSVerifyFailed) as info:
            await service.delete_org_membership("o1", "m1")
    assert isinstance(info.value, errors.Unavailable)  # retried: the server or the bundle may change
    assert "sf.example" in info.value.message
    assert "unable to get local issuer certificate" in info.value.message
    assert TOKEN not in info.value.message


async def test_another_tls_failure_stays_a_connection_failure() -> None:
    failure = httpx.ConnectError("wrong version number")
    failure.__cause__ = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")

    def fail(request: httpx.Request) -> httpx.Response:
        raise failure

    service, _ = make(fail)
    async with service:
        with pytest.raises(errors.Unavailable) as info:
            await service.delete_org_membership("o1", "m1")
    assert not isinstance(info.value, errors.TLSVerifyFailed)

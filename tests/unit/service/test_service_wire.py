"""Pure wire translation: API root, list query, retry-after, error mapping."""

from __future__ import annotations

import pytest

from secretferry.service import errors, models, wire

ENDPOINT = "GET /api/v4/secrets"


@pytest.mark.parametrize(
    ("base_url", "root"),
    [
        ("https://sf.example", "https://sf.example/api"),
        ("https://sf.example/", "https://sf.example/api"),
        ("https://sf.example/api", "https://sf.example/api"),
        ("https://sf.example/api/", "https://sf.example/api"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/api"),
        ("https://sf.example/infisical", "https://sf.example/infisical/api"),
        ("  https://sf.example/infisical/api// ", "https://sf.example/infisical/api"),
    ],
)
def test_api_root(base_url: str, root: str) -> None:
    assert wire.api_root(base_url) == root


@pytest.mark.parametrize("base_url", ["sf.example", "ftp://sf.example", "", "https://"])
def test_api_root_refuses_non_http_urls(base_url: str) -> None:
    with pytest.raises(errors.ValidationError) as info:
        wire.api_root(base_url)
    assert info.value.field == "base_url"


def test_segment_quotes_everything_special() -> None:
    assert wire.segment("A/B C?%") == "A%2FB%20C%3F%25"
    assert wire.segment("a..b") == "a..b"
    for dots in (".", ".."):  # httpx would drop them from the path: slug/.. is GET /api/v1/projects
        with pytest.raises(errors.ValidationError):
            wire.segment(dots)


def test_list_params_send_every_boolean_and_both_import_spellings() -> None:
    query = models.ListSecretsQuery(project_id="p1", environment="dev")
    assert wire.list_secrets_params(query) == [
        ("projectId", "p1"),
        ("environment", "dev"),
        ("secretPath", "/"),
        ("viewSecretValue", "true"),
        ("expandSecretReferences", "true"),
        ("recursive", "false"),
        ("includePersonalOverrides", "false"),
        ("includeImports", "true"),
        ("include_imports", "true"),
    ]


def test_list_params_flags_tags_and_metadata() -> None:
    query = models.ListSecretsQuery(
        project_id="p1",
        environment="prod",
        secret_path="/app/**",
        view_secret_value=False,
        expand_secret_references=False,
        recursive=True,
        include_personal_overrides=True,
        include_imports=False,
        tag_slugs=["a", "b"],
        metadata_filter=[("team", "x"), {"key": "tier", "value": "1"}],
    )
    params = dict(wire.list_secrets_params(query))
    assert params == {
        "projectId": "p1",
        "environment": "prod",
        "secretPath": "/app/**",
        "viewSecretValue": "false",
        "expandSecretReferences": "false",
        "recursive": "true",
        "includePersonalOverrides": "true",
        "includeImports": "false",
        "include_imports": "false",
        "tagSlugs": "a,b",
        "metadataFilter": "key=team,value=x|key=tier,value=1",
    }


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"project_id": ""}, "projectId"),
        ({"environment": ""}, "environment"),
        ({"secret_path": ""}, "secretPath"),
        ({"tag_slugs": ["a,b"]}, "tagSlugs"),
        ({"tag_slugs": [""]}, "tagSlugs"),
        ({"metadata_filter": [("k|x", "v")]}, "metadataFilter"),
        ({"metadata_filter": [("k", "v,1")]}, "metadataFilter"),
        ({"metadata_filter": [("", "v")]}, "metadataFilter"),
        # The service would drop the pair (no filter: every secret), or trim it, or refuse 11 (422).
        ({"metadata_filter": [("k", "")]}, "metadataFilter"),
        ({"metadata_filter": [("k", " v")]}, "metadataFilter"),
        ({"metadata_filter": [(f"k{i}", "v") for i in range(11)]}, "metadataFilter"),
    ],
)
def test_list_params_refuse_bad_input(changes: dict[str, object], field: str) -> None:
    base: dict[str, object] = {"project_id": "p1", "environment": "dev"}
    query = models.ListSecretsQuery.model_validate(base | changes)
    with pytest.raises(errors.ValidationError) as info:
        wire.list_secrets_params(query)
    assert info.value.field == field


def test_v3_list_params_name_the_project_workspace_and_send_every_boolean() -> None:
    query = models.ListSecretsQuery(project_id="p1", environment="dev", secret_path="/app", recursive=True)
    assert wire.list_secrets_v3_params(query) == [
        ("workspaceId", "p1"),
        ("environment", "dev"),
        ("secretPath", "/app"),
        ("viewSecretValue", "true"),
        ("expandSecretReferences", "true"),
        ("recursive", "true"),
        ("include_imports", "true"),
    ]
    filtered = query.model_copy(
        update={"include_imports": False, "tag_slugs": ("a",), "metadata_filter": (("team", "x"),)}
    )
    params = dict(wire.list_secrets_v3_params(filtered))
    assert params["include_imports"] == "false" and "includeImports" not in params
    assert params["tagSlugs"] == "a" and params["metadataFilter"] == "key=team,value=x"


def test_v3_list_params_refuse_personal_overrides_it_cannot_give() -> None:
    query = models.ListSecretsQuery(project_id="p1", environment="dev", include_personal_overrides=True)
    with pytest.raises(errors.ValidationError) as info:
        wire.list_secrets_v3_params(query)
    assert info.value.field == "includePersonalOverrides"


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, None),
        ("30", 30.0),
        (" 1.5 ", 1.5),
        ("0", 0.0),
        ("soon", None),
        ("-3", None),
        ("nan", None),
        ("999999999", 600.0),  # a broken or hostile server cannot park a scope for years
        ("inf", None),
    ],
)
def test_retry_after(header: str | None, seconds: float | None) -> None:
    assert wire.retry_after(header) == seconds


@pytest.mark.parametrize(
    ("content", "body"),
    [(b"", {}), (b"<html>502</html>", {}), (b"[1]", {}), (b'{"message": "x"}', {"message": "x"})],
)
def test_decode_error_body(content: bytes, body: dict[str, object]) -> None:
    assert wire.decode_error_body(content) == body


TOKEN_ERROR = {"error": "TokenError", "message": "Your token has expired"}


@pytest.mark.parametrize(
    ("status", "body", "subscribe", "cls"),
    [
        (400, {"message": "Missing project id or environment"}, False, errors.ValidationError),
        (400, {"message": "Your plan does not support event subscriptions"}, False, errors.ValidationError),
        (400, {"message": "Your plan does not support event subscriptions"}, True, errors.PlanNotSupported),
        (400, {"message": "bad register"}, True, errors.ValidationError),
        (401, {"message": "Invalid credentials"}, False, errors.AuthenticationError),
        (401, {"message": [{"message": "Required", "path": ["identityId"]}]}, False, errors.ValidationError),
        (403, TOKEN_ERROR, False, errors.AuthenticationError),
        (403, {"error": "PermissionDenied", "message": "no"}, False, errors.PermissionDenied),
        (403, {}, True, errors.PermissionDenied),
        (404, {"message": "Folder not found"}, False, errors.NotFound),
        (404, {"reqId": "r", "message": "Folder not found", "error": "NotFound"}, False, errors.NotFound),
        (
            404,
            {"message": "Route GET:/api/v4/secrets not found", "error": "Not Found"},
            False,
            errors.RouteNotFound,
        ),
        (409, {"message": "Secret already exist"}, False, errors.Conflict),
        (422, {"message": ["a", "b"]}, False, errors.ValidationError),
        (429, {}, False, errors.RateLimited),
        (429, {}, True, errors.StreamLimitReached),
        (408, {}, False, errors.Unavailable),
        (500, {"message": "Something went wrong"}, False, errors.Unavailable),
        (502, {}, False, errors.Unavailable),
        (503, {}, True, errors.Unavailable),
        (302, {}, False, errors.ProtocolError),
        (418, {}, False, errors.ServiceError),
    ],
)
def test_error_for_maps_status_to_class(
    status: int, body: dict[str, object], subscribe: bool, cls: type[errors.ServiceError]
) -> None:
    exc = wire.error_for(status, body, endpoint=ENDPOINT, subscribe=subscribe)
    assert type(exc) is cls
    assert exc.status_code == status
    assert str(exc).startswith(ENDPOINT)


def test_error_for_keeps_req_id_details_and_joins_issue_lists() -> None:
    exc = wire.error_for(
        403,
        {"reqId": "req-1", "message": "Forbidden", "details": [{"action": "read"}], "statusCode": 403},
        endpoint=ENDPOINT,
    )
    assert isinstance(exc, errors.PermissionDenied)
    assert exc.req_id == "req-1"
    assert exc.details == [{"action": "read"}]
    assert "reqId req-1" in str(exc)

    issues = wire.error_for(
        422,
        {"message": [{"message": "Required", "path": ["register", 0, "event"]}, "too long"]},
        endpoint=ENDPOINT,
    )
    assert issues.message == f'{ENDPOINT}: service said: "register.0.event: Required; too long"'


@pytest.mark.parametrize(
    ("header", "status", "retry_after"),
    [(None, 429, 60.0), ("12", 429, 12.0), ("later", 429, 60.0), (None, 503, None), ("5", 503, 5.0)],
)
def test_error_for_retry_after(header: str | None, status: int, retry_after: float | None) -> None:
    exc = wire.error_for(status, {}, endpoint=ENDPOINT, retry_after_header=header)
    assert isinstance(exc, errors.Unavailable)
    assert exc.retry_after == retry_after


def test_error_for_without_json_uses_reason_and_truncates() -> None:
    assert (
        wire.error_for(502, {}, endpoint=ENDPOINT, reason="Bad Gateway").message
        == f'{ENDPOINT}: service said: "Bad Gateway"'
    )
    assert wire.error_for(500, {}, endpoint=ENDPOINT).message == f"{ENDPOINT}: HTTP 500"
    long = wire.error_for(400, {"message": "x" * 5000}, endpoint=ENDPOINT)
    assert long.message == f'{ENDPOINT}: service said: "{"x" * 200}…"'


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        # Fastify's default 404 (a server of a version without the route).
        (
            {
                "message": "Route GET:/api/v4/secrets?projectId=p&recursive=true not found",
                "error": "Not Found",
                "statusCode": 404,
            },
            True,
        ),
        ({"message": "Route GET:/api/v4/secrets not found"}, True),
        ({"error": "Not Found", "statusCode": 404}, True),
        # The service's own 404: the route is there, the data is not.
        (
            {
                "reqId": "r",
                "statusCode": 404,
                "message": "Folder with path '/x' not found",
                "error": "NotFound",
            },
            False,
        ),
        ({"message": "Route GET:/api/v4/secrets not found", "error": "NotFound"}, False),
        # Nothing that says "route": never taken for one (a proxy's page, an empty body).
        ({}, False),
        ({"message": "Not Found"}, False),
        ({"message": ["Route GET:/x not found"]}, False),
    ],
)
def test_route_missing_only_on_a_positive_sign(body: dict[str, object], missing: bool) -> None:
    assert wire.route_missing(body) is missing


@pytest.mark.parametrize(
    ("said", "shown"),
    [
        ("Invalid credentials", '"Invalid credentials"'),
        ('quote " and \\ backslash', '"quote \\" and \\\\ backslash"'),
        ("line\nbreak\r\nforged: Synced", '"line break forged: Synced"'),
        ("bidi \u202eevil", '"bidi evil"'),
        ("  padded  ", '"padded"'),
        ("y" * 201, '"' + "y" * 200 + '…"'),
    ],
    ids=["plain", "quotes", "line-breaks", "bidi", "spaces", "long"],
)
def test_service_text_is_quoted_cleaned_and_cut(said: str, shown: str) -> None:
    """What the service wrote reaches status marked as its own, on one line, at most 200 chars."""
    assert wire.service_said(said) == f"service said: {shown}"


@pytest.mark.parametrize(
    ("value", "kept"),
    [("req-1", "req-1"), ("a" * 64, "a" * 64), ("a" * 65, None), ("two words", None), (7, None), ("", None)],
)
def test_only_plausible_request_ids_are_kept(value: object, kept: str | None) -> None:
    assert wire.error_for(500, {"reqId": value}, endpoint=ENDPOINT).req_id == kept

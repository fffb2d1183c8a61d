"""Wire models: aliases, optional fields, hidden values, the hashable list query."""

from __future__ import annotations

import pydantic
import pytest

from secretferry.service import models

SECRET_WIRE = {
    "id": "s1",
    "_id": "s1",
    "workspace": "p1",
    "environment": "dev",
    "version": 3,
    "type": "shared",
    "secretKey": "DB_PASSWORD",
    "secretValue": "hunter2-value",
    "secretComment": "",
    "createdAt": "2023-11-07T05:31:56Z",
    "updatedAt": "2023-11-07T05:31:56.123Z",
    "secretValueHidden": False,
    "skipMultilineEncoding": False,
    "actor": {"actorId": "a", "actorType": "identity", "name": "bot"},
    "isRotatedSecret": False,
    "rotationId": None,
    "secretPath": "/app",
    "secretMetadata": [{"key": "team", "value": "x"}],
    "tags": [{"id": "t", "slug": "db", "name": "DB", "color": "#fff"}],
    "someFutureField": {"ignored": True},
}


def test_secret_parses_aliases_and_hides_value() -> None:
    secret = models.Secret.model_validate(SECRET_WIRE)
    assert secret.secret_key == "DB_PASSWORD"
    assert secret.secret_value == "hunter2-value"
    assert secret.legacy_id == "s1"
    assert secret.secret_path == "/app"
    assert secret.secret_metadata[0].is_encrypted is False
    assert secret.tags[0].slug == "db"
    assert secret.actor is not None and secret.actor.actor_type == "identity"
    assert "hunter2-value" not in repr(secret)
    assert "hunter2-value" not in str(secret)


def test_minimal_secret_and_list() -> None:
    listed = models.SecretList.model_validate({"secrets": [{"secretKey": "A"}]})
    assert listed.secrets[0].secret_value == ""
    assert listed.imports == []
    assert listed.etag is None


def test_secret_list_requires_secrets() -> None:
    with pytest.raises(pydantic.ValidationError):
        models.SecretList.model_validate({"imports": []})


def test_login_result_hides_token() -> None:
    login = models.LoginResult.model_validate(
        {"accessToken": "tok-123", "expiresIn": 7200, "accessTokenMaxTTL": 2592000, "tokenType": "Bearer"}
    )
    assert login.access_token == "tok-123"
    assert login.access_token_max_ttl == 2592000
    assert "tok-123" not in repr(login)


@pytest.mark.parametrize(
    ("model", "wire", "attr", "value"),
    [
        (models.UniversalAuthConfig, {"accessTokenTTL": 10, "accessTokenMaxTTL": 20}, "access_token_ttl", 10),
        (
            models.KubernetesAuthConfig,
            {"tokenReviewMode": "api", "allowedNames": "a,b"},
            "allowed_names",
            "a,b",
        ),
        (models.DynamicSecret, {"defaultTTL": "1h", "maxTTL": "24h", "gatewayV2Id": "g"}, "max_ttl", "24h"),
        (models.OrgMembership, {"status": "invited", "inviteEmail": "a@b.c"}, "invite_email", "a@b.c"),
        (models.SecretImport, {"importEnv": {"slug": "prod"}, "isReplication": True}, "is_replication", True),
        (models.Folder, {"envId": "e", "isReserved": True}, "env_id", "e"),
        (
            models.IdentityPrivilege,
            {"permissions": [{"action": ["read"], "subject": "secrets"}]},
            "is_temporary",
            False,
        ),
    ],
)
def test_resources_parse_their_wire_names(
    model: type[pydantic.BaseModel], wire: dict[str, object], attr: str, value: object
) -> None:
    assert getattr(model.model_validate(wire), attr) == value


def test_project_accepts_legacy_id() -> None:
    assert models.Project.model_validate({"_id": "p1", "slug": "s"}).id == "p1"


def test_list_query_is_hashable_and_accepts_list_inputs() -> None:
    a = models.ListSecretsQuery(
        project_id="p", environment="dev", tag_slugs=["x"], metadata_filter=[{"key": "k", "value": "v"}]
    )
    b = models.ListSecretsQuery(
        project_id="p", environment="dev", tag_slugs=("x",), metadata_filter=[("k", "v")]
    )
    c = models.ListSecretsQuery(
        project_id="p",
        environment="dev",
        tag_slugs=["x"],
        metadata_filter=[models.MetadataFilter(key="k", value="v")],
    )
    assert a == b == c
    assert len({a, b, c}) == 1
    assert a.metadata_filter == (("k", "v"),)
    with pytest.raises(pydantic.ValidationError):
        a.recursive = True  # type: ignore[misc]


def test_permission_sent_wire_form() -> None:
    permission = models.PermissionSent(
        action=["read"],
        subject="secrets",
        conditions=models.PermissionConditions(
            environment="dev",
            secret_path=models.GlobPattern(glob="/app/**"),
            secret_tags=models.SecretTagsCondition(in_=["a"]),
        ),
    )
    assert permission.to_wire() == {
        "action": ["read"],
        "subject": "secrets",
        "conditions": {
            "environment": "dev",
            "secretPath": {"$glob": "/app/**"},
            "secretTags": {"$in": ["a"]},
        },
    }


def test_explicit_nulls_read_as_documented_defaults() -> None:
    secret = models.Secret.model_validate(
        {
            "secretKey": "A",
            "secretValue": None,
            "skipMultilineEncoding": None,
            "tags": None,
            "secretMetadata": [{"key": "k", "value": None, "isEncrypted": None}],
        }
    )
    assert (secret.secret_value, secret.skip_multiline_encoding, secret.tags) == ("", False, [])
    assert secret.secret_metadata[0].value == ""
    assert secret.secret_metadata[0].is_encrypted is False
    listed = models.SecretList.model_validate({"secrets": [], "imports": None})
    assert listed.imports == []

"""Typed resources of the secrets-service API (see docs/service-api.md).

Attributes are snake_case; the wire names (camelCase, and a few oddities such as ``_id`` or
``accessTokenTTL``) are aliases. The API reference does not say which response fields are always
present, so nearly everything is optional: a field the service omits must not turn a good answer
into a ``ProtocolError``. Unknown fields are ignored so that newer servers stay readable.

Values (secret values, access tokens) are kept out of ``repr`` so that a model that ends up in a log
line by accident does not carry them.
"""

from __future__ import annotations

import datetime
from typing import Annotated, Any

import pydantic
from pydantic import alias_generators


class ApiModel(pydantic.BaseModel):
    """Base of every wire model: camelCase aliases, names accepted too, unknown fields ignored."""

    model_config = pydantic.ConfigDict(
        alias_generator=alias_generators.to_camel,
        populate_by_name=True,
        extra="ignore",
        # Built on first use: the client covers the whole API, the operator uses a few models.
        defer_build=True,
    )


Timestamp = datetime.datetime

# Fields the reference gives a default for: servers also send an explicit null for them, which
# must read as the default rather than fail validation.
FalseIfNull = Annotated[bool, pydantic.BeforeValidator(lambda v: False if v is None else v)]
EmptyIfNull = Annotated[str, pydantic.BeforeValidator(lambda v: "" if v is None else v)]
_EMPTY_LIST_IF_NULL = pydantic.BeforeValidator(lambda v: [] if v is None else v)


# --- secrets ---------------------------------------------------------------------------------------


class Actor(ApiModel):
    actor_id: str | None = None
    actor_type: str | None = None
    name: str | None = None
    membership_id: str | None = None
    group_id: str | None = None


class SecretMetadataEntry(ApiModel):
    key: str
    value: EmptyIfNull = ""
    is_encrypted: FalseIfNull = False


class Tag(ApiModel):
    id: str | None = None
    slug: str | None = None
    name: str | None = None
    color: str | None = None


class Secret(ApiModel):
    """One secret; ``secret_value`` is excluded from ``repr``."""

    secret_key: str
    secret_value: EmptyIfNull = pydantic.Field(default="", repr=False)
    id: str | None = None
    legacy_id: str | None = pydantic.Field(default=None, alias="_id")
    workspace: str | None = None
    environment: str | None = None
    version: int | None = None
    type: str | None = None
    secret_comment: str | None = pydantic.Field(default=None, repr=False)
    created_at: Timestamp | None = None
    updated_at: Timestamp | None = None
    secret_value_hidden: bool | None = None
    secret_reminder_note: str | None = pydantic.Field(default=None, repr=False)
    secret_reminder_repeat_days: int | None = None
    skip_multiline_encoding: FalseIfNull = False
    actor: Actor | None = None
    is_rotated_secret: bool | None = None
    rotation_id: str | None = None
    secret_path: str | None = None
    secret_metadata: Annotated[list[SecretMetadataEntry], _EMPTY_LIST_IF_NULL] = pydantic.Field(
        default_factory=list, repr=False
    )
    tags: Annotated[list[Tag], _EMPTY_LIST_IF_NULL] = pydantic.Field(default_factory=list)


class ImportedSecretsGroup(ApiModel):
    """Secrets that reach the listed path through a secret import."""

    secret_path: str | None = None
    environment: str | None = None
    folder_id: str | None = None
    secrets: Annotated[list[Secret], _EMPTY_LIST_IF_NULL] = pydantic.Field(default_factory=list)


class SecretList(ApiModel):
    """Answer of a list call; ``etag`` comes from the response header, for the next conditional GET."""

    secrets: list[Secret]
    imports: Annotated[list[ImportedSecretsGroup], _EMPTY_LIST_IF_NULL] = pydantic.Field(default_factory=list)
    etag: str | None = None


class NotModified(ApiModel):
    """304 on a conditional list: nothing changed since ``etag`` (says nothing about Kubernetes)."""

    etag: str


class MetadataFilter(ApiModel):
    model_config = pydantic.ConfigDict(frozen=True)

    key: str
    value: str


class ListSecretsQuery(ApiModel):
    """Everything that selects a list of secrets (one "scope"); frozen and hashable.

    Defaults follow docs/service-api.md; the client sends every boolean explicitly because the real
    service's defaults differ.
    """

    model_config = pydantic.ConfigDict(frozen=True)

    project_id: str
    environment: str
    secret_path: str = "/"
    view_secret_value: bool = True
    expand_secret_references: bool = True
    recursive: bool = False
    include_personal_overrides: bool = False
    include_imports: bool = True
    tag_slugs: tuple[str, ...] = ()
    metadata_filter: tuple[tuple[str, str], ...] = ()

    @pydantic.field_validator("metadata_filter", mode="before")
    @classmethod
    def _pairs(cls, value: Any) -> Any:
        """Accept ``(key, value)`` pairs, ``{"key", "value"}`` mappings or ``MetadataFilter``s."""
        if not isinstance(value, list | tuple):
            return value
        pairs: list[Any] = []
        for item in value:
            if isinstance(item, MetadataFilter):
                pairs.append((item.key, item.value))
            elif isinstance(item, dict):
                pairs.append((item.get("key"), item.get("value", "")))
            else:
                pairs.append(item)
        return pairs


# --- folders and imports ---------------------------------------------------------------------------


class Folder(ApiModel):
    id: str | None = None
    name: str | None = None
    created_at: Timestamp | None = None
    updated_at: Timestamp | None = None
    env_id: str | None = None
    path: str | None = None
    version: int | None = None
    parent_id: str | None = None
    is_reserved: FalseIfNull = False
    description: str | None = None
    last_secret_modified: Timestamp | None = None


class ImportEnvironment(ApiModel):
    name: str | None = None
    slug: str | None = None
    id: str | None = None


class SecretImport(ApiModel):
    id: str | None = None
    import_path: str | None = None
    position: int | None = None
    created_at: Timestamp | None = None
    updated_at: Timestamp | None = None
    folder_id: str | None = None
    import_env: ImportEnvironment | None = None
    version: int | None = None
    is_replication: FalseIfNull = False
    is_replication_success: bool | None = None
    replication_status: str | None = None
    last_replicated: Timestamp | None = None
    is_reserved: FalseIfNull = False


# --- permissions and privileges --------------------------------------------------------------------


class PermissionReturned(ApiModel):
    """A permission rule as the service returns it (CASL: action/subject may be lists)."""

    action: str | list[str] | None = None
    subject: str | list[str] | None = None
    conditions: object | None = None
    inverted: bool | None = None


class GlobPattern(ApiModel):
    glob: str = pydantic.Field(alias="$glob")


class SecretTagsCondition(ApiModel):
    in_: list[str] | None = pydantic.Field(default=None, alias="$in")
    all_: list[str] | None = pydantic.Field(default=None, alias="$all")


class PermissionConditions(ApiModel):
    environment: str | None = None
    secret_path: str | GlobPattern | None = None
    secret_name: str | None = None
    secret_tags: SecretTagsCondition | None = None
    event_type: str | None = None


class PermissionSent(ApiModel):
    """A permission rule we send (v1 ``permissions`` items, v2 update).

    One model for both, though they accept different shapes (a v1 item takes one action, no
    ``inverted`` and only ``environment`` / ``secretPath: {$glob}``): the privilege calls check each
    item with ``validation.v1_permissions`` / ``v2_permissions`` before sending, because the service
    silently drops what its schema does not name.
    """

    action: str | list[str] | None = None
    subject: str | list[str] | None = None
    inverted: bool | None = None
    conditions: PermissionConditions | None = None

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class IdentityPrivilege(ApiModel):
    id: str | None = None
    slug: str | None = None
    project_membership_id: str | None = None
    permissions: Annotated[list[PermissionReturned], _EMPTY_LIST_IF_NULL] = pydantic.Field(
        default_factory=list
    )
    created_at: Timestamp | None = None
    updated_at: Timestamp | None = None
    is_temporary: FalseIfNull = False
    temporary_mode: str | None = None
    temporary_range: str | None = None
    temporary_access_start_time: Timestamp | None = None
    temporary_access_end_time: Timestamp | None = None


# --- identities, memberships, dynamic secrets, projects --------------------------------------------


class UniversalAuthConfig(ApiModel):
    id: str | None = None
    client_id: str | None = None
    created_at: Timestamp | None = None
    updated_at: Timestamp | None = None
    identity_id: str | None = None
    access_token_ttl: int | None = pydantic.Field(default=None, alias="accessTokenTTL")
    access_token_max_ttl: int | None = pydantic.Field(default=None, alias="accessTokenMaxTTL")
    access_token_num_uses_limit: int | None = None
    client_secret_trusted_ips: object | None = None
    access_token_trusted_ips: object | None = None
    access_token_period: int | None = None
    lockout_enabled: bool | None = None
    lockout_threshold: int | None = None
    lockout_duration_seconds: int | None = None
    lockout_counter_reset_seconds: int | None = None


class KubernetesAuthConfig(ApiModel):
    id: str | None = None
    created_at: Timestamp | None = None
    updated_at: Timestamp | None = None
    identity_id: str | None = None
    allowed_namespaces: str | None = None
    allowed_names: str | None = None
    allowed_audience: str | None = None
    access_token_ttl: int | None = pydantic.Field(default=None, alias="accessTokenTTL")
    access_token_max_ttl: int | None = pydantic.Field(default=None, alias="accessTokenMaxTTL")
    access_token_num_uses_limit: int | None = None
    access_token_trusted_ips: object | None = None
    token_review_mode: str | None = None
    kubernetes_host: str | None = None
    gateway_id: str | None = None


class OrgMembership(ApiModel):
    id: str | None = None
    role: str | None = None
    created_at: Timestamp | None = None
    updated_at: Timestamp | None = None
    org_id: str | None = None
    status: str | None = None
    invite_email: str | None = None
    user_id: str | None = None
    role_id: str | None = None
    project_favorites: list[str] | None = None
    is_active: bool | None = None
    last_invited_at: Timestamp | None = None
    last_login_auth_method: str | None = None
    last_login_time: Timestamp | None = None


class DynamicSecretMetadataEntry(ApiModel):
    key: str
    value: EmptyIfNull = ""


class DynamicSecret(ApiModel):
    """A dynamic secret definition; ``inputs`` (provider settings, may hold credentials) hidden."""

    id: str | None = None
    name: str | None = None
    version: int | None = None
    type: str | None = None
    default_ttl: str | None = pydantic.Field(default=None, alias="defaultTTL")
    folder_id: str | None = None
    created_at: Timestamp | None = None
    updated_at: Timestamp | None = None
    max_ttl: str | None = pydantic.Field(default=None, alias="maxTTL")
    status: str | None = None
    status_details: str | None = None
    project_gateway_id: str | None = None
    gateway_id: str | None = None
    username_template: str | None = None
    gateway_v2_id: str | None = None
    metadata: Annotated[list[DynamicSecretMetadataEntry], _EMPTY_LIST_IF_NULL] = pydantic.Field(
        default_factory=list
    )
    inputs: object | None = pydantic.Field(default=None, repr=False)


class Project(ApiModel):
    id: str
    slug: str | None = None
    name: str | None = None
    org_id: str | None = None
    type: str | None = None
    created_at: Timestamp | None = None
    updated_at: Timestamp | None = None

    @pydantic.model_validator(mode="before")
    @classmethod
    def _legacy_id(cls, value: Any) -> Any:
        """Older servers name the id ``_id`` only."""
        if isinstance(value, dict) and "id" not in value and "_id" in value:
            return {**value, "id": value["_id"]}
        return value


# --- login -----------------------------------------------------------------------------------------


class LoginResult(ApiModel):
    """A machine-identity login or renewal; times in seconds; the token is excluded from ``repr``."""

    access_token: str = pydantic.Field(repr=False)
    expires_in: int
    access_token_max_ttl: int | None = pydantic.Field(default=None, alias="accessTokenMaxTTL")
    token_type: str = "Bearer"

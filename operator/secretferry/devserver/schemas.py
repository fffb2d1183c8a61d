"""Request bodies, with the limits docs/service-api.md states (FastAPI turns violations into 422)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Strict,
    StrictBool,
    StrictInt,
    Tag,
)

from secretferry.devserver import zodrules

NonEmpty = Annotated[str, Field(min_length=1)]
Slug = Annotated[str, AfterValidator(zodrules.slug)]
TemporaryRange = Annotated[str, AfterValidator(zodrules.temporary_range)]
ZodDatetime = Annotated[str, AfterValidator(zodrules.zod_datetime)]
# zod's ``z.number()``: any JSON number, never a numeric string or a boolean (pydantic's lax int
# would take "5" and true).
JsonNumber = Annotated[float, Strict()]


class _Body(BaseModel):
    # Unknown fields are ignored, like the real service's zod schemas in strip mode.
    model_config = ConfigDict(extra="ignore")


class MetadataItem(_Body):
    key: Annotated[str, Field(min_length=1, max_length=255)]
    value: str = ""
    isEncrypted: StrictBool = False


class CreateSecret(_Body):
    projectId: NonEmpty
    environment: NonEmpty
    secretValue: str  # required by the real v4 create (``z.string()`` without a default)
    secretPath: str = "/"
    secretComment: str = ""
    secretMetadata: list[MetadataItem] | None = None
    tagIds: list[str] | None = None
    skipMultilineEncoding: StrictBool | None = None
    type: Literal["shared", "personal"] = "shared"
    secretReminderRepeatDays: StrictInt | None = None  # z.number(): no "5" (a fraction: refused too)
    secretReminderNote: str | None = None


class UpdateSecret(_Body):
    projectId: NonEmpty
    environment: NonEmpty
    secretValue: str | None = None
    secretPath: str = "/"
    secretComment: str | None = None
    secretMetadata: list[MetadataItem] | None = None
    tagIds: list[str] | None = None
    skipMultilineEncoding: StrictBool | None = None
    type: Literal["shared", "personal"] = "shared"
    newSecretName: Annotated[str, Field(min_length=1)] | None = None
    secretReminderRepeatDays: StrictInt | None = None  # z.number(): no "5" (a fraction: refused too)
    secretReminderNote: str | None = None


class DeleteSecret(_Body):
    projectId: NonEmpty
    environment: NonEmpty
    secretPath: str = "/"
    type: Literal["shared", "personal"] = "shared"


class BatchItem(_Body):
    secretKey: NonEmpty
    type: Literal["shared", "personal"] = "shared"


class BatchDelete(_Body):
    projectId: NonEmpty
    environment: NonEmpty
    secretPath: str = "/"
    secrets: Annotated[list[BatchItem], Field(min_length=1)]


class CreateFolder(_Body):
    projectId: NonEmpty
    environment: NonEmpty
    name: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]
    path: str = "/"
    description: str | None = None


class ImportTarget(_Body):
    environment: NonEmpty | None = None
    path: str | None = None
    # ``z.number().optional()``: any number; what the real service does with it is in routes_folders.
    position: JsonNumber | None = None


class UpdateImport(_Body):
    projectId: NonEmpty
    environment: NonEmpty
    path: str = "/"
    import_: ImportTarget = Field(alias="import")


class CreateTemporaryPrivilege(_Body):
    identityId: NonEmpty
    projectSlug: NonEmpty
    slug: Slug | None = None
    temporaryMode: Literal["relative"]
    temporaryRange: TemporaryRange
    temporaryAccessStartTime: ZodDatetime
    # Rules stay raw here: ``permission_schema`` checks them against the real names and shapes.
    permissions: list[Any] | None = None
    privilegePermission: dict[str, Any] | None = None


class PrivilegeDetails(_Body):
    slug: Slug | None = None
    permissions: list[Any] | None = None
    privilegePermission: dict[str, Any] | None = None
    isTemporary: StrictBool | None = None
    temporaryMode: Literal["relative"] | None = None
    temporaryRange: TemporaryRange | None = None
    temporaryAccessStartTime: ZodDatetime | None = None


class UpdatePrivilegeV1(_Body):
    privilegeSlug: NonEmpty
    identityId: NonEmpty
    projectSlug: NonEmpty
    privilegeDetails: PrivilegeDetails


class DeletePrivilegeV1(_Body):
    privilegeSlug: NonEmpty
    identityId: NonEmpty
    projectSlug: NonEmpty


class PermanentType(_Body):
    isTemporary: Literal[False]


class TemporaryType(_Body):
    isTemporary: Literal[True]
    temporaryMode: Literal["relative"]
    temporaryRange: TemporaryRange
    temporaryAccessStartTime: ZodDatetime


def _is_temporary(value: Any) -> str | None:
    """The v2 ``type`` is ``z.discriminatedUnion("isTemporary", ...)``: only a JSON boolean picks."""
    flag = value.get("isTemporary") if isinstance(value, dict) else getattr(value, "isTemporary", None)
    return ("temporary" if flag else "permanent") if isinstance(flag, bool) else None


PrivilegeType = Annotated[
    Annotated[PermanentType, Tag("permanent")] | Annotated[TemporaryType, Tag("temporary")],
    Discriminator(
        _is_temporary,
        custom_error_type="invalid_union_discriminator",
        custom_error_message="Invalid discriminator value. Expected false | true",
    ),
]


class UpdatePrivilegeV2(_Body):
    slug: Slug
    permissions: list[Any]  # checked by ``permission_schema.v2_permissions``
    type: PrivilegeType


class UniversalLogin(_Body):
    clientId: NonEmpty
    clientSecret: NonEmpty


class KubernetesLogin(_Body):
    identityId: NonEmpty
    jwt: NonEmpty
    organizationSlug: str | None = None
    subOrganizationName: str | None = None


class TokenBody(_Body):
    accessToken: NonEmpty


class Subscribe(_Body):
    projectId: NonEmpty
    # Items stay raw here: each event-stream generation has its own item shape (``generations``).
    registrations: Annotated[list[dict[str, Any]], Field(min_length=1, max_length=10, alias="register")]

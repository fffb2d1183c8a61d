"""Request bodies, with the limits service-api.md states (FastAPI turns violations into 422)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

NonEmpty = Annotated[str, Field(min_length=1)]
Slug = Annotated[str, Field(min_length=1, max_length=60)]


class _Body(BaseModel):
    # Unknown fields are ignored, like the real service's zod schemas in strip mode.
    model_config = ConfigDict(extra="ignore")


class MetadataItem(_Body):
    key: Annotated[str, Field(min_length=1, max_length=255)]
    value: str = ""
    isEncrypted: bool = False


class CreateSecret(_Body):
    projectId: NonEmpty
    environment: NonEmpty
    secretValue: str = ""
    secretPath: str = "/"
    secretComment: str = ""
    secretMetadata: list[MetadataItem] | None = None
    tagIds: list[str] | None = None
    skipMultilineEncoding: bool | None = None
    type: Literal["shared", "personal"] = "shared"
    secretReminderRepeatDays: int | None = None
    secretReminderNote: str | None = None


class UpdateSecret(_Body):
    projectId: NonEmpty
    environment: NonEmpty
    secretValue: str | None = None
    secretPath: str = "/"
    secretComment: str | None = None
    secretMetadata: list[MetadataItem] | None = None
    tagIds: list[str] | None = None
    skipMultilineEncoding: bool | None = None
    type: Literal["shared", "personal"] = "shared"
    newSecretName: Annotated[str, Field(min_length=1)] | None = None
    secretReminderRepeatDays: int | None = None
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
    position: Annotated[int, Field(ge=1)] | None = None


class UpdateImport(_Body):
    projectId: NonEmpty
    environment: NonEmpty
    path: str = "/"
    import_: ImportTarget = Field(alias="import")


class PermissionIn(_Body):
    action: str | list[str] | None = None
    subject: str | None = None
    conditions: dict[str, Any] | None = None
    inverted: bool = False


class PrivilegePermission(_Body):
    actions: list[str] = Field(min_length=1)
    subject: NonEmpty
    conditions: dict[str, Any] | None = None


class CreateTemporaryPrivilege(_Body):
    identityId: NonEmpty
    projectSlug: NonEmpty
    slug: Slug | None = None
    temporaryMode: Literal["relative"]
    temporaryRange: NonEmpty
    temporaryAccessStartTime: NonEmpty
    permissions: list[PermissionIn] | None = None
    privilegePermission: PrivilegePermission | None = None


class PrivilegeDetails(_Body):
    slug: Slug | None = None
    permissions: list[PermissionIn] | None = None
    privilegePermission: PrivilegePermission | None = None
    isTemporary: bool | None = None
    temporaryMode: Literal["relative"] | None = None
    temporaryRange: str | None = None
    temporaryAccessStartTime: str | None = None


class UpdatePrivilegeV1(_Body):
    privilegeSlug: NonEmpty
    identityId: NonEmpty
    projectSlug: NonEmpty
    privilegeDetails: PrivilegeDetails


class DeletePrivilegeV1(_Body):
    privilegeSlug: NonEmpty
    identityId: NonEmpty
    projectSlug: NonEmpty


class PrivilegeType(_Body):
    isTemporary: bool = False
    temporaryMode: Literal["relative"] | None = None
    temporaryRange: str | None = None
    temporaryAccessStartTime: str | None = None


class UpdatePrivilegeV2(_Body):
    slug: Slug
    permissions: list[PermissionIn]
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


class RegisterConditions(_Body):
    environmentSlug: str | None = None
    secretPath: str | None = None


class RegisterItem(_Body):
    event: str | None = None
    conditions: RegisterConditions | None = None


class Subscribe(_Body):
    projectId: NonEmpty
    registrations: Annotated[list[RegisterItem], Field(min_length=1, max_length=10, alias="register")]

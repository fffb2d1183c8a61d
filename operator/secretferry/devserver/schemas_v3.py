"""Bodies of the v3 "raw" secret writes, field for field as the real routes declare them.

Differences from v4 that clients hit: the project is ``workspaceId`` or ``projectSlug`` (v4:
``projectId`` only), ``secretValue`` is required on create, and values are trimmed (a trailing
newline survives). zod does not coerce, so booleans and numbers are strict here (pydantic's lax
mode would take ``"true"`` or ``"5"``, which the real server refuses with 422).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, field_validator

from secretferry.devserver.schemas import MetadataItem

ReminderNote = Annotated[str, Field(max_length=1024)]  # real: "cannot exceed 1024 characters"
Number = StrictInt | StrictFloat  # zod z.number(): a JSON number, never a numeric string


def trim_value(value: str) -> str:
    """The real transform: trimmed, but a value ending in a newline keeps one."""
    return value.strip() + "\n" if value.endswith("\n") else value.strip()


class _Body(BaseModel):
    # Unknown fields are dropped, like zod objects in strip mode.
    model_config = ConfigDict(extra="ignore")


class RawLocation(_Body):
    """Where a v3 write goes; the project by id or, failing that, by slug."""

    workspaceId: str | None = None
    projectSlug: str | None = None
    environment: str
    secretPath: str = "/"
    type: Literal["shared", "personal"] = "shared"

    @field_validator("workspaceId", "projectSlug", "environment")
    @classmethod
    def _trim(cls, value: str | None) -> str | None:
        return value.strip() if value is not None else None


class CreateRawSecret(RawLocation):
    secretValue: str
    secretComment: str = ""
    secretMetadata: list[MetadataItem] | None = None
    tagIds: list[str] | None = None
    skipMultilineEncoding: StrictBool | None = None
    secretReminderRepeatDays: Number | None = None
    secretReminderNote: ReminderNote | None = None

    @field_validator("secretValue")
    @classmethod
    def _value(cls, value: str) -> str:
        return trim_value(value)

    @field_validator("secretComment")
    @classmethod
    def _comment(cls, value: str) -> str:
        return value.strip()


class UpdateRawSecret(RawLocation):
    secretValue: str | None = None
    skipMultilineEncoding: StrictBool | None = None
    tagIds: list[str] | None = None
    metadata: dict[str, str] | None = None  # legacy; the real service ignores it
    secretMetadata: list[MetadataItem] | None = None
    secretReminderNote: ReminderNote | None = None
    secretReminderRepeatDays: Number | None = None
    secretReminderRecipients: list[str] | None = None  # reminders are not modelled here
    newSecretName: Annotated[str, Field(min_length=1)] | None = None
    secretComment: str | None = None

    @field_validator("secretValue")
    @classmethod
    def _value(cls, value: str | None) -> str | None:
        return trim_value(value) if value is not None else None


class DeleteRawSecret(RawLocation):
    pass

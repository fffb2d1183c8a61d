"""Identity additional privileges: v1 (by identity, project slug and privilege slug) and v2 (by id)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from secretferry.service import client_base, models, validation, wire


class _PrivilegeEnvelope(models.ApiModel):
    privilege: models.IdentityPrivilege


class _PrivilegesEnvelope(models.ApiModel):
    privileges: list[models.IdentityPrivilege]


def _v1_rules(
    permissions: Sequence[models.PermissionSent] | None,
    privilege_permission: Mapping[str, Any] | None,
    *,
    prefix: str,
) -> dict[str, Any]:
    """The rules of a v1 body, checked: exactly one of the two forms (see ``validation``)."""
    validation.privilege_rules(permissions, privilege_permission, field=f"{prefix}permissions")
    if privilege_permission is not None:
        field = f"{prefix}privilegePermission"
        return {"privilegePermission": validation.privilege_permission(privilege_permission, field=field)}
    assert permissions is not None  # privilege_rules: exactly one is given
    return {"permissions": validation.v1_permissions(permissions, field=f"{prefix}permissions")}


class PrivilegeEndpoints(client_base.ClientBase):
    """Privilege endpoints, mixed into ``client.ServiceClient``."""

    async def create_identity_privilege_temporary(
        self,
        *,
        identity_id: str,
        project_slug: str,
        temporary_range: str,
        temporary_access_start_time: datetime.datetime,
        slug: str | None = None,
        permissions: Sequence[models.PermissionSent] | None = None,
        privilege_permission: Mapping[str, Any] | None = None,
        temporary_mode: str = "relative",
    ) -> models.IdentityPrivilege:
        """Give exactly one of ``permissions`` (deprecated by the service) and ``privilege_permission``."""
        validation.non_empty(identity_id, field="identityId")
        validation.non_empty(project_slug, field="projectSlug")
        if slug is not None:
            validation.slug(slug)
        body = client_base.drop_none(
            {
                "identityId": identity_id,
                "projectSlug": project_slug,
                "slug": slug,
                "temporaryMode": validation.temporary_mode(temporary_mode),
                "temporaryRange": validation.temporary_range(temporary_range),
                "temporaryAccessStartTime": validation.timestamp(
                    temporary_access_start_time, field="temporaryAccessStartTime"
                ),
                **_v1_rules(permissions, privilege_permission, prefix=""),
            }
        )
        path = "/api/v1/additional-privilege/identity/temporary"
        return (await self._authed(_PrivilegeEnvelope, "POST", path, path, json_body=body)).privilege

    async def update_identity_privilege(
        self,
        *,
        privilege_slug: str,
        identity_id: str,
        project_slug: str,
        slug: str | None = None,
        permissions: Sequence[models.PermissionSent] | None = None,
        privilege_permission: Mapping[str, Any] | None = None,
        is_temporary: bool | None = None,
        temporary_mode: str | None = None,
        temporary_range: str | None = None,
        temporary_access_start_time: datetime.datetime | None = None,
    ) -> models.IdentityPrivilege:
        """Change the given details of the privilege ``privilege_slug``; its rules are always sent
        (exactly one of ``permissions`` and ``privilege_permission``): the newest real server refuses
        an update without them, like a create."""
        self._privilege_address(privilege_slug, identity_id, project_slug)
        if slug is not None:
            validation.slug(slug, field="privilegeDetails.slug")
        if temporary_mode is not None:
            validation.temporary_mode(temporary_mode, field="privilegeDetails.temporaryMode")
        if temporary_range is not None:
            validation.temporary_range(temporary_range, field="privilegeDetails.temporaryRange")
        start = (
            validation.timestamp(
                temporary_access_start_time, field="privilegeDetails.temporaryAccessStartTime"
            )
            if temporary_access_start_time is not None
            else None
        )
        details = client_base.drop_none(
            {
                "slug": slug,
                **_v1_rules(permissions, privilege_permission, prefix="privilegeDetails."),
                "isTemporary": is_temporary,
                "temporaryMode": temporary_mode,
                "temporaryRange": temporary_range,
                "temporaryAccessStartTime": start,
            }
        )
        body = {
            "privilegeSlug": privilege_slug,
            "identityId": identity_id,
            "projectSlug": project_slug,
            "privilegeDetails": details,
        }
        path = "/api/v1/additional-privilege/identity"
        return (await self._authed(_PrivilegeEnvelope, "PATCH", path, path, json_body=body)).privilege

    async def delete_identity_privilege(
        self, *, privilege_slug: str, identity_id: str, project_slug: str
    ) -> models.IdentityPrivilege:
        self._privilege_address(privilege_slug, identity_id, project_slug)
        body = {"privilegeSlug": privilege_slug, "identityId": identity_id, "projectSlug": project_slug}
        path = "/api/v1/additional-privilege/identity"
        return (await self._authed(_PrivilegeEnvelope, "DELETE", path, path, json_body=body)).privilege

    async def get_identity_privilege(
        self, privilege_slug: str, *, identity_id: str, project_slug: str
    ) -> models.IdentityPrivilege:
        self._privilege_address(privilege_slug, identity_id, project_slug)
        envelope = await self._authed(
            _PrivilegeEnvelope,
            "GET",
            f"/api/v1/additional-privilege/identity/{wire.segment(privilege_slug)}",
            "/api/v1/additional-privilege/identity/{privilegeSlug}",
            params=[("identityId", identity_id), ("projectSlug", project_slug)],
        )
        return envelope.privilege

    async def list_identity_privileges(
        self, *, identity_id: str, project_slug: str
    ) -> list[models.IdentityPrivilege]:
        validation.non_empty(identity_id, field="identityId")
        validation.non_empty(project_slug, field="projectSlug")
        path = "/api/v1/additional-privilege/identity"
        envelope = await self._authed(
            _PrivilegesEnvelope,
            "GET",
            path,
            path,
            params=[("identityId", identity_id), ("projectSlug", project_slug)],
        )
        return envelope.privileges

    @staticmethod
    def _privilege_address(privilege_slug: str, identity_id: str, project_slug: str) -> None:
        validation.non_empty(privilege_slug, field="privilegeSlug")
        validation.non_empty(identity_id, field="identityId")
        validation.non_empty(project_slug, field="projectSlug")

    # --- identity additional privileges, v2 (by privilege id) ----------------------------------------

    async def update_identity_privilege_v2(
        self,
        privilege_id: str,
        *,
        slug: str,
        permissions: Sequence[models.PermissionSent],
        type: Mapping[str, Any],
    ) -> models.IdentityPrivilege:
        """``type`` is ``{"isTemporary": False}`` or a whole temporary window: ``{"isTemporary": True,
        "temporaryMode": "relative", "temporaryRange": "1h", "temporaryAccessStartTime": <aware
        datetime or "...Z" text>}`` (``validation.privilege_type``)."""
        validation.non_empty(privilege_id, field="id")
        validation.slug(slug)
        body = {
            "slug": slug,
            "permissions": validation.v2_permissions(permissions, field="permissions"),
            "type": validation.privilege_type(type),
        }
        envelope = await self._authed(
            _PrivilegeEnvelope,
            "PATCH",
            f"/api/v2/identity-project-additional-privilege/{wire.segment(privilege_id)}",
            "/api/v2/identity-project-additional-privilege/{id}",
            json_body=body,
        )
        return envelope.privilege

    async def delete_identity_privilege_v2(self, privilege_id: str) -> models.IdentityPrivilege:
        validation.non_empty(privilege_id, field="id")
        envelope = await self._authed(
            _PrivilegeEnvelope,
            "DELETE",
            f"/api/v2/identity-project-additional-privilege/{wire.segment(privilege_id)}",
            "/api/v2/identity-project-additional-privilege/{id}",
        )
        return envelope.privilege

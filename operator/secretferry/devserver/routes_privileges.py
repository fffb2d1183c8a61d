"""Identity additional privileges: v1 (by slug + identityId + projectSlug) and v2 (by id).

Checks in the real server's order: body schema (422), the v1 "permissions or
privilegePermission" rule (401), the project, then the caller's rights on the ``identity``
subject (reads need ``read``; changes need ``edit`` and ``grant-privileges``), then the target's
membership (400 "Actor doesn't have membership"), then the privilege itself.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from secretferry.devserver import permission_schema, privileges
from secretferry.devserver.auth import CallerDep, StateDep
from secretferry.devserver.errors import BadRequest, NotFound, PermissionDenied
from secretferry.devserver.identity_store import Membership
from secretferry.devserver.permissions import GRANT_PRIVILEGES, IDENTITY
from secretferry.devserver.schemas import (
    CreateTemporaryPrivilege,
    DeletePrivilegeV1,
    TemporaryType,
    UpdatePrivilegeV1,
    UpdatePrivilegeV2,
)
from secretferry.devserver.state import DevState
from secretferry.devserver.timeutil import iso

router = APIRouter()
V1 = "/api/v1/additional-privilege/identity"
V2 = "/api/v2/identity-project-additional-privilege"
NonEmptyQuery = Annotated[str, Query(min_length=1)]


def _require(state: DevState, caller_id: str, project_id: str, target_id: str, *, change: bool) -> None:
    """``read`` on identity for reads; ``edit`` plus the right to grant privileges for changes."""
    now = state.now()
    action = "edit" if change else "read"
    state.permissions.check(
        caller_id, project_id, now, action=action, subject=IDENTITY, target_identity_id=target_id
    )
    if change and not state.permissions.allowed(
        caller_id, project_id, now, action=GRANT_PRIVILEGES, subject=IDENTITY, target_identity_id=target_id
    ):
        raise PermissionDenied(
            f"Failed to change additional privileges. Missing permission {GRANT_PRIVILEGES} on {IDENTITY}",
            name="PermissionBoundaryError",
            details={"missingPermissions": [{"action": GRANT_PRIVILEGES, "subject": IDENTITY}]},
        )


def _membership(
    state: DevState, caller_id: str, identity_id: str, project_slug: str, *, change: bool
) -> Membership:
    project = state.store.project_by_slug(project_slug)
    if project is None:
        raise NotFound(f"Project with slug '{project_slug}' not found")
    _require(state, caller_id, project.id, identity_id, change=change)
    membership = state.identities.membership(project.id, identity_id)
    if membership is None:
        raise BadRequest("Actor doesn't have membership")
    return membership


def _by_slug(state: DevState, membership: Membership, slug: str) -> dict[str, Any]:
    doc = state.identities.privilege_by_slug(membership.id, slug)
    if doc is None:
        raise NotFound(f"Additional privilege with slug '{slug}' not found")
    return doc


@router.post(f"{V1}/temporary")
async def create_temporary(
    body: CreateTemporaryPrivilege, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    rules = privileges.permissions_from(body.permissions, body.privilegePermission)
    membership = _membership(state, caller.identity_id, body.identityId, body.projectSlug, change=True)
    if body.slug and state.identities.privilege_by_slug(membership.id, body.slug) is not None:
        raise BadRequest(f"Additional privilege with slug '{body.slug}' already exists")
    doc = privileges.new_doc(
        membership.id,
        body.slug,
        rules,
        privileges.temporary_fields(
            True, body.temporaryMode, body.temporaryRange, body.temporaryAccessStartTime
        ),
        state.now(),
    )
    state.identities.put_privilege(membership.id, doc)
    return {"privilege": doc}


@router.patch(V1)
async def update_v1(body: UpdatePrivilegeV1, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    details = body.privilegeDetails
    # The newest real v1 update refuses a body without rules like create does (older ones did not).
    rules = privileges.permissions_from(details.permissions, details.privilegePermission)
    membership = _membership(state, caller.identity_id, body.identityId, body.projectSlug, change=True)
    doc = _by_slug(state, membership, body.privilegeSlug)
    if details.slug and details.slug != doc["slug"]:
        if state.identities.privilege_by_slug(membership.id, details.slug) is not None:
            raise BadRequest(f"Additional privilege with slug '{details.slug}' already exists")
        doc["slug"] = details.slug
    doc["permissions"] = rules
    if details.isTemporary is not None or details.temporaryRange or details.temporaryAccessStartTime:
        is_temporary = (
            details.isTemporary if details.isTemporary is not None else bool(doc.get("isTemporary"))
        )
        doc.update(
            privileges.temporary_fields(
                is_temporary,
                details.temporaryMode or doc.get("temporaryMode"),
                details.temporaryRange or doc.get("temporaryRange"),
                details.temporaryAccessStartTime or doc.get("temporaryAccessStartTime"),
            )
        )
    doc["updatedAt"] = iso(state.now())
    state.identities.put_privilege(membership.id, doc)
    return {"privilege": doc}


@router.delete(V1)
async def delete_v1(body: DeletePrivilegeV1, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    membership = _membership(state, caller.identity_id, body.identityId, body.projectSlug, change=True)
    doc = _by_slug(state, membership, body.privilegeSlug)
    state.identities.delete_privilege(doc["id"])
    return {"privilege": doc}


@router.get(f"{V1}/{{privilegeSlug}}")
async def get_v1(
    privilegeSlug: Annotated[str, Path(min_length=1)],
    identityId: NonEmptyQuery,
    projectSlug: NonEmptyQuery,
    caller: CallerDep,
    state: StateDep,
) -> dict[str, Any]:
    membership = _membership(state, caller.identity_id, identityId, projectSlug, change=False)
    return {"privilege": _by_slug(state, membership, privilegeSlug)}


@router.get(V1)
async def list_v1(
    identityId: NonEmptyQuery, projectSlug: NonEmptyQuery, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    membership = _membership(state, caller.identity_id, identityId, projectSlug, change=False)
    return {"privileges": state.identities.privileges(membership.id)}


def _by_id(state: DevState, caller_id: str, privilege_id: str) -> tuple[str, dict[str, Any]]:
    """The privilege (404 first, as the real ``additionalPrivilegeIdToDoc``), then the rights to change it."""
    found = state.identities.privilege_by_id(privilege_id)
    if found is None:
        raise NotFound(f"Additional privilege with ID '{privilege_id}' not found")
    membership = state.identities.membership_by_id(found[0])
    if membership is None:
        raise NotFound(f"Additional privilege with ID '{privilege_id}' not found")
    _require(state, caller_id, membership.project_id, membership.identity_id, change=True)
    return found


@router.patch(f"{V2}/{{privilege_id}}")
async def update_v2(
    privilege_id: str, body: UpdatePrivilegeV2, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    rules = permission_schema.v2_permissions(body.permissions)
    membership_id, doc = _by_id(state, caller.identity_id, privilege_id)
    if body.slug != doc["slug"] and state.identities.privilege_by_slug(membership_id, body.slug) is not None:
        raise BadRequest(f"Additional privilege with slug '{body.slug}' already exists")
    doc["slug"] = body.slug
    doc["permissions"] = rules
    kind = body.type
    if isinstance(kind, TemporaryType):
        window = privileges.temporary_fields(
            True, kind.temporaryMode, kind.temporaryRange, kind.temporaryAccessStartTime
        )
    else:
        window = privileges.temporary_fields(False, None, None, None)
    doc.update(window)
    doc["updatedAt"] = iso(state.now())
    state.identities.put_privilege(membership_id, doc)
    return {"privilege": privileges.v2_wire(doc)}


@router.delete(f"{V2}/{{privilege_id}}")
async def delete_v2(privilege_id: str, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    _, doc = _by_id(state, caller.identity_id, privilege_id)
    state.identities.delete_privilege(privilege_id)
    return {"privilege": privileges.v2_wire(doc)}

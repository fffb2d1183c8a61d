"""Identity additional privileges: v1 (by slug + identityId + projectSlug) and v2 (by id)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from secretferry.devserver import privileges
from secretferry.devserver.auth import CallerDep, StateDep
from secretferry.devserver.errors import BadRequest, NotFound
from secretferry.devserver.identity_store import Membership
from secretferry.devserver.schemas import (
    CreateTemporaryPrivilege,
    DeletePrivilegeV1,
    UpdatePrivilegeV1,
    UpdatePrivilegeV2,
)
from secretferry.devserver.state import DevState
from secretferry.devserver.timeutil import iso

router = APIRouter()
V1 = "/api/v1/additional-privilege/identity"
V2 = "/api/v2/identity-project-additional-privilege"
NonEmptyQuery = Annotated[str, Query(min_length=1)]


def _membership(state: DevState, caller_id: str, identity_id: str, project_slug: str) -> Membership:
    project = state.store.project_by_slug(project_slug)
    if project is None:
        raise NotFound(f"Project with slug '{project_slug}' not found")
    state.permissions.require_project_admin(caller_id, project.id)
    membership = state.identities.membership(project.id, identity_id)
    if membership is None:
        raise NotFound(f"Identity with ID '{identity_id}' is not a member of project '{project_slug}'")
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
    membership = _membership(state, caller.identity_id, body.identityId, body.projectSlug)
    if body.slug and state.identities.privilege_by_slug(membership.id, body.slug) is not None:
        raise BadRequest(f"Additional privilege with slug '{body.slug}' already exists")
    doc = privileges.new_doc(
        membership.id,
        body.slug,
        privileges.permissions_from(body.permissions, body.privilegePermission),
        privileges.temporary_fields(
            True, body.temporaryMode, body.temporaryRange, body.temporaryAccessStartTime
        ),
        state.now(),
    )
    state.identities.put_privilege(membership.id, doc)
    return {"privilege": doc}


@router.patch(V1)
async def update_v1(body: UpdatePrivilegeV1, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    membership = _membership(state, caller.identity_id, body.identityId, body.projectSlug)
    doc = _by_slug(state, membership, body.privilegeSlug)
    details = body.privilegeDetails
    if details.slug and details.slug != doc["slug"]:
        if state.identities.privilege_by_slug(membership.id, details.slug) is not None:
            raise BadRequest(f"Additional privilege with slug '{details.slug}' already exists")
        doc["slug"] = details.slug
    if details.permissions is not None or details.privilegePermission is not None:
        doc["permissions"] = privileges.permissions_from(details.permissions, details.privilegePermission)
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
    membership = _membership(state, caller.identity_id, body.identityId, body.projectSlug)
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
    membership = _membership(state, caller.identity_id, identityId, projectSlug)
    return {"privilege": _by_slug(state, membership, privilegeSlug)}


@router.get(V1)
async def list_v1(
    identityId: NonEmptyQuery, projectSlug: NonEmptyQuery, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    membership = _membership(state, caller.identity_id, identityId, projectSlug)
    return {"privileges": state.identities.privileges(membership.id)}


def _by_id(state: DevState, caller_id: str, privilege_id: str) -> tuple[str, dict[str, Any]]:
    found = state.identities.privilege_by_id(privilege_id)
    if found is None:
        raise NotFound(f"Additional privilege with ID '{privilege_id}' not found")
    membership = state.identities.membership_by_id(found[0])
    if membership is None:
        raise NotFound(f"Additional privilege with ID '{privilege_id}' not found")
    state.permissions.require_project_admin(caller_id, membership.project_id)
    return found


@router.patch(f"{V2}/{{privilege_id}}")
async def update_v2(
    privilege_id: str, body: UpdatePrivilegeV2, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    membership_id, doc = _by_id(state, caller.identity_id, privilege_id)
    if body.slug != doc["slug"] and state.identities.privilege_by_slug(membership_id, body.slug) is not None:
        raise BadRequest(f"Additional privilege with slug '{body.slug}' already exists")
    doc["slug"] = body.slug
    doc["permissions"] = privileges.permissions_from(body.permissions, None)
    doc.update(
        privileges.temporary_fields(
            body.type.isTemporary,
            body.type.temporaryMode,
            body.type.temporaryRange,
            body.type.temporaryAccessStartTime,
        )
    )
    doc["updatedAt"] = iso(state.now())
    state.identities.put_privilege(membership_id, doc)
    return {"privilege": privileges.v2_wire(doc)}


@router.delete(f"{V2}/{{privilege_id}}")
async def delete_v2(privilege_id: str, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    _, doc = _by_id(state, caller.identity_id, privilege_id)
    state.identities.delete_privilege(privilege_id)
    return {"privilege": privileges.v2_wire(doc)}

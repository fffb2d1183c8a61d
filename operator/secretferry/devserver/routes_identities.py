"""Projects by slug, removal of auth methods, organization memberships, dynamic secrets."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from secretferry.devserver import globs, identity_store
from secretferry.devserver.auth import Caller, CallerDep, StateDep
from secretferry.devserver.errors import NotFound
from secretferry.devserver.identity_store import public
from secretferry.devserver.permissions import DYNAMIC_SECRETS, EDIT_ROOT_CREDENTIAL, READ_ROOT_CREDENTIAL
from secretferry.devserver.state import DevState
from secretferry.devserver.timeutil import iso

router = APIRouter()


@router.get("/api/v1/projects/slug/{slug}")
async def project_by_slug(slug: str, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    return _project_body(slug, caller, state)


@router.get("/api/v2/workspace/{slug}")
async def workspace_by_slug(slug: str, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    """Self-hosted 2024-10's slug route (``slug_route="v2"``): the same project, bare as on v1."""
    return _project_body(slug, caller, state)


@router.get("/api/v1/workspace/{workspaceId}")
async def workspace_by_id(workspaceId: str, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    """The real v1 "Get project" route (``{workspace}``): how a client that holds a project id
    learns its slug, which the lease routes want."""
    project = state.store.project(workspaceId.strip())
    if project is None:
        raise NotFound(f"Project with ID '{workspaceId.strip()}' not found")
    return {"workspace": _project_body(project.slug, caller, state)}


def _project_body(slug: str, caller: Caller, state: DevState) -> dict[str, Any]:
    project = state.store.project_by_slug(slug)
    if project is None:
        raise NotFound(f"Project with slug '{slug}' not found")
    state.permissions.require_member(caller.identity_id, project.id)
    row = state.db.one("SELECT created_at FROM projects WHERE id = ?", (project.id,))
    created = iso(row["created_at"]) if row else None
    return {
        "id": project.id,
        "_id": project.id,
        "name": project.name,
        "slug": project.slug,
        "orgId": project.org_id,
        "type": "secret-manager",
        "createdAt": created,
        "updatedAt": created,
        "environments": [
            {"id": e.id, "name": e.name, "slug": e.slug} for e in state.store.environments(project.id)
        ],
    }


def _remove_auth(state: Any, caller: Caller, identity_id: str, method: str, label: str) -> dict[str, Any]:
    identity = state.identities.identity(identity_id)
    if identity is None:
        raise NotFound(f"Identity with ID '{identity_id}' not found")
    state.permissions.require_org_admin(caller.identity_id, identity.org_id)
    doc = state.identities.remove_auth(identity_id, method)
    if doc is None:
        raise NotFound(f"The identity does not have {label} auth attached")
    return public(doc)


@router.delete("/api/v1/auth/universal-auth/identities/{identityId}")
async def remove_universal(identityId: str, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    doc = _remove_auth(state, caller, identityId, identity_store.UNIVERSAL, "universal")
    return {"identityUniversalAuth": doc}


@router.delete("/api/v1/auth/kubernetes-auth/identities/{identityId}")
async def remove_kubernetes(identityId: str, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    doc = _remove_auth(state, caller, identityId, identity_store.KUBERNETES, "kubernetes")
    return {"identityKubernetesAuth": doc}


@router.delete("/api/v2/organizations/{organizationId}/memberships/{membershipId}")
async def delete_membership(
    organizationId: str, membershipId: str, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    state.permissions.require_org_admin(caller.identity_id, organizationId)
    doc = state.identities.pop_org_membership(organizationId, membershipId)
    if doc is None:
        raise NotFound(f"Membership with ID '{membershipId}' not found")
    return {"membership": doc}


@router.get("/api/v1/dynamic-secrets/{name}")
async def dynamic_secret(
    name: Annotated[str, Path(min_length=1)],
    projectSlug: Annotated[str, Query(min_length=1)],
    environmentSlug: Annotated[str, Query(min_length=1)],
    caller: CallerDep,
    state: StateDep,
    path: str = "/",
) -> dict[str, Any]:
    """The definition with its ``inputs``: the provider's root credentials.

    Checked in the real service's order: project (404), membership (403), folder and name (404),
    then both root-credential actions (403) on the definition's environment and path.
    """
    project = state.store.project_by_slug(projectSlug)
    if project is None:
        raise NotFound(f"Project with slug '{projectSlug}' not found")
    state.permissions.require_member(caller.identity_id, project.id)
    env = state.store.require_environment(project.id, environmentSlug)
    folder_path = globs.normalize_path(path)
    doc = state.identities.dynamic_secret(env.id, folder_path, name)
    if doc is None:
        raise NotFound(f"Dynamic secret with name '{name}' in folder '{folder_path}' not found")
    for action in (READ_ROOT_CREDENTIAL, EDIT_ROOT_CREDENTIAL):
        state.permissions.check(
            caller.identity_id,
            project.id,
            state.now(),
            action=action,
            subject=DYNAMIC_SECRETS,
            environment=env.slug,
            secret_path=folder_path,
        )
    return {"dynamicSecret": doc}

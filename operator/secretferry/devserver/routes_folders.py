"""``POST /api/v2/folders`` and ``PATCH /api/v2/secret-imports/{id}``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from secretferry.devserver import events, globs, mutations, wire
from secretferry.devserver.auth import CallerDep, StateDep
from secretferry.devserver.errors import ApiError, BadRequest, NotFound
from secretferry.devserver.listing import MAX_DEPTH
from secretferry.devserver.permissions import SECRET_FOLDERS, SECRET_IMPORTS
from secretferry.devserver.schemas import CreateFolder, UpdateImport

router = APIRouter()
# The real ``secret_imports.position`` column is a Postgres integer.
_INT32 = (-(2**31), 2**31 - 1)


def _position(value: float | None) -> int | None:
    """The requested position, as the real service takes it: any integer (no clamping, see
    ``Store.update_import``); a fraction or an out-of-range number fails in its database (500)."""
    if value is None:
        return None
    if not value.is_integer() or not _INT32[0] <= value <= _INT32[1]:
        raise ApiError("Something went wrong", name="DatabaseError", status=500)
    return int(value)


@router.post("/api/v2/folders")
async def create_folder(body: CreateFolder, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    project = state.store.require_project(body.projectId)
    env = state.store.require_environment(project.id, body.environment)
    parent = globs.normalize_path(body.path)
    path = globs.normalize_path(f"{parent}/{body.name}")
    state.permissions.check(
        caller.identity_id,
        project.id,
        state.now(),
        action="create",
        subject=SECRET_FOLDERS,
        environment=env.slug,
        secret_path=parent,
    )
    if globs.depth(path) > MAX_DEPTH:
        raise BadRequest(f"Folder depth exceeds the maximum of {MAX_DEPTH}")
    if state.store.folder(env.id, path) is not None:
        raise BadRequest(f"Folder with name '{body.name}' already exists")
    row = state.store.ensure_folder(env.id, path, state.now(), description=body.description)
    return {"folder": wire.folder(row)}


@router.patch("/api/v2/secret-imports/{secretImportId}")
async def update_import(
    secretImportId: str, body: UpdateImport, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    project = state.store.require_project(body.projectId)
    env = state.store.require_environment(project.id, body.environment)
    path = globs.normalize_path(body.path)
    state.permissions.check(
        caller.identity_id,
        project.id,
        state.now(),
        action="edit",
        subject=SECRET_IMPORTS,
        environment=env.slug,
        secret_path=path,
    )
    imp = state.store.import_by_id(secretImportId)
    if imp is None or imp.env_id != env.id or imp.path != path:
        raise NotFound(f"Secret import with ID '{secretImportId}' not found")
    slug = body.import_.environment
    target_env = (
        state.store.environment(project.id, slug)
        if slug is not None
        else state.store.environment_by_id(imp.import_env_id)
    )
    if target_env is None:
        raise NotFound(f"Imported environment with slug '{slug}' in project with ID '{project.id}' not found")
    import_path = (
        globs.normalize_path(body.import_.path) if body.import_.path is not None else imp.import_path
    )
    if (target_env.id, import_path) == (env.id, path):
        raise BadRequest("Cannot import from the same location")
    # Real ``updateImport``: refused when the source already imports the importing folder.
    if any(
        (i.import_env_id, i.import_path) == (env.id, path)
        for i in state.store.imports_in(target_env.id, import_path)
    ):
        raise BadRequest("Cyclic import not allowed")
    updated = state.store.update_import(
        imp,
        state.now(),
        import_env_id=target_env.id,
        import_path=import_path,
        position=_position(body.import_.position),
    )
    # What the importing path shows has changed: tell its subscribers (and their importers).
    state.bus.publish(project.id, events.IMPORT_MUTATION, [events.Change(env.slug, path)], state.now())
    mutations.notify_importers(state, env, path)
    return {
        "message": "Successfully updated secret import",
        "secretImport": wire.secret_import(updated, state.store),
    }

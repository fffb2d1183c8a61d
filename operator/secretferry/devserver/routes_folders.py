"""``POST /api/v2/folders`` and ``PATCH /api/v2/secret-imports/{id}``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from secretferry.devserver import events, globs, mutations, wire
from secretferry.devserver.auth import CallerDep, StateDep
from secretferry.devserver.errors import BadRequest, NotFound
from secretferry.devserver.listing import MAX_DEPTH
from secretferry.devserver.permissions import SECRET_FOLDERS, SECRET_IMPORTS
from secretferry.devserver.schemas import CreateFolder, UpdateImport

router = APIRouter()


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
    target_env = env
    if body.import_.environment is not None:
        found = state.store.environment(project.id, body.import_.environment)
        if found is None:
            raise NotFound(f"Environment with slug '{body.import_.environment}' not found")
        target_env = found
    else:
        current = state.store.environment_by_id(imp.import_env_id)
        target_env = current or env
    import_path = (
        globs.normalize_path(body.import_.path) if body.import_.path is not None else imp.import_path
    )
    if (target_env.id, import_path) == (env.id, path):
        raise BadRequest("Cannot import from the same location")
    updated = state.store.update_import(
        imp,
        state.now(),
        import_env_id=target_env.id,
        import_path=import_path,
        position=body.import_.position or imp.position,
    )
    # What the importing path shows has changed: tell its subscribers (and their importers).
    state.bus.publish(project.id, events.IMPORT_MUTATION, [events.Change(env.slug, path)], state.now())
    mutations.notify_importers(state, env, path)
    return {
        "message": "Successfully updated secret import",
        "secretImport": wire.secret_import(updated, state.store),
    }

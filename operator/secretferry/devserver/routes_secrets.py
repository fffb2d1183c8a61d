"""``/api/v4/secrets``: list (with ETag), batch delete, and create/update/delete by name."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from fastapi import APIRouter, Request, Response

from secretferry.devserver import globs, listing, mutations, wire
from secretferry.devserver.auth import CallerDep, StateDep
from secretferry.devserver.errors import ApiError, BadRequest
from secretferry.devserver.permissions import SECRETS
from secretferry.devserver.schemas import BatchDelete, CreateSecret, DeleteSecret, UpdateSecret
from secretferry.devserver.state import DevState
from secretferry.devserver.store import Environment

router = APIRouter()


def _flag(request: Request, names: tuple[str, ...], default: bool) -> bool:
    for name in names:
        raw = request.query_params.get(name)
        if raw is None:
            continue
        if raw.lower() in ("true", "1"):
            return True
        if raw.lower() in ("false", "0"):
            return False
        raise ApiError(
            [{"code": "invalid_enum_value", "path": [name], "message": "Expected 'true' | 'false'"}],
            name="ValidationFailure",
            status=422,
        )
    return default


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _etag_matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    candidates = [c.strip().removeprefix("W/") for c in header.split(",")]
    return "*" in candidates or etag in candidates


@router.get("/api/v4/secrets")
async def list_secrets(request: Request, caller: CallerDep, state: StateDep) -> Response:
    params = request.query_params
    project_id = params.get("projectId") or params.get("workspaceId")
    environment = params.get("environment")
    if not project_id or not environment:
        raise BadRequest("Missing project id or environment")
    # Per-scope counts, so a test can count its own scope's list calls on a shared server.
    state.stats.scopes[f"{environment}:{params.get('secretPath') or '/'}"] += 1
    query = listing.ListQuery(
        project_id=project_id,
        environment=environment,
        secret_path=params.get("secretPath") or "/",
        view_secret_value=_flag(request, ("viewSecretValue",), True),
        expand_secret_references=_flag(request, ("expandSecretReferences",), True),
        recursive=_flag(request, ("recursive",), False),
        include_personal_overrides=_flag(request, ("includePersonalOverrides",), False),
        include_imports=_flag(request, ("includeImports", "include_imports"), True),
        tag_slugs=[t.strip() for t in (params.get("tagSlugs") or "").split(",") if t.strip()],
        metadata_filter=listing.parse_metadata_filter(params.get("metadataFilter")),
    )
    result = state.lister.list_secrets(query, identity_id=caller.identity_id, now=state.now())
    body = json.dumps(result, separators=(",", ":")).encode()
    etag = _etag(body)
    if _etag_matches(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers={"ETag": etag})
    return Response(body, media_type="application/json", headers={"ETag": etag})


def _writable_env(
    state: DevState, caller_id: str, project_id: str, env_slug: str, path: str, action: str
) -> Environment:
    project = state.store.require_project(project_id)
    env = state.store.require_environment(project.id, env_slug)
    state.permissions.check(
        caller_id,
        project.id,
        state.now(),
        action=action,
        subject=SECRETS,
        environment=env.slug,
        secret_path=path,
    )
    return env


@router.delete("/api/v4/secrets/batch")
async def delete_batch(body: BatchDelete, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    path = globs.normalize_path(body.secretPath)
    env = _writable_env(state, caller.identity_id, body.projectId, body.environment, path, "delete")
    deleted = mutations.delete_secrets(
        state, env, path, [(i.secretKey, i.type) for i in body.secrets], owner_id=caller.identity_id
    )
    return {
        "secrets": [
            wire.secret(s, project_id=env.project_id, env_slug=env.slug, with_path=False) for s in deleted
        ]
    }


@router.post("/api/v4/secrets/{secretName}")
async def create_secret(
    secretName: str, body: CreateSecret, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    path = globs.normalize_path(body.secretPath)
    env = _writable_env(state, caller.identity_id, body.projectId, body.environment, path, "create")
    secret = mutations.write_secret(
        state,
        env,
        path,
        secretName,
        mode="create",
        owner_id=caller.identity_id,
        type_=body.type,
        value=body.secretValue,
        comment=body.secretComment,
        tag_refs=body.tagIds,
        metadata=[m.model_dump() for m in body.secretMetadata or []],
        skip_multiline=body.skipMultilineEncoding,
        reminder_note=body.secretReminderNote,
        reminder_days=body.secretReminderRepeatDays,
    )
    return {"secret": wire.secret(secret, project_id=env.project_id, env_slug=env.slug, with_path=False)}


@router.patch("/api/v4/secrets/{secretName}")
async def update_secret(
    secretName: str, body: UpdateSecret, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    path = globs.normalize_path(body.secretPath)
    env = _writable_env(state, caller.identity_id, body.projectId, body.environment, path, "edit")
    metadata = [m.model_dump() for m in body.secretMetadata] if body.secretMetadata is not None else None
    secret = mutations.write_secret(
        state,
        env,
        path,
        secretName,
        mode="update",
        owner_id=caller.identity_id,
        type_=body.type,
        value=body.secretValue,
        comment=body.secretComment,
        tag_refs=body.tagIds,
        metadata=metadata,
        new_key=body.newSecretName,
        skip_multiline=body.skipMultilineEncoding,
        reminder_note=body.secretReminderNote,
        reminder_days=body.secretReminderRepeatDays,
    )
    return {"secret": wire.secret(secret, project_id=env.project_id, env_slug=env.slug, with_path=False)}


@router.delete("/api/v4/secrets/{secretName}")
async def delete_secret(
    secretName: str, body: DeleteSecret, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    path = globs.normalize_path(body.secretPath)
    env = _writable_env(state, caller.identity_id, body.projectId, body.environment, path, "delete")
    (deleted,) = mutations.delete_secrets(
        state, env, path, [(secretName, body.type)], owner_id=caller.identity_id
    )
    return {"secret": wire.secret(deleted, project_id=env.project_id, env_slug=env.slug, with_path=False)}

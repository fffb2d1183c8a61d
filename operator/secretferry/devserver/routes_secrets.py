"""``/api/v4/secrets``: list (with ETag), batch delete, and create/update/delete by name."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.datastructures import QueryParams

from secretferry.devserver import globs, listing, mutations, query, wire
from secretferry.devserver.auth import CallerDep, StateDep
from secretferry.devserver.errors import BadRequest
from secretferry.devserver.permissions import SECRETS
from secretferry.devserver.schemas import BatchDelete, CreateSecret, DeleteSecret, UpdateSecret
from secretferry.devserver.state import DevState
from secretferry.devserver.store import Environment

router = APIRouter()


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _etag_matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    candidates = [c.strip().removeprefix("W/") for c in header.split(",")]
    return "*" in candidates or etag in candidates


def _list_query(params: QueryParams) -> listing.ListQuery:
    """The real v4 list's querystring schema, then its handler's own check.

    Source: Infisical ``server/routes/v4/secret-router.ts``. Booleans are ``z.enum(["true",
    "false"])`` with real defaults (values shown, references and imports not); the imports flag is
    read only as ``include_imports`` (``includeImports`` is an unknown key there, so ignored here);
    more than 10 complete ``metadataFilter`` pairs is a 422; every issue comes back in one 422,
    before the handler's 400 for a missing project id or environment. ``includePersonalOverrides``
    is documented (docs/service-api.md) but not in every real version: it is held to the same rule.
    """
    issues = query.Issues()
    metadata_text = query.text(params, "metadataFilter", issues)
    metadata = listing.parse_metadata_filter(metadata_text)
    if len(metadata) > listing.MAX_METADATA_FILTERS:
        issues.add("metadataFilter", "custom", "You can only filter by up to 10 metadata fields")
    project_id = query.text(params, "projectId", issues)
    environment = query.text(params, "environment", issues)
    secret_path = query.text(params, "secretPath", issues)
    view = query.flag(params, "viewSecretValue", issues, default=True)
    expand = query.flag(params, "expandSecretReferences", issues, default=False)
    recursive = query.flag(params, "recursive", issues, default=False)
    include_imports = query.flag(params, "include_imports", issues, default=False)
    tag_text = query.text(params, "tagSlugs", issues)
    personal = query.flag(params, "includePersonalOverrides", issues, default=False)
    if secret_path is not None and not secret_path.startswith("/"):
        # What the real service lists for "" or a relative path is not known: refused, not guessed.
        issues.add("secretPath", "custom", "secretPath must start with '/'")
    issues.raise_if_any()
    if not project_id or not environment:
        raise BadRequest("Missing project id or environment")
    return listing.ListQuery(
        project_id=project_id,
        environment=environment,
        secret_path=secret_path or "/",
        view_secret_value=view,
        expand_secret_references=expand,
        recursive=recursive,
        include_personal_overrides=personal,
        include_imports=include_imports,
        # Split and trimmed, empty entries kept: "," filters by a tag nobody has, as in the real one.
        tag_slugs=[t.strip() for t in tag_text.split(",")] if tag_text else [],
        metadata_filter=metadata,
    )


@router.get("/api/v4/secrets")
async def list_secrets(request: Request, caller: CallerDep, state: StateDep) -> Response:
    list_query = _list_query(request.query_params)
    # Per-scope counts, so a test can count its own scope's list calls on a shared server.
    state.stats.scopes[f"{list_query.environment}:{request.query_params.get('secretPath') or '/'}"] += 1
    result = state.lister.list_secrets(list_query, identity_id=caller.identity_id, now=state.now())
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

"""``/api/v3/secrets/raw``: the secrets API the official SDKs and pre-v4 self-hosted servers speak.

Same store, listing, permissions and event fan-out as ``/api/v4/secrets`` (``raw_secrets`` on top
of ``listing`` and ``mutations``); the differences are the real v3 routes' own: ``workspaceId`` /
``workspaceSlug`` / ``projectSlug`` instead of ``projectId``, ``include_imports`` as the only
spelling of the imports flag, and defaults of ``false`` for references and imports.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Request, Response

from secretferry.devserver import etags, globs, listing, mutations, query, raw_secrets, wire
from secretferry.devserver.auth import CallerDep, StateDep
from secretferry.devserver.errors import BadRequest, NotFound
from secretferry.devserver.schemas_v3 import CreateRawSecret, DeleteRawSecret, UpdateRawSecret
from secretferry.devserver.state import DevState
from secretferry.devserver.store import Secret

router = APIRouter()

RAW = "/api/v3/secrets/raw"
SECRET_TYPES = ("shared", "personal")


@router.get(RAW)
async def list_raw(request: Request, caller: CallerDep, state: StateDep) -> Response:
    """The real v3 list's querystring is the v4 list's with the project as ``workspaceId`` or
    ``workspaceSlug``; the same rules apply (``routes_secrets``), slug resolution comes after them."""
    params = request.query_params
    issues = query.Issues()
    metadata: list[tuple[str, str]] = []
    if state.config.v3_metadata:  # else: unknown to that schema, stripped (no check, no filter)
        metadata = listing.parse_metadata_filter(query.text(params, "metadataFilter", issues))
        if len(metadata) > listing.MAX_METADATA_FILTERS:
            issues.add("metadataFilter", "custom", "You can only filter by up to 10 metadata fields")
    workspace_id = query.text(params, "workspaceId", issues)
    workspace_slug = query.text(params, "workspaceSlug", issues)
    environment = query.text(params, "environment", issues)
    secret_path = query.text(params, "secretPath", issues)
    view = query.flag(params, "viewSecretValue", issues, default=True)
    expand = query.flag(params, "expandSecretReferences", issues, default=False)
    recursive = query.flag(params, "recursive", issues, default=False)
    include_imports = query.flag(params, "include_imports", issues, default=False)
    tag_text = query.text(params, "tagSlugs", issues)
    if secret_path is not None and not secret_path.startswith("/"):
        issues.add("secretPath", "custom", "secretPath must start with '/'")  # as the v4 list
    issues.raise_if_any()
    project_id = raw_secrets.project_id_from(
        state, caller.identity_id, project_id=workspace_id, slug=workspace_slug
    )
    if not environment:
        raise BadRequest("Missing project id or environment")
    # Counted like a v4 list, so a test counting its scope's look-ups sees a v3 fallback too.
    state.stats.scopes[f"{environment}:{secret_path or '/'}"] += 1
    list_query = listing.ListQuery(
        project_id=project_id,
        environment=environment,
        secret_path=secret_path or "/",
        view_secret_value=view,
        expand_secret_references=expand,
        recursive=recursive,
        include_imports=include_imports,
        # Empty entries kept, as the real split does (see the v4 list).
        tag_slugs=[t.strip() for t in tag_text.split(",")] if tag_text else [],
        metadata_filter=metadata,
    )
    result = state.lister.list_secrets(list_query, identity_id=caller.identity_id, now=state.now())
    if not state.config.v3_metadata:
        _strip_metadata(result)
    return etags.json_response(request, result)


def _strip_metadata(result: dict[str, Any]) -> None:
    """A v3 answer of a server without secret metadata (self-hosted 2024-10): no such field."""
    groups = result.get("imports") or []
    for secret in [*result["secrets"], *(s for group in groups for s in group["secrets"])]:
        secret.pop("secretMetadata", None)


def _version(raw: str | None, issues: query.Issues) -> float | None:
    """``z.coerce.number()``: JavaScript's ``Number()``, so an empty value is 0 and junk is a 422."""
    if raw is None:
        return None
    try:
        number = float(raw) if raw else 0.0
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        issues.add("version", "invalid_type", "Expected number, received nan")
        return None
    return number


@router.get(RAW + "/{secretName}")
async def get_raw(secretName: str, request: Request, caller: CallerDep, state: StateDep) -> Response:
    params = request.query_params
    issues = query.Issues()
    workspace_id = query.text(params, "workspaceId", issues)
    workspace_slug = query.text(params, "workspaceSlug", issues)
    environment = query.text(params, "environment", issues)
    secret_path = query.text(params, "secretPath", issues) or "/"
    version = _version(query.text(params, "version", issues), issues)
    type_ = query.text(params, "type", issues) or "shared"
    if type_ not in SECRET_TYPES:
        issues.add(
            "type",
            "invalid_enum_value",
            f"Invalid enum value. Expected 'shared' | 'personal', received '{type_}'",
            received=type_,
            options=list(SECRET_TYPES),
        )
    options = raw_secrets.ReadOptions(
        type_=type_,
        version=version,
        view_secret_value=query.flag(params, "viewSecretValue", issues, default=True),
        expand_secret_references=query.flag(params, "expandSecretReferences", issues, default=False),
        include_imports=query.flag(params, "include_imports", issues, default=False),
    )
    issues.raise_if_any()
    project_id = raw_secrets.project_id_from(
        state, caller.identity_id, project_id=workspace_id, slug=workspace_slug
    )
    if not environment:
        raise BadRequest("Missing environment")
    secret = raw_secrets.get_secret(
        state,
        caller.identity_id,
        project_id=project_id,
        env_slug=environment,
        path=globs.normalize_path(secret_path),
        name=secretName.strip(),
        options=options,
    )
    return etags.json_response(request, {"secret": secret})


def _name(secret_name: str) -> str:
    name = secret_name.strip()
    if not name:
        issues = query.Issues()
        issues.add("secretName", "too_small", "String must contain at least 1 character(s)")
        issues.raise_if_any()
    return name


def _days(value: float | None) -> int | None:
    return int(value) if value is not None else None


def _answer(secret: Secret, target: raw_secrets.WriteTarget, **shown: Any) -> dict[str, Any]:
    body = wire.secret(
        secret, project_id=target.project.id, env_slug=target.env.slug, with_path=False, **shown
    )
    return {"secret": body}


def _write_target(
    state: DevState,
    identity_id: str,
    body: CreateRawSecret | UpdateRawSecret | DeleteRawSecret,
    operation: str,
) -> raw_secrets.WriteTarget:
    """Where a v3 write lands; ``operation`` names the real service's error for a missing folder."""
    return raw_secrets.write_target(
        state,
        identity_id,
        project_id=raw_secrets.project_id_from(
            state, identity_id, project_id=body.workspaceId, slug=body.projectSlug
        ),
        env_slug=body.environment,
        secret_path=body.secretPath,
        type_=body.type,
        operation=operation,
    )


@router.post(RAW + "/{secretName}")
async def create_raw(
    secretName: str, body: CreateRawSecret, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    name = _name(secretName)
    target = _write_target(state, caller.identity_id, body, "CreateSecret")
    if state.store.secret(target.env.id, target.path, name) is not None:
        raise BadRequest("Secret already exists")
    raw_secrets.require_tags(state, target.project, body.tagIds)
    raw_secrets.require_permission(state, caller.identity_id, target, "create")
    secret = mutations.write_secret(
        state,
        target.env,
        target.path,
        name,
        mode="create",
        owner_id=caller.identity_id,
        value=body.secretValue,
        comment=body.secretComment,
        tag_refs=body.tagIds,
        metadata=[m.model_dump() for m in body.secretMetadata or []],
        skip_multiline=body.skipMultilineEncoding,
        reminder_note=body.secretReminderNote,
        reminder_days=_days(body.secretReminderRepeatDays),
    )
    return _answer(secret, target)


@router.patch(RAW + "/{secretName}")
async def update_raw(
    secretName: str, body: UpdateRawSecret, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    name = _name(secretName)
    target = _write_target(state, caller.identity_id, body, "UpdateSecret")
    if state.store.secret(target.env.id, target.path, name) is None:
        raise NotFound(f"Secret with name {name} not found")
    raw_secrets.require_permission(state, caller.identity_id, target, "edit")
    raw_secrets.require_tags(state, target.project, body.tagIds)
    # The real check looks the new name up as it is, so renaming a secret to itself is refused too.
    if body.newSecretName is not None and state.store.secret(target.env.id, target.path, body.newSecretName):
        raise BadRequest("Secret with the new name already exists")
    metadata = [m.model_dump() for m in body.secretMetadata] if body.secretMetadata is not None else None
    secret = mutations.write_secret(
        state,
        target.env,
        target.path,
        name,
        mode="update",
        owner_id=caller.identity_id,
        value=body.secretValue,
        comment=body.secretComment,
        tag_refs=body.tagIds,
        metadata=metadata,
        new_key=body.newSecretName,
        skip_multiline=body.skipMultilineEncoding,
        reminder_note=body.secretReminderNote,
        reminder_days=_days(body.secretReminderRepeatDays),
    )
    # The real answer echoes what was sent: value and comment are "" when not part of the update.
    answer = _answer(
        secret,
        target,
        value=body.secretValue or "",
        hidden=raw_secrets.value_hidden(state, caller.identity_id, target),
    )
    answer["secret"]["secretComment"] = body.secretComment or ""
    return answer


@router.delete(RAW + "/{secretName}")
async def delete_raw(
    secretName: str, body: DeleteRawSecret, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    name = _name(secretName)
    target = _write_target(state, caller.identity_id, body, "DeleteSecret")
    if state.store.secret(target.env.id, target.path, name) is None:
        raise NotFound("Secret not found")
    raw_secrets.require_permission(state, caller.identity_id, target, "delete")
    (deleted,) = mutations.delete_secrets(
        state, target.env, target.path, [(name, "shared")], owner_id=caller.identity_id
    )
    return _answer(deleted, target, hidden=raw_secrets.value_hidden(state, caller.identity_id, target))

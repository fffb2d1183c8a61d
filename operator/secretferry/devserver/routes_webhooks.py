"""``/api/v1/webhooks``: register, list, update (enable/disable) and delete project webhooks.

The real routes (webhook router v1): POST ``{type?, workspaceId|projectId, environment,
webhookUrl, webhookSecretKey?, secretPath="/"}`` → ``{message, webhook}``; GET
``?workspaceId|projectId&environment?&secretPath?`` → ``{message, webhooks}``; PATCH
``/{webhookId}`` ``{isDisabled}``; DELETE ``/{webhookId}``. Permission: the ``webhooks`` subject
(create/read/edit/delete) in the project. The sending is ``devserver.webhooks``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field

from secretferry.devserver import globs
from secretferry.devserver.auth import CallerDep, StateDep
from secretferry.devserver.errors import BadRequest, NotFound
from secretferry.devserver.permissions import WEBHOOKS
from secretferry.devserver.state import DevState
from secretferry.devserver.webhooks import Webhook

router = APIRouter()


class CreateWebhook(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["general", "slack"] = "general"
    workspaceId: str | None = None
    projectId: str | None = None
    environment: Annotated[str, Field(min_length=1)]
    webhookUrl: AnyHttpUrl
    webhookSecretKey: str | None = None
    secretPath: str = "/"


class UpdateWebhook(BaseModel):
    model_config = ConfigDict(extra="ignore")
    isDisabled: bool = False


def _project_id(body_workspace: str | None, body_project: str | None) -> str:
    project_id = body_project or body_workspace
    if not project_id:
        raise BadRequest("projectId is required")
    return project_id


def _hook(state: DevState, webhook_id: str) -> Webhook:
    hook = state.webhooks.by_id.get(webhook_id)
    if hook is None:
        raise NotFound(f"Webhook with ID '{webhook_id}' not found")
    return hook


def _wire(state: DevState, hook: Webhook) -> dict[str, Any]:
    env = state.store.environment(hook.project_id, hook.environment)
    return hook.wire(env.name if env is not None else hook.environment)


@router.post("/api/v1/webhooks")
async def create_webhook(body: CreateWebhook, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    project = state.store.require_project(_project_id(body.workspaceId, body.projectId))
    env = state.store.require_environment(project.id, body.environment)
    path = (
        body.secretPath
        if any(c in body.secretPath for c in "*?[{")
        else globs.normalize_path(body.secretPath)
    )
    state.permissions.check(
        caller.identity_id,
        project.id,
        state.now(),
        action="create",
        subject=WEBHOOKS,
        environment=env.slug,
        secret_path=path,
    )
    hook = Webhook(
        id=state.webhooks.new_id(),
        project_id=project.id,
        environment=env.slug,
        secret_path=path,
        url=str(body.webhookUrl),
        secret_key=body.webhookSecretKey or None,
        type=body.type,
    )
    state.webhooks.add(hook)
    return {"message": "Successfully created webhook", "webhook": _wire(state, hook)}


@router.get("/api/v1/webhooks")
async def list_webhooks(
    caller: CallerDep,
    state: StateDep,
    workspaceId: Annotated[str | None, Query()] = None,
    projectId: Annotated[str | None, Query()] = None,
    environment: Annotated[str | None, Query()] = None,
    secretPath: Annotated[str | None, Query()] = None,
) -> dict[str, Any]:
    project = state.store.require_project(_project_id(workspaceId, projectId))
    state.permissions.check(caller.identity_id, project.id, state.now(), action="read", subject=WEBHOOKS)
    hooks = [
        h
        for h in state.webhooks.of_project(project.id)
        if (environment is None or h.environment == environment)
        and (secretPath is None or h.secret_path == secretPath)
    ]
    return {"message": "Successfully fetched webhook", "webhooks": [_wire(state, h) for h in hooks]}


@router.patch("/api/v1/webhooks/{webhookId}")
async def update_webhook(
    webhookId: str, body: UpdateWebhook, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    hook = _hook(state, webhookId)
    state.permissions.check(
        caller.identity_id,
        hook.project_id,
        state.now(),
        action="edit",
        subject=WEBHOOKS,
        environment=hook.environment,
        secret_path=hook.secret_path,
    )
    hook.is_disabled = body.isDisabled
    return {"message": "Successfully updated webhook", "webhook": _wire(state, hook)}


@router.delete("/api/v1/webhooks/{webhookId}")
async def delete_webhook(webhookId: str, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    hook = _hook(state, webhookId)
    state.permissions.check(
        caller.identity_id,
        hook.project_id,
        state.now(),
        action="delete",
        subject=WEBHOOKS,
        environment=hook.environment,
        secret_path=hook.secret_path,
    )
    del state.webhooks.by_id[webhookId]
    return {"message": "Successfully deleted webhook", "webhook": _wire(state, hook)}

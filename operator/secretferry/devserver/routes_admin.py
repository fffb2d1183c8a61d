"""``/_admin``: test and demo controls (seed, direct writes, stats, faults, streams, tokens).

Every route, the API docs and OpenAPI document included, requires header ``X-Admin-Token`` (see
``admin_token``): these routes mint tokens for any identity and write secrets. The one exception
is ``GET /_admin/health``. Never faulted, never counted in stats, so tests can always inspect and
repair what they broke.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import yaml
from fastapi import APIRouter, Depends, Request, Security
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.security import APIKeyHeader
from pydantic import BaseModel, Field

from secretferry.devserver import admin_token, globs, identity_store, mutations, seed, wire
from secretferry.devserver.auth import StateDep
from secretferry.devserver.errors import BadRequest, NotFound, Unauthorized
from secretferry.devserver.state import DevState, get_state
from secretferry.devserver.store import Environment
from secretferry.devserver.tokens import login_response

# A security scheme rather than a bare header read, so the docs page offers "Authorize" and its
# "Try it out" requests carry the token.
_admin_header = APIKeyHeader(name=admin_token.HEADER, auto_error=False)


def require_admin(
    provided: Annotated[str | None, Security(_admin_header)],
    state: Annotated[DevState, Depends(get_state)],
) -> None:
    if not admin_token.matches(provided, state.admin_token):
        raise Unauthorized(f"Missing or wrong {admin_token.HEADER}")


router = APIRouter(prefix="/_admin", dependencies=[Depends(require_admin)])
health_router = APIRouter()


class SecretRef(BaseModel):
    projectId: str = Field(min_length=1, description="project id or slug")
    environment: str = Field(min_length=1)
    secretPath: str = "/"
    secretKey: str = Field(min_length=1)


class SecretWrite(SecretRef):
    secretValue: str = ""
    secretComment: str | None = None
    tags: list[str] | None = None
    metadata: list[dict[str, Any]] | None = None


class TokenRequest(BaseModel):
    identityId: str = Field(min_length=1)
    accessTokenTTL: int = identity_store.DEFAULT_TTL_SECONDS
    accessTokenMaxTTL: int = identity_store.DEFAULT_TTL_SECONDS
    accessTokenNumUsesLimit: int = 0


@health_router.get("/_admin/health")
async def health() -> dict[str, str]:
    """Liveness, the only admin route without the token, so that a probe (``testing.DevServer``'s
    wait for start-up, a container check) needs no secret. It answers a constant and so tells no
    more than an open port does: no version, counts, configuration or state."""
    return {"status": "ok"}


@router.get("/openapi.json", include_in_schema=False)
async def openapi(request: Request) -> dict[str, Any]:
    """The OpenAPI document: it lists every admin route, so it is locked like them."""
    document: dict[str, Any] = request.app.openapi()
    return document


@router.get("/docs", include_in_schema=False)
async def docs(request: Request) -> HTMLResponse:
    """Swagger UI with the document inlined: the page cannot send the token when it fetches
    ``/_admin/openapi.json`` itself."""
    return get_swagger_ui_html(
        openapi_url="/_admin/openapi.json",
        title=f"{request.app.title} - admin",
        swagger_ui_parameters={"spec": request.app.openapi()},
    )


async def _document(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        content_type = request.headers.get("content-type", "")
        doc = json.loads(raw) if "json" in content_type else yaml.safe_load(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise BadRequest(f"Unparseable document: {exc}") from exc
    if not isinstance(doc, dict):
        raise BadRequest("Expected a mapping")
    return doc


def _env(state: DevState, project_ref: str, env_slug: str) -> Environment:
    project = state.store.project_by_ref(project_ref)
    if project is None:
        raise NotFound(f"Project '{project_ref}' not found")
    return state.store.require_environment(project.id, env_slug)


@router.post("/seed")
async def add_seed(request: Request, state: StateDep) -> dict[str, Any]:
    return {"applied": seed.apply(state, await _document(request))}


@router.put("/secrets")
async def put_secret(body: SecretWrite, state: StateDep) -> dict[str, Any]:
    env = _env(state, body.projectId, body.environment)
    secret = mutations.write_secret(
        state,
        env,
        globs.normalize_path(body.secretPath),
        body.secretKey,
        mode="upsert",
        value=body.secretValue,
        comment=body.secretComment,
        tag_refs=body.tags,
        metadata=body.metadata,
    )
    return {"secret": wire.secret(secret, project_id=env.project_id, env_slug=env.slug, with_path=False)}


@router.delete("/secrets")
async def delete_secret(body: SecretRef, state: StateDep) -> dict[str, Any]:
    env = _env(state, body.projectId, body.environment)
    (deleted,) = mutations.delete_secrets(
        state, env, globs.normalize_path(body.secretPath), [(body.secretKey, "shared")]
    )
    return {"secret": wire.secret(deleted, project_id=env.project_id, env_slug=env.slug, with_path=False)}


@router.get("/stats")
async def stats(state: StateDep) -> dict[str, Any]:
    snapshot = state.stats.snapshot(open_streams=state.bus.open_streams, events_delivered=state.bus.delivered)
    snapshot["liveTokens"] = state.tokens.live_by_identity(state.now())
    return snapshot


@router.post("/stats/reset")
async def reset_stats(state: StateDep) -> dict[str, Any]:
    state.stats.reset()
    state.bus.delivered = 0
    return {"reset": True}


@router.get("/faults")
async def get_faults(state: StateDep) -> dict[str, Any]:
    return state.faults.current.document


@router.post("/faults")
async def set_faults(request: Request, state: StateDep) -> dict[str, Any]:
    doc = await _document(request)
    try:
        state.faults.set(doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise BadRequest(f"Invalid fault document: {exc}") from exc
    return state.faults.current.document


@router.delete("/faults")
async def clear_faults(state: StateDep) -> dict[str, Any]:
    state.faults.clear()
    return {}


@router.post("/streams/drop")
async def drop_streams(state: StateDep) -> dict[str, int]:
    return {"dropped": state.bus.drop_all()}


@router.post("/identities/{identity_id}/expire-tokens")
async def expire_tokens(identity_id: str, state: StateDep) -> dict[str, int]:
    return {"expired": state.tokens.expire_identity(identity_id)}


@router.post("/tokens")
async def issue_token(body: TokenRequest, state: StateDep) -> dict[str, Any]:
    """Mint an access token directly (for the operator's ``accessToken`` auth mode and tests)."""
    if state.identities.identity(body.identityId) is None:
        raise NotFound(f"Identity with ID '{body.identityId}' not found")
    info = state.tokens.issue(
        body.identityId,
        "token",
        state.now(),
        ttl=body.accessTokenTTL,
        max_ttl=body.accessTokenMaxTTL,
        uses_limit=body.accessTokenNumUsesLimit,
    )
    return login_response(info, state.now())

"""Machine-identity logins and token renew/revoke (``/api/v1/auth/...``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from secretferry.devserver import auth
from secretferry.devserver.auth import StateDep
from secretferry.devserver.errors import Unauthorized
from secretferry.devserver.schemas import KubernetesLogin, TokenBody, UniversalLogin
from secretferry.devserver.tokens import TokenInvalid, login_response

router = APIRouter()


@router.post("/api/v1/auth/universal-auth/login")
async def universal_login(body: UniversalLogin, state: StateDep) -> dict[str, Any]:
    info = auth.universal_login(state, body.clientId, body.clientSecret)
    return login_response(info, state.now())


@router.post("/api/v1/auth/kubernetes-auth/login")
async def kubernetes_login(body: KubernetesLogin, state: StateDep) -> dict[str, Any]:
    info = await auth.kubernetes_login(state, body.identityId, body.jwt)
    return login_response(info, state.now())


@router.post("/api/v1/auth/token/renew")
async def renew(body: TokenBody, state: StateDep) -> dict[str, Any]:
    try:
        info = state.tokens.renew(body.accessToken, state.now())
    except TokenInvalid as exc:
        raise Unauthorized(exc.reason) from exc
    return login_response(info, state.now())


@router.post("/api/v1/auth/token/revoke")
async def revoke(body: TokenBody, state: StateDep) -> dict[str, Any]:
    if not state.tokens.revoke(body.accessToken):
        raise Unauthorized("Invalid access token")
    return {"message": "Successfully revoked access token"}

"""Which module builds the credentials of an identity's ``spec.auth`` (the model admits exactly one
method). Called once per session build: every Secret is read afresh, and a token-sending method
returns a minter that mints at every login, never a token."""

from __future__ import annotations

from secretferry.models import identity as identity_models
from secretferry.reconcile.login import access_token, context, jwt, kubernetes, oidc, universal
from secretferry.service import auth


async def credentials(ctx: context.LoginContext, spec: identity_models.IdentityAuth) -> auth.Credentials:
    if spec.kubernetes is not None:
        return kubernetes.credentials(ctx, spec.kubernetes)
    if spec.oidc is not None:
        return oidc.credentials(ctx, spec.oidc)
    if spec.jwt is not None:
        return jwt.credentials(ctx, spec.jwt)
    if spec.universal is not None:
        return await universal.credentials(ctx, spec.universal)
    assert spec.access_token is not None  # IdentityAuth admits exactly one method
    return await access_token.credentials(ctx, spec.access_token)

"""JWT auth: the service verifies a fresh ServiceAccount token with a JWKS URL or static public
keys configured at the service (no discovery, no call into the cluster)."""

from __future__ import annotations

from secretferry.models import identity as identity_models
from secretferry.reconcile.login import context, service_account
from secretferry.service import auth


def credentials(ctx: context.LoginContext, spec: identity_models.JWTAuth) -> auth.Credentials:
    return auth.JWTCredentials(
        identity_id=spec.identity_id, mint_jwt=service_account.minter(ctx, spec, method="jwt")
    )

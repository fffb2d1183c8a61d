"""A ready access token from a Secret (development): sent as it is, never renewed nor revoked."""

from __future__ import annotations

from secretferry.models import identity as identity_models
from secretferry.reconcile.login import context, secret_values
from secretferry.service import auth


async def credentials(ctx: context.LoginContext, spec: identity_models.AccessTokenAuth) -> auth.Credentials:
    return auth.StaticTokenCredentials(token=await secret_values.read(ctx, spec.secret_ref))

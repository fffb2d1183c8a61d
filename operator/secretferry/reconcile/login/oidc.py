"""OIDC auth: the service verifies a fresh ServiceAccount token against the issuer's discovery
document and JWKS, with no call into the cluster (private and managed clusters)."""

from __future__ import annotations

from secretferry.models import identity as identity_models
from secretferry.reconcile.login import context, service_account
from secretferry.service import auth


def credentials(ctx: context.LoginContext, spec: identity_models.OIDCAuth) -> auth.Credentials:
    return auth.OIDCCredentials(
        identity_id=spec.identity_id, mint_jwt=service_account.minter(ctx, spec, method="oidc")
    )

"""Kubernetes auth: the service reviews a fresh ServiceAccount token with the cluster's TokenReview
API, so it must reach the apiserver (OIDC or JWT auth when it cannot)."""

from __future__ import annotations

from secretferry.models import identity as identity_models
from secretferry.reconcile.login import context, service_account
from secretferry.service import auth


def credentials(ctx: context.LoginContext, spec: identity_models.KubernetesAuth) -> auth.Credentials:
    return auth.KubernetesCredentials(
        identity_id=spec.identity_id,
        mint_jwt=service_account.minter(ctx, spec, method="kubernetes"),
        # A TokenReview refusal naming exactly these means the server sent no audience of its own.
        api_audiences=ctx.tokens.known_api_audiences,
    )

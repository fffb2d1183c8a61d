"""The ServiceAccount token a Kubernetes, OIDC or JWT login sends: which ServiceAccount, which
audiences, how long, minted afresh at every login.

What the three methods share; the audience and opt-in rules applied before each TokenRequest are
``reconcile.token_minting``'s, the same whatever the method (a token the apiserver itself would
accept is never handed to the service, whichever route it goes to).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from secretferry.models import identity as identity_models
from secretferry.reconcile import tenancy
from secretferry.reconcile.login import context


def minter(
    ctx: context.LoginContext, spec: identity_models.KubernetesAuth, *, method: str
) -> Callable[[], Awaitable[str]]:
    """A fresh TokenRequest per call for ``spec.serviceAccountRef``, with its audiences and the
    token lifetime capped by the operator's settings."""
    expiration, _ = tenancy.token_expiration(
        spec.token_expiration_seconds, cap=ctx.settings.max_token_expiration_seconds
    )
    # Only an admin's ClusterMachineIdentity may opt in to the apiserver's own audience.
    allowed = isinstance(spec, identity_models.ClusterKubernetesAuth) and spec.allow_api_server_audience
    return ctx.tokens.minter(
        ctx.label,
        identity=ctx.identity,
        namespaced=ctx.namespaced,
        namespace=ctx.ref_namespace(spec.service_account_ref),
        name=spec.service_account_ref.name,
        audiences=list(spec.audiences),
        expiration_seconds=expiration,
        allow_api_server_audience=allowed,
        method=method,
    )

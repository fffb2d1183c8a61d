"""Universal auth: a client ID and client secret, read from Secrets at every session build.

Either both from one ``credentialsSecretRef`` Secret (two keys) or an inline ``clientId`` with a
``clientSecretRef``; the secret is read through ``secret_values`` (opt-in for namespaced identities).
"""

from __future__ import annotations

from secretferry.models import identity as identity_models
from secretferry.reconcile.login import context, secret_values
from secretferry.service import auth


async def credentials(ctx: context.LoginContext, spec: identity_models.UniversalAuth) -> auth.Credentials:
    if spec.credentials_secret_ref is not None:
        ref = spec.credentials_secret_ref
        namespace = ctx.ref_namespace(ref)
        client_id = await secret_values.read(
            ctx, secret_values.key_ref(ref.name, ref.client_id_key, namespace)
        )
        client_secret = await secret_values.read(
            ctx, secret_values.key_ref(ref.name, ref.client_secret_key, namespace)
        )
    else:
        assert spec.client_id is not None and spec.client_secret_ref is not None  # the model's shape rule
        client_id, client_secret = spec.client_id, await secret_values.read(ctx, spec.client_secret_ref)
    return auth.UniversalCredentials(client_id=client_id, client_secret=client_secret)

"""A value of a Secret an identity references: client secrets, static tokens, CA bundles.

For a namespaced identity only from a Secret that opted in (``tenancy.opted_in``): a value of any
other Secret never leaves memory, and a missing Secret reads the same as one that did not opt in,
so a tenant learns nothing about Secrets it cannot read.
"""

from __future__ import annotations

from secretferry.kube import errors as kube_errors
from secretferry.kube import secretrefs
from secretferry.models import base as models_base
from secretferry.reconcile import problems, tenancy, token_minting
from secretferry.reconcile.login import context


async def read(ctx: context.LoginContext, ref: models_base.SecretKeyRef) -> str:
    value, _ = await read_versioned(ctx, ref)
    return value


async def read_versioned(ctx: context.LoginContext, ref: models_base.SecretKeyRef) -> tuple[str, str]:
    """``read``, and the Secret's resourceVersion as read (the CA bundle's watch compares it)."""
    namespace = ctx.ref_namespace(ref)
    try:
        secret = await secretrefs.read(ctx.kube, namespace=namespace, name=ref.name)
        if ctx.namespaced and not tenancy.opted_in(secret.annotations, ctx.identity):
            raise not_opted_in(ctx, "Secret", namespace=namespace, name=ref.name)
        return secret.value(ref.key), secret.resource_version
    except kube_errors.SecretKeyMissing as exc:  # only of a Secret that opted in (or a cluster one)
        raise token_minting.credentials_problem(f"{ctx.label}: {exc}") from exc
    except kube_errors.NotFound as exc:
        if ctx.namespaced:  # missing and not opted in read the same (tenancy.not_opted_in)
            raise not_opted_in(ctx, "Secret", namespace=namespace, name=ref.name) from None
        raise token_minting.credentials_problem(
            f"{ctx.label}: cannot read key {ref.key!r} of Secret {namespace}/{ref.name}: {exc}"
        ) from exc
    except kube_errors.KubeError as exc:
        raise token_minting.credentials_problem(
            f"{ctx.label}: cannot read key {ref.key!r} of Secret {namespace}/{ref.name}: {exc}"
        ) from exc
    except LookupError as exc:
        raise token_minting.credentials_problem(f"{ctx.label}: {exc}") from exc


def key_ref(name: str, key: str, namespace: str) -> models_base.SecretKeyRef:
    """A key reference inside a credentials Secret (namespace kept for cluster identities)."""
    return models_base.ClusterSecretKeyRef(name=name, key=key, namespace=namespace)


def not_opted_in(ctx: context.LoginContext, kind: str, *, namespace: str, name: str) -> problems.Problem:
    return token_minting.not_opted_in(ctx.label, ctx.identity, namespace=namespace, name=name, kind=kind)

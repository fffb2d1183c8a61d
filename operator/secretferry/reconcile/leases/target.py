"""The Secret holding a lease's credentials: built purely, written only if it is ours.

The Secret is owned by its DynamicSecretLease (``ownerReferences`` with ``controller: true``), so
Kubernetes' garbage collector removes it with the lease object, and an existing Secret that is not
ours — someone else's Secret of the same name — is never overwritten (TargetNotOwned): a tenant
naming a Secret they cannot read gains nothing but that refusal.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import objects
from secretferry.models import base as models_base
from secretferry.models import dynamicsecretlease as lease_models
from secretferry.models import labels, secretsync
from secretferry.reconcile import problems, reasons

FIELD_MANAGER = "secretferry-lease"


def manifest(lease: lease_models.DynamicSecretLease, data: Mapping[str, Any]) -> dict[str, Any]:
    """The Secret for ``data`` (the lease's credentials); keys that a Secret cannot hold are refused."""
    encoded: dict[str, str] = {}
    for key, value in data.items():
        if not secretsync.is_data_key(key):
            raise problems.Problem(
                reasons.LEASE_DATA_INVALID, f"the lease's data key {key!r} is not a valid Secret key"
            )
        text = value if isinstance(value, str) else str(value)
        encoded[key] = base64.b64encode(text.encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": lease.target_name,
            "namespace": lease.metadata.namespace,
            "labels": {labels.MANAGED_BY_LABEL: labels.MANAGED_BY_VALUE},
            "ownerReferences": [
                {
                    "apiVersion": models_base.API_VERSION,
                    "kind": lease_models.DYNAMIC_SECRET_LEASE_KIND,
                    "name": lease.metadata.name,
                    "uid": lease.metadata.uid,
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "data": encoded,
    }


def _ours(metadata: Mapping[str, Any], uid: str | None) -> bool:
    refs = metadata.get("ownerReferences") or []
    return any(ref.get("uid") == uid and ref.get("controller") for ref in refs)


async def write(
    kube: kube_client.Kube, lease: lease_models.DynamicSecretLease, data: Mapping[str, Any]
) -> None:
    """Create the Secret, or replace the data of the one this lease owns; raises ``problems.Problem``."""
    wanted = manifest(lease, data)
    namespace = lease.metadata.namespace or ""
    try:
        await objects.create(kube, wanted, field_manager=FIELD_MANAGER)
        return
    except kube_errors.AlreadyExists:
        pass
    except kube_errors.KubeError as exc:
        raise problems.Problem(
            reasons.LEASE_WRITE_FAILED, f"cannot create Secret {lease.target_name!r}: {exc}", retriable=True
        ) from exc
    existing = await objects.get_metadata(kube, kind="Secret", namespace=namespace, name=lease.target_name)
    if existing is None or not _ours(existing, lease.metadata.uid):
        raise problems.Problem(
            reasons.TARGET_NOT_OWNED,
            f"Secret {lease.target_name!r} exists and is not owned by this DynamicSecretLease;"
            " it is left as it is",
        )
    try:
        await objects.apply(kube, wanted, field_manager=FIELD_MANAGER, force=True)
    except kube_errors.KubeError as exc:
        raise problems.Problem(
            reasons.LEASE_WRITE_FAILED, f"cannot update Secret {lease.target_name!r}: {exc}", retriable=True
        ) from exc


async def present(kube: kube_client.Kube, lease: lease_models.DynamicSecretLease) -> bool:
    """Whether the Secret this lease owns is there (a deleted one needs a new lease: the service
    hands out credentials once, at lease time)."""
    namespace = lease.metadata.namespace or ""
    try:
        metadata = await objects.get_metadata(
            kube, kind="Secret", namespace=namespace, name=lease.target_name
        )
    except kube_errors.KubeError:
        return True  # cannot tell: assume it is there rather than take a lease for nothing
    return metadata is not None and _ours(metadata, lease.metadata.uid)

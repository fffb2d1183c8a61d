"""Finalizers on our custom resources: one JSON merge patch, guarded by the resourceVersion.

A merge patch replaces the whole ``metadata.finalizers`` list, so it carries the resourceVersion
it was computed from: a list changed by someone else in between is a 409 (``Conflict``), never
silently overwritten (which could drop another controller's finalizer).
"""

from __future__ import annotations

from collections.abc import Sequence

from secretferry.kube import status
from secretferry.kube.client import Kube
from secretferry.models import base as models_base


async def set_finalizers(
    kube: Kube,
    *,
    plural: str,
    namespace: str | None,
    name: str,
    finalizers: Sequence[str],
    resource_version: str,
) -> dict[str, object]:
    """Write ``finalizers`` as the object's whole list; returns the object as the apiserver left it."""
    path = status.resource_path(
        group=models_base.GROUP, version=models_base.VERSION, plural=plural, namespace=namespace, name=name
    )
    body = {"metadata": {"finalizers": list(finalizers), "resourceVersion": resource_version}}
    return await kube.request("PATCH", path, body=body, content_type=status.MERGE_PATCH)

"""Our custom resources (secretferry.io): the paths of their collections, and one LIST.

Why here: ``reconcile`` says which resources it wants (a plural, a namespace); spelling the URL
is this layer's job, like ``objects.path`` for Secrets/ConfigMaps and ``status.resource_path``
for a named object.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from secretferry.kube.client import Kube
from secretferry.models import base as models_base


def collection_path(plural: str, *, namespace: str | None = None) -> str:
    """``/apis/secretferry.io/<version>[/namespaces/<ns>]/<plural>``: all namespaces when None."""
    scope = f"/namespaces/{quote(namespace, safe='')}" if namespace else ""
    return f"/apis/{models_base.GROUP}/{models_base.VERSION}{scope}/{plural}"


async def list_items(kube: Kube, *, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
    """Every object of ``plural`` in ``namespace`` (all namespaces when None), in one request.

    Unpaged: meant for the few identities read at start-up, not for 10,000 SecretSyncs
    (``watching.list_pages`` pages those).
    """
    listing = await kube.request("GET", collection_path(plural, namespace=namespace))
    return list(listing.get("items") or [])

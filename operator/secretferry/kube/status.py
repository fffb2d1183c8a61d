"""Status patches on any resource, custom ones included.

JSON merge patches: they work on custom resources (strategic merge does not) and touch only the keys
sent. Status goes to the ``/status`` subresource, so it never bumps ``metadata.generation`` and
needs only the ``<plural>/status`` RBAC verb.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from secretferry.kube.client import Kube

MERGE_PATCH = "application/merge-patch+json"


def resource_path(*, group: str, version: str, plural: str, namespace: str | None, name: str) -> str:
    """``/api/v1/...`` for the core group (``group=""``), ``/apis/<group>/<version>/...`` otherwise."""
    prefix = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    scope = f"/namespaces/{quote(namespace, safe='')}" if namespace else ""
    return f"{prefix}{scope}/{plural}/{quote(name, safe='')}"


async def patch_status(
    kube: Kube,
    *,
    group: str,
    version: str,
    plural: str,
    namespace: str | None,
    name: str,
    status: dict[str, Any],
) -> None:
    """Merge ``status`` into the object's status (``None`` values remove keys; lists are replaced)."""
    await kube.request(
        "PATCH",
        resource_path(group=group, version=version, plural=plural, namespace=namespace, name=name)
        + "/status",
        body={"status": status},
        content_type=MERGE_PATCH,
    )

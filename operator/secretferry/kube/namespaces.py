"""Namespace labels, for ClusterMachineIdentity.spec.allowedNamespaces (matched by ``LabelSelector``).

Read once per namespace (``labels``) until the namespace watch (``COLLECTION``, metadata only,
cluster-wide: RBAC cannot grant a list of some namespaces) has listed them all; from then on
label changes arrive as events and take effect at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from secretferry.kube.client import Kube

COLLECTION = "/api/v1/namespaces"


async def labels(kube: Kube, name: str) -> dict[str, str]:
    """The namespace's labels (``NotFound`` if it does not exist)."""
    namespace = await kube.request("GET", f"{COLLECTION}/{quote(name, safe='')}")
    return labels_of(namespace)


def labels_of(namespace: Mapping[str, Any]) -> dict[str, str]:
    """The labels of a namespace object (or its metadata-only form)."""
    found = (namespace.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in found.items()}

"""Namespace labels, for ClusterMachineIdentity.spec.allowedNamespaces (matched by ``LabelSelector``)."""

from __future__ import annotations

from urllib.parse import quote

from secretferry.kube.client import Kube


async def labels(kube: Kube, name: str) -> dict[str, str]:
    """The namespace's labels (``NotFound`` if it does not exist)."""
    namespace = await kube.request("GET", f"/api/v1/namespaces/{quote(name, safe='')}")
    found = (namespace.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in found.items()}

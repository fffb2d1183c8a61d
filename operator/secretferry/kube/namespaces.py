"""Namespace labels and label-selector matching (ClusterMachineIdentity.spec.allowedNamespaces)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from secretferry.kube.client import Kube


async def labels(kube: Kube, name: str) -> dict[str, str]:
    """The namespace's labels (``NotFound`` if it does not exist)."""
    namespace = await kube.request("GET", f"/api/v1/namespaces/{quote(name, safe='')}")
    found = (namespace.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in found.items()}


def matches_selector(labels: Mapping[str, str], selector: Mapping[str, Any]) -> bool:
    """Kubernetes LabelSelector semantics: every ``matchLabels`` pair and every expression must hold.

    An empty selector matches everything (as in the API). Unknown operators raise ``ValueError``
    rather than silently matching: a selector that widens access by accident is the worse failure.
    """
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or ():
        key = expression["key"]
        operator = expression["operator"]
        values = expression.get("values") or ()
        if operator == "In":
            ok = key in labels and labels[key] in values
        elif operator == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif operator == "Exists":
            ok = key in labels
        elif operator == "DoesNotExist":
            ok = key not in labels
        else:
            raise ValueError(f"unknown label selector operator {operator!r}")
        if not ok:
            return False
    return True

"""ServiceAccounts: read one's annotations (the opt-in a namespaced MachineIdentity needs).

Only ``metadata.annotations`` is kept: a ServiceAccount object may list token Secrets, which the
caller has no business with.
"""

from __future__ import annotations

from urllib.parse import quote

from secretferry.kube import errors
from secretferry.kube.client import Kube

COLLECTION = "/api/v1/serviceaccounts"
"""Watched metadata-only (identity_intake.py) for the opt-in annotation."""


async def read_annotations(kube: Kube, *, namespace: str, name: str) -> dict[str, str]:
    """The annotations of ServiceAccount ``namespace/name``; :class:`errors.NotFound` when missing."""
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/serviceaccounts/{quote(name, safe='')}"
    try:
        account = await kube.request("GET", path)
    except errors.NotFound as exc:
        raise errors.NotFound(404, "NotFound", f"ServiceAccount {namespace}/{name} not found") from exc
    return dict((account.get("metadata") or {}).get("annotations") or {})

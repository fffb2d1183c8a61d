"""Which namespaces a ClusterSecretSync selects, and the in-memory SecretSync each one gets.

Pure: no I/O, table-tested. Why expand in memory rather than create child SecretSync objects: a
child object in a tenant's namespace would be one the tenant (with ``edit`` there) could change,
and whatever it says would be written. The expanded SecretSync exists only in the operator; it
goes through the same pass as a SecretSync (so the same scope is fetched once for both kinds),
under a key no SecretSync can have (``state.cluster_key``).

Only namespaces the operator serves are selected (``served``: settings.watched_namespaces, empty
for all): it watches targets and holds RBAC there only.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from secretferry.models import base as models_base
from secretferry.models import clustersecretsync as css_models
from secretferry.models import secretsync as sync_models


def selected(
    spec: css_models.ClusterSecretSyncSpec,
    namespaces: Mapping[str, Mapping[str, str]],
    *,
    served: Collection[str] = (),
) -> set[str]:
    """The namespaces of ``namespaces`` (name → labels, as the namespace watch has them) that
    ``spec`` selects and the operator serves (``served``: empty for every namespace)."""
    return {
        name
        for name, labels in namespaces.items()
        if spec.selects(name, labels) and (not served or name in served)
    }


def expanded_body(body: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The SecretSync ``body`` (a ClusterSecretSync, as read) stands for in ``namespace``.

    Its metadata is the ClusterSecretSync's (name, uid, generation), so the data HMAC key
    (desired.object_key: namespace, name, uid, generation) is this pair's own, and a new spec
    generation is a new generation here too. ``syncTemplate`` is copied as it is; a spec that does
    not parse fails in the pass with InvalidSpec, as a SecretSync's would.
    """
    meta = body.get("metadata") or {}
    spec = (body.get("spec") or {}).get("syncTemplate") or {}
    return {
        "apiVersion": models_base.API_VERSION,
        "kind": sync_models.SECRET_SYNC_KIND,
        "metadata": {
            "name": meta.get("name", ""),
            "namespace": namespace,
            "uid": meta.get("uid", ""),
            "generation": meta.get("generation"),
        },
        "spec": spec,
    }

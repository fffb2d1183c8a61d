"""Write a target as the SecretSync it is for: its own field manager, and the upgrade from the old one.

Why here and not in kube/: *which* fields a SecretSync may take from the old shared manager is a
policy (kube/managers.py only does the moving). An Owner/Orphan target is this SecretSync's alone,
so everything the old manager wrote there was its; a Merge target is shared, and the old manager
may also hold the keys of the other SecretSyncs merging into it, so a Merge SecretSync takes only
the fields it sends now and the keys it wrote before (``status.syncedKeys``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import managers, objects
from secretferry.reconcile import desired as desired_mod

log = logging.getLogger(__name__)


def manager(want: desired_mod.DesiredObject) -> str:
    return managers.for_sync(want.sync_name)


async def apply(
    kube: kube_client.Kube,
    want: desired_mod.DesiredObject,
    manifest: dict[str, Any],
    *,
    previously: Collection[str],
) -> dict[str, Any]:
    """Server-side apply ``manifest`` as ``want``'s SecretSync; return the object written.

    Owner/Orphan force (the object is ours); Merge does not, so another writer's key is a
    ``Conflict``, never overwritten. After an upgrade the first write also hands the old shared
    manager's fields over (see the module docstring): for Merge before the apply when a value it
    co-owns changes (else a ``Conflict`` with it), and after any apply that leaves it owning ours.
    """
    merge = want.creation_policy == "Merge"
    only = managers.fields_of(manifest, data_keys=previously) if merge else None
    name = manager(want)
    try:
        result = await objects.apply(kube, manifest, field_manager=name, force=not merge)
    except kube_errors.Conflict as exc:
        if not merge or managers.LEGACY not in exc.managers:
            raise
        fresh = await objects.get(kube, kind=want.kind, namespace=want.namespace, name=want.name)
        if fresh is None:
            raise
        await _hand_over(kube, want, fresh, to=name, only=only)
        result = await objects.apply(kube, manifest, field_manager=name, force=False)
    handed = await _hand_over(kube, want, result, to=name, only=only)
    if handed is None:
        return result
    if merge:
        return handed
    # The old manager's stale fields (a label since dropped from spec.target.labels, ...) are now
    # this SecretSync's and not in its intent: applying again removes them, as 0.x's next write did.
    return await objects.apply(kube, manifest, field_manager=name, force=True)


async def _hand_over(
    kube: kube_client.Kube,
    want: desired_mod.DesiredObject,
    obj: dict[str, Any],
    *,
    to: str,
    only: managers.FieldSet | None,
) -> dict[str, Any] | None:
    """Move the old manager's fields in ``obj`` to ``to``; the object written, or None if nothing
    was moved. A lost race (the object changed since ``obj``, a ``Conflict``) moves nothing: the
    write itself is done, and the next write of this target tries again."""
    metadata = obj.get("metadata") or {}
    fields = managers.hand_over(metadata.get("managedFields"), to=to, only=only)
    version = metadata.get("resourceVersion")
    if fields is None or not version:
        return None
    try:
        result = await objects.set_managed_fields(
            kube,
            kind=want.kind,
            namespace=want.namespace,
            name=want.name,
            resource_version=str(version),
            managed_fields=fields,
            field_manager=to,
        )
    except kube_errors.Conflict:
        log.debug(
            "%s %s/%s changed meanwhile: its field managers are handed over at the next write",
            want.kind,
            want.namespace,
            want.name,
        )
        return None
    log.info(
        "took over fields of the former field manager %r in %s %s/%s as %r",
        managers.LEGACY,
        want.kind,
        want.namespace,
        want.name,
        to,
    )
    return result

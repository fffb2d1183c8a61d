"""spec.refreshPolicy: whether a pass may read the service at all (ESO's Periodic/OnChange/CreatedOnce).

Why a check before the pass and not a timer setting: a SecretSync under OnChange or CreatedOnce
must cost the service nothing once synced — no list, no scope registration (so no resync and no
event stream), and no login made for it alone (sessions renew only when a call is made). The pass
(sync.py) asks ``held`` first; when it answers, the pass reports Synced from what Kubernetes holds
and touches neither the identity nor the service.

What still brings a fetch under OnChange and CreatedOnce (one list per source, README "Refresh
policy"): the force-sync annotation; a target that does not exist (first sync, deleted by hand,
spec.target renamed); and, under OnChange only, a spec whose metadata.generation has not been
synced yet. A hand edit of the target is not repaired: repairing it needs the values, which we do
not keep, so it would cost a fetch per edit; delete the target (or force-sync) to get the
service's values back. Everything here survives a restart, because it is read from the target
(the watch cache, else one GET) and from status — nothing in memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from secretferry.kube import errors as kube_errors
from secretferry.kube import objects
from secretferry.models import labels
from secretferry.models import secretsync as sync_models
from secretferry.reconcile import conditions, drift, outcomes, reasons, state
from secretferry.reconcile import deps as deps_mod
from secretferry.reconcile import desired as desired_mod

PERIODIC: Final = "Periodic"

_MODE_REASONS: Final = {
    reasons.ON_CHANGE: "spec.refreshPolicy is OnChange: the service is read when the spec changes,"
    " on force-sync and to re-create a deleted target; no resync, no event stream",
    reasons.CREATED_ONCE: "spec.refreshPolicy is CreatedOnce: the service was read when the target"
    " was created, and is read again only to re-create it or on force-sync; no resync, no event stream",
}


def periodic(sync: sync_models.SecretSync) -> bool:
    """Whether the SecretSync is read on a timer and on events (today's behaviour)."""
    return sync.spec.refresh_policy == PERIODIC


def mode(sync: sync_models.SecretSync) -> tuple[str, str]:
    """status.updateMode and its reason for a SecretSync that is not Periodic."""
    policy = sync.spec.refresh_policy
    return policy, _MODE_REASONS[policy]


def hold_reason(
    policy: str,
    *,
    generation: int | None,
    status: Mapping[str, Any],
    target_present: bool,
    force: bool,
) -> str | None:
    """Why this pass must not read the service, or None when it must. Pure: the whole decision.

    ``target_present``: the target exists and is this SecretSync's (``owned_target``).
    """
    if policy == PERIODIC or force or not target_present:
        return None
    if policy == reasons.CREATED_ONCE:
        return "refreshPolicy CreatedOnce: the target exists, so the service is not read again"
    synced = _synced(status) and status.get("observedGeneration") == generation
    if synced:
        return "refreshPolicy OnChange: this spec generation is synced, so the service is not read again"
    return None


def owned_target(obj: Mapping[str, Any] | None, *, sync_name: str, status: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is a target this SecretSync wrote: it carries our sync label (Owner,
    Orphan), or status says our keys went into it (Merge, where the object is someone else's).
    An object that is merely there (a stranger's, a conflict) is not: the pass runs and says so."""
    if obj is None:
        return False
    meta = obj.get("metadata") or {}
    if (meta.get("labels") or {}).get(labels.SYNC_LABEL) == sync_name:
        return True
    kind, name = str(obj.get("kind", "")), str(meta.get("name", ""))
    return bool(status.get("dataHMAC")) and bool(drift.previously_synced(status, kind=kind, name=name))


async def held(deps: deps_mod.Deps, entry: state.SyncEntry, sync: sync_models.SecretSync) -> str | None:
    """``hold_reason`` for this pass, the target read from the watch cache (else one GET: a live
    pass may run before the cache is complete, and a missing target must not be taken for ours)."""
    policy = sync.spec.refresh_policy
    if policy == PERIODIC or entry.force_pending:
        return None
    kind, name, namespace = sync.spec.target.kind, sync.target_name, entry.key[0]
    obj = deps.targets.last_seen((kind, namespace, name))
    if obj is None:
        try:
            found = await objects.get(deps.kube, kind=kind, namespace=namespace, name=name)
        except kube_errors.KubeError as exc:
            raise outcomes.from_kube_error(exc, what=f"reading {kind} {name}") from exc
        obj = None if found is None else {"kind": kind, **found}
    present = owned_target(obj, sync_name=desired_mod.sync_label(sync, entry.origin), status=entry.status)
    if present:
        # As a write would: the target watch then knows whom to queue when it is deleted
        # (after a restart, no write of ours has told it).
        deps.targets.own((kind, namespace, name), entry.key)
    return hold_reason(
        policy, generation=entry.generation, status=entry.status, target_present=present, force=False
    )


def _synced(status: Mapping[str, Any]) -> bool:
    ready = conditions.find(status.get("conditions") or [], reasons.READY)
    return ready is not None and ready.get("status") == "True" and ready.get("reason") == reasons.SYNCED

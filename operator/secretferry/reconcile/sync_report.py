"""A SecretSync's status after a pass: one merge patch when it differs, an Event on a transition.

Why skip equal patches: at 10,000 SecretSyncs every status patch echoes back as a watch event,
and a resync that changed nothing must cost nothing. Why Events only on flips: a first success is
visible in status, and 10,000 "Synced" Events at start-up would double the writes.
"""

from __future__ import annotations

import logging
from typing import Any

from secretferry.kube import errors as kube_errors
from secretferry.kube import events as kube_events
from secretferry.kube import status as kube_status
from secretferry.models import base as models_base
from secretferry.models import secretsync as sync_models
from secretferry.reconcile import conditions, reasons, slim, state
from secretferry.reconcile import deps as deps_mod

log = logging.getLogger(__name__)
PLURAL = "secretsyncs"


def regarding(entry: state.SyncEntry) -> kube_events.ObjectRef:
    return {
        "apiVersion": models_base.API_VERSION,
        "kind": sync_models.SECRET_SYNC_KIND,
        "name": entry.key[1],
        "namespace": entry.key[0],
        "uid": entry.uid,
    }


async def report(
    deps: deps_mod.Deps,
    entry: state.SyncEntry,
    *,
    ok: bool,
    reason: str,
    message: str,
    synced_keys: list[str] | None = None,
    data_hmac: str | None = None,
    target: dict[str, str] | None = None,
    wrote: bool = False,
    mode: tuple[str, str] | None = None,
) -> None:
    """Patch status when it differs from what we know; post an Event on a Ready transition."""
    now = conditions.now_iso()
    before = entry.status
    new: dict[str, Any] = dict(before)
    new["conditions"] = conditions.set_condition(
        before.get("conditions") or [],
        type_=reasons.READY,
        status="True" if ok else "False",
        reason=reason,
        message=message,
        observed_generation=entry.generation,
        now=now,
    )
    new["observedGeneration"] = entry.generation
    if synced_keys is not None:
        new["syncedKeys"] = synced_keys
        new["syncedKeyCount"] = len(synced_keys)
    if data_hmac is not None:
        new["dataHMAC"] = data_hmac
    if target is not None:
        new["target"] = target
    if mode is not None:
        new["updateMode"], new["updateModeReason"] = mode
    # lastSyncTime moves when the target or the status really changed, not on every no-op pass:
    # a timestamp bump alone would be 10,000 status patches per resync.
    if ok and (wrote or not before.get("lastSyncTime") or new != before):
        new["lastSyncTime"] = now
    if new == before:
        return
    try:
        await kube_status.patch_status(
            deps.kube,
            group=models_base.GROUP,
            version=models_base.VERSION,
            plural=PLURAL,
            namespace=entry.key[0],
            name=entry.key[1],
            status=new,
        )
    except kube_errors.NotFound:
        return  # deleted meanwhile
    except kube_errors.KubeError as exc:
        log.warning("status of SecretSync %s/%s not written: %s", *entry.key, exc)
        return
    entry.status = slim.status(new)
    # Events on flips only: a first success is visible in status, and 10,000 "Synced" Events at
    # start-up would double the writes; a first failure is worth an Event.
    first = conditions.find(before.get("conditions") or [], reasons.READY) is None
    if (not first or not ok) and conditions.transitioned(
        before.get("conditions") or [], new["conditions"], reasons.READY
    ):
        await kube_events.post(
            deps.kube,
            regarding=regarding(entry),
            reason=reason,
            note=message[:1024],
            type="Normal" if ok else "Warning",
            action="Sync",
            reporting_instance=deps.instance,
        )

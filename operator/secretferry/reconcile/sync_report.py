"""A SecretSync's status after a pass: one merge patch when it differs, an Event and a log line
on a transition.

Why skip equal patches: at 10,000 SecretSyncs every status patch echoes back as a watch event,
and a resync that changed nothing must cost nothing. Why Events only on flips: a first success is
visible in status, and 10,000 "Synced" Events at start-up would double the writes. The log says
the same as the Event, at the same moments: one WARNING when a SecretSync goes not Ready (or
fails for another reason), one INFO when it is Ready again, nothing on a pass that fails as the
one before did. In a namespace being deleted neither is written (kube/events.py).

What is written is a ``SecretSyncStatus`` dumped by alias, so every name on the wire is the
model's (and the CRD's). It is built only when the cached status (``SyncEntry.status``, plain
JSON to stay small) does not already say everything this pass would write — the common resync is
decided on that dict in a few microseconds, without a model.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from secretferry import logfields, metrics
from secretferry.kube import errors as kube_errors
from secretferry.kube import events as kube_events
from secretferry.kube import status as kube_status
from secretferry.models import base as models_base
from secretferry.models import clustersecretsync
from secretferry.models import secretsync as sync_models
from secretferry.reconcile import conditions, problems, reasons, slim, state
from secretferry.reconcile import deps as deps_mod
from secretferry.reconcile import identities as ident_mod

log = logging.getLogger(__name__)
PLURAL = "secretsyncs"


def _wire(field: str) -> str:
    """A status field's name in the object, from the model: a misspelt field fails at import."""
    return sync_models.SecretSyncStatus.model_fields[field].alias or field


_CONDITIONS: Final = _wire("conditions")
_OBSERVED_GENERATION: Final = _wire("observed_generation")
_LAST_SYNC_TIME: Final = _wire("last_sync_time")
_SYNCED_KEYS: Final = _wire("synced_keys")
_SYNCED_KEY_COUNT: Final = _wire("synced_key_count")
_DATA_HMAC: Final = _wire("data_hmac")
_TARGET: Final = _wire("target")
_UPDATE_MODE: Final = _wire("update_mode")
_UPDATE_MODE_REASON: Final = _wire("update_mode_reason")


def regarding(entry: state.SyncEntry) -> kube_events.ObjectRef:
    """The object an Event about this entry is on: the SecretSync, or the ClusterSecretSync an
    expanded entry stands for (it has no object of its own)."""
    if entry.origin is not None:
        return {
            "apiVersion": models_base.API_VERSION,
            "kind": clustersecretsync.CLUSTER_SECRET_SYNC_KIND,
            "name": entry.origin.name,
            "uid": entry.origin.uid,
        }
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
    """Patch status when it differs from what we know; post an Event on a Ready transition.

    Arguments left None are not reported by this pass: the patch leaves them as they are.
    """
    before = entry.status
    ready: conditions.Status = "True" if ok else "False"
    if entry.origin is None:  # a ClusterSecretSync's namespaces: secretferry_clustersecretsync_namespaces
        metrics.set_sync_condition(entry.key, reasons.READY, ready)  # a no-op unless per_object_metrics
    # lastSyncTime moves when the target or the status really changed, not on every no-op pass:
    # a timestamp bump alone would be 10,000 status patches per resync.
    stamp = ok and (wrote or not before.get(_LAST_SYNC_TIME))
    if not stamp and _known(
        before,
        ready=ready,
        reason=reason,
        message=message,
        generation=entry.generation,
        synced_keys=synced_keys,
        data_hmac=data_hmac,
        target=target,
        mode=mode,
    ):
        return
    now = conditions.now()
    status = sync_models.SecretSyncStatus(
        conditions=conditions.set_condition(
            before.get(_CONDITIONS) or [],
            type_=reasons.READY,
            status=ready,
            reason=reason,
            message=message,
            observed_generation=entry.generation,
            now=now,
        ),
        observed_generation=entry.generation,
        last_sync_time=now if ok else None,
        synced_keys=synced_keys,
        synced_key_count=None if synced_keys is None else len(synced_keys),
        data_hmac=data_hmac,
        target=None if target is None else sync_models.TargetStatus.model_validate(target),
        update_mode=None if mode is None else mode[0],
        update_mode_reason=None if mode is None else mode[1],
    )
    patch = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    # _known may say "changed" where the model normalises (a message cut to the Condition limit):
    # what the patch would really change decides.
    if not stamp and all(before.get(k) == v for k, v in patch.items() if k != _LAST_SYNC_TIME):
        return
    if entry.origin is not None:
        # One namespace of a ClusterSecretSync: no object of its own; its status is kept in
        # memory (what drift and refresh read next time) and counted into the ClusterSecretSync's.
        entry.status = slim.status({**before, **patch})
        deps.on_cluster_report(entry)
        return
    try:
        await kube_status.patch_status(
            deps.kube,
            group=models_base.GROUP,
            version=models_base.VERSION,
            plural=PLURAL,
            namespace=entry.key[0],
            name=entry.key[1],
            status=patch,
        )
    except kube_errors.NotFound:
        metrics.forget_sync(entry.key)  # deleted meanwhile, maybe after the intake forgot it
        return
    except kube_errors.KubeError as exc:
        log.warning(
            "status of SecretSync %s/%s not written: %s",
            *entry.key,
            exc,
            extra=logfields.sync(entry.key, reason=reason),
        )
        return
    # What the object's status now is: a merge patch replaces the keys it names, keeps the rest.
    entry.status = slim.status({**before, **patch})
    # Events on flips only: a first success is visible in status, and 10,000 "Synced" Events at
    # start-up would double the writes; a first failure is worth an Event.
    before_conditions = before.get(_CONDITIONS) or []
    first = conditions.find(before_conditions, reasons.READY) is None
    if (not first or not ok) and conditions.transitioned(
        before_conditions, patch[_CONDITIONS], reasons.READY
    ):
        await _announce(deps, entry, ok=ok, reason=reason, message=message)


async def _announce(
    deps: deps_mod.Deps, entry: state.SyncEntry, *, ok: bool, reason: str, message: str
) -> None:
    """The Event and the log line of a Ready transition. The Event goes first: a refusal because
    the namespace is being deleted is what tells that the line is noise, even for the first
    SecretSync to flip there."""
    await kube_events.post(
        deps.kube,
        regarding=regarding(entry),
        reason=reason,
        note=message[: problems.NOTE_MAX_CHARS],
        type="Normal" if ok else "Warning",
        action="Sync",
        reporting_instance=deps.instance,
    )
    if kube_events.terminating(entry.key[0]):
        return
    fields = logfields.sync(entry.key, reason=reason, identity=_identity(entry))
    if ok:
        log.info(
            "SecretSync %s/%s is Ready again: %s",
            *entry.key,
            message[: problems.NOTE_MAX_CHARS],
            extra=fields,
        )
    else:
        log.warning(
            "SecretSync %s/%s is not Ready (%s): %s",
            *entry.key,
            reason,
            message[: problems.NOTE_MAX_CHARS],
            extra=fields,
        )


def _identity(entry: state.SyncEntry) -> str | None:
    """The identity the SecretSync names, as the registry spells it (while a pass runs)."""
    if entry.model is None:
        return None
    ref = entry.model.spec.identity_ref
    return ident_mod.key_str((ref.kind, entry.key[0] if ref.kind == ident_mod.MACHINE else "", ref.name))


def _known(
    before: Mapping[str, Any],
    *,
    ready: str,
    reason: str,
    message: str,
    generation: int | None,
    synced_keys: list[str] | None,
    data_hmac: str | None,
    target: dict[str, str] | None,
    mode: tuple[str, str] | None,
) -> bool:
    """Whether the cached status already holds everything this pass would write.

    The no-op pass, 10,000 times per resync: a no-op report costs ~2 µs with this check, ~20 µs
    when the model is built and dumped to find out (measured, 2 cores). It may answer False for a
    status that is in fact equal (the model then decides), never True when anything this pass
    reports differs. How the other conditions or a kept transition time are spelt is not looked
    at: a patch that only respells them would tell nobody anything.
    """
    cond = conditions.find(before.get(_CONDITIONS) or (), reasons.READY)
    return (
        cond is not None
        and cond.get("status") == ready
        and cond.get("reason") == reason
        and cond.get("message") == message
        and cond.get("observedGeneration") == generation
        and bool(cond.get("lastTransitionTime"))
        and before.get(_OBSERVED_GENERATION) == generation
        and (
            synced_keys is None
            or (before.get(_SYNCED_KEYS) == synced_keys and before.get(_SYNCED_KEY_COUNT) == len(synced_keys))
        )
        and (data_hmac is None or before.get(_DATA_HMAC) == data_hmac)
        and (target is None or before.get(_TARGET) == target)
        and (mode is None or (before.get(_UPDATE_MODE), before.get(_UPDATE_MODE_REASON)) == mode)
    )

"""A PushSecret's status and Events: conditions with reasons, pushed keys as HMACs, no value.

Patched only when something but a transition time differs (our own echo then starts nothing in
the intake, and 1,000 PushSecrets at rest cost no apiserver writes). Events only on a transition of
``Ready`` or ``Conflict`` (not for a first success), through the shared correlator that rate-limits
every Event of ours (kube/eventcache.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from secretferry.kube import errors as kube_errors
from secretferry.kube import events as kube_events
from secretferry.kube import status as kube_status
from secretferry.models import base as models_base
from secretferry.models import pushsecret as push_models
from secretferry.reconcile import conditions, problems, reasons
from secretferry.reconcile.push import plan as plan_mod
from secretferry.reconcile.push import pushing, trust

CONFLICT: Final = "Conflict"
READY: Final = "Ready"


def regarding(push: push_models.PushSecret) -> kube_events.ObjectRef:
    return {
        "apiVersion": models_base.API_VERSION,
        "kind": push_models.PUSH_SECRET_KIND,
        "name": push.metadata.name,
        "namespace": push.metadata.namespace,
        "uid": push.metadata.uid or "",
    }


async def report(
    deps: pushing.PushDeps,
    push: push_models.PushSecret,
    body: Mapping[str, Any],
    *,
    ready: problems.Problem | None,
    records: Mapping[str, plan_mod.Record] | None,
    conflicts: list[str],
    replaced: bool,
    wrote: bool,
) -> None:
    """Patch status when it differs; an Event on a Ready or Conflict transition (rate-limited by
    the Event correlator, like every Event of ours)."""
    before: Mapping[str, Any] = body.get("status") or {}
    old_conditions = list(before.get("conditions") or [])
    now = conditions.now()
    generation = push.metadata.generation
    if ready is None:
        message = f"{len(records or {})} keys at {trust.describe(push.spec.destination)}"
        new = conditions.set_condition(
            old_conditions,
            type_=READY,
            status="True",
            reason=reasons.PUSHED,
            message=message,
            observed_generation=generation,
            now=now,
        )
    else:
        new = conditions.set_condition(
            old_conditions,
            type_=READY,
            status="False",
            reason=ready.reason,
            message=ready.message,
            observed_generation=generation,
            now=now,
        )
    if conflicts:
        verb = (
            "overwritten (updatePolicy Replace)"
            if replaced
            else "left as they are (updatePolicy IfNotExists)"
        )
        new = conditions.set_condition(
            [c.model_dump(by_alias=True, mode="json") for c in new],
            type_=CONFLICT,
            status="True",
            reason=reasons.PUSH_CONFLICT_REPLACED if replaced else reasons.PUSH_CONFLICT,
            message=f"changed at the service since our last push, {verb}: {', '.join(conflicts)}",
            observed_generation=generation,
            now=now,
        )
    else:
        new = conditions.set_condition(
            [c.model_dump(by_alias=True, mode="json") for c in new],
            type_=CONFLICT,
            status="False",
            reason=reasons.NO_CONFLICT,
            message="",
            observed_generation=generation,
            now=now,
        )
    status: dict[str, Any] = {
        "conditions": [c.model_dump(by_alias=True, mode="json", exclude_none=True) for c in new],
        "observedGeneration": generation,
        "destination": trust.describe(push.spec.destination),
        "conflicts": conflicts or None,
    }
    if records is not None:
        status["pushedKeys"] = [
            {"key": k, "sourceHMAC": r.source, "remoteHMAC": r.remote} for k, r in sorted(records.items())
        ]
        status["pushedKeyCount"] = len(records)
    if wrote:
        status["lastPushTime"] = now.strftime(models_base.TIME_FORMAT)
    if not _differs(before, status):
        return
    namespace, name = push.metadata.namespace, push.metadata.name
    try:
        await kube_status.patch_status(
            deps.kube,
            group=models_base.GROUP,
            version=models_base.VERSION,
            plural=push_models.PLURAL,
            namespace=namespace,
            name=name,
            status=status,
        )
    except kube_errors.NotFound:
        return
    for type_ in (READY, CONFLICT):
        if conditions.transitioned(old_conditions, status["conditions"], type_):
            cond = conditions.find(status["conditions"], type_) or {}
            bad = (type_ == READY and cond.get("status") != "True") or (
                type_ == CONFLICT and cond.get("status") == "True"
            )
            if not bad and not conditions.find(old_conditions, type_):
                # A first success (or a first NoConflict) is in status only, as for SecretSyncs:
                # 1,000 new PushSecrets do not cost 1,000 Events.
                continue
            await kube_events.post(
                deps.kube,
                regarding=regarding(push),
                reason=str(cond.get("reason", "")),
                note=str(cond.get("message", ""))[: problems.NOTE_MAX_CHARS],
                type="Warning" if bad else "Normal",
                action="Push",
                reporting_instance=deps.instance,
            )


def _differs(before: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    for key, value in status.items():
        if key == "conditions":
            old = {
                c.get("type"): {k: v for k, v in c.items() if k != "lastTransitionTime"}
                for c in before.get(key) or []
            }
            new = {c.get("type"): {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in value}
            if old != new:
                return True
        elif key == "lastPushTime":
            continue  # moves only with a write, which changes pushedKeys or conditions too
        elif before.get(key) != value:
            return True
    return "lastPushTime" in status and "lastPushTime" not in before


def _comparable(conds: list[Mapping[str, Any]]) -> dict[Any, dict[str, Any]]:
    """Conditions by type without their transition time (kept when nothing else changed)."""
    return {c.get("type"): {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conds}

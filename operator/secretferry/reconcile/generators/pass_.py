"""One generator, one pass: read its Secret → decide (decide.py) → write → status, Event, metric.

Writes that cannot overwrite what is not ours: the first value is a create (refused if a Secret
of that name appeared since the read: the next pass sees whose it is); a regeneration is a
server-side apply carrying the resourceVersion read, so the Secret must still be the one found
owned by this generator. Status and Events name the Secret and the key, never the value; the
value exists in this process only between generating it and the request that stores it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

import pydantic

from secretferry import logfields, metrics
from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import events as kube_events
from secretferry.kube import objects as kube_objects
from secretferry.kube import status as kube_status
from secretferry.models import base, generators
from secretferry.models import errors as model_errors
from secretferry.reconcile import conditions, outcomes, problems, reasons
from secretferry.reconcile.generators import decide, store, values

log = logging.getLogger(__name__)
_RETRY_SECONDS: Final = 2.0  # a lost create race or a transient apiserver error: look again soon


async def reconcile(
    kube: kube_client.Kube,
    kind: str,
    body: Mapping[str, Any],
    *,
    instance: str,
    on_written: Callable[[str, str, str, str], None],
    now: Callable[[], datetime] = conditions.now,
) -> float | None:
    """Bring one generator's Secret in line; returns a retry delay in seconds, or None.

    ``on_written(kind, namespace, name, resource_version)``: called after a new value is stored
    (consumers re-read; the Secret watch knows its echo by the resourceVersion)."""
    meta = body.get("metadata") or {}
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    status: Mapping[str, Any] = body.get("status") or {}
    report = functools.partial(_report, kube, kind, body, status, now=now, instance=instance)
    try:
        generator = generators.parse(kind, body)
    except pydantic.ValidationError as exc:
        message = model_errors.describe_validation_error(exc)
        await report(ok=False, reason=reasons.INVALID_SPEC, message=message)
        return None
    try:
        secret = await kube_objects.get(kube, kind="Secret", namespace=namespace, name=generator.secret_name)
    except kube_errors.KubeError as exc:
        problem = outcomes.from_kube_error(exc, what=f"reading Secret {generator.secret_name}")
        await report(ok=False, reason=problem.reason, message=problem.message)
        return _RETRY_SECONDS if problem.retriable else None
    found = (
        None
        if secret is None
        else {"metadata": secret.get("metadata") or {}, "keys": sorted(secret.get("data") or {})}
    )
    decision = decide.plan(generator, found)
    extra: dict[str, Any] = {"secretName": generator.secret_name}
    if decision.action == "refuse":
        await report(ok=False, reason=decision.reason, message=decision.message)
        return None
    if decision.action == "keep":
        assert secret is not None
        extra.update(_from_annotations(secret))
        await report(ok=True, reason=decision.reason, message=decision.message, extra=extra)
        return None
    generated_at = now()
    count = int(status.get("generations") or 0) + 1
    if secret is not None:
        count = max(
            count,
            _int((secret.get("metadata") or {}).get("annotations", {}).get(store.GENERATIONS_ANNOTATION)) + 1,
        )
    manifest = store.manifest(
        generator,
        values.generate(generator),
        generated_at=generated_at,
        generations=count,
        resource_version=None if secret is None else (secret.get("metadata") or {}).get("resourceVersion"),
    )
    try:
        if secret is None:
            stored = await kube_objects.create(kube, manifest, field_manager=store.FIELD_MANAGER)
        else:
            stored = await kube_objects.apply(kube, manifest, field_manager=store.FIELD_MANAGER, force=True)
    except kube_errors.AlreadyExists:
        return _RETRY_SECONDS  # created meanwhile, by us or not: the next pass decides whose it is
    except kube_errors.KubeError as exc:
        problem = outcomes.from_kube_error(exc, what=f"writing Secret {generator.secret_name}")
        await report(ok=False, reason=problem.reason, message=problem.message)
        return _RETRY_SECONDS if problem.retriable or isinstance(exc, kube_errors.Conflict) else None
    version = str((stored.get("metadata") or {}).get("resourceVersion") or "")
    del manifest, stored  # the value goes no further than this request
    metrics.GENERATIONS.labels(kind=kind, cause=decision.cause).inc()
    on_written(kind, namespace, name, version)
    extra.update(
        {
            "generatedAt": generated_at.strftime(base.TIME_FORMAT),
            "generations": count,
            "regenerateToken": generator.regenerate_token,
        }
    )
    await report(ok=True, reason=decision.reason, message=decision.message, extra=extra)
    action = "Generated" if decision.cause == "created" else "Regenerated"
    await kube_events.post(
        kube,
        regarding=_regarding(kind, meta),
        reason=action,
        note=decision.message[: problems.NOTE_MAX_CHARS],
        type="Normal",
        action="Generate",
        reporting_instance=instance,
    )
    log.info(
        "%s %s/%s: %s %s into Secret %s (%s)",
        kind,
        namespace,
        name,
        action.lower(),
        generator.key,
        generator.secret_name,
        decision.cause,
        extra=logfields.about(kind, namespace, name, reason=decision.reason),
    )
    return None


def _int(text: Any) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return 0


def _from_annotations(secret: Mapping[str, Any]) -> dict[str, Any]:
    """What the kept Secret says about its value: status mirrors it (after a restart too)."""
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    out: dict[str, Any] = {"generatedAt": annotations.get(store.GENERATED_AT_ANNOTATION)}
    if annotations.get(store.GENERATIONS_ANNOTATION):
        out["generations"] = _int(annotations.get(store.GENERATIONS_ANNOTATION))
    out["regenerateToken"] = annotations.get(store.TOKEN_ANNOTATION)
    return out


def _regarding(kind: str, meta: Mapping[str, Any]) -> kube_events.ObjectRef:
    return {
        "apiVersion": base.API_VERSION,
        "kind": kind,
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "uid": meta.get("uid", ""),
    }


async def _report(
    kube: kube_client.Kube,
    kind: str,
    body: Mapping[str, Any],
    before: Mapping[str, Any],
    *,
    ok: bool,
    reason: str,
    message: str,
    now: Callable[[], datetime],
    instance: str,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Patch status when it differs; a Warning Event when Ready turns False (Events on generate
    and regenerate are posted by the pass itself)."""
    meta = body.get("metadata") or {}
    generation = meta.get("generation")
    ready: conditions.Status = "True" if ok else "False"
    new_conditions = conditions.set_condition(
        before.get("conditions") or [],
        type_=reasons.READY,
        status=ready,
        reason=reason,
        message=message,
        observed_generation=generation,
        now=now(),
    )
    status = generators.GeneratorStatus.model_validate(
        {
            "conditions": [c.model_dump(mode="json", by_alias=True) for c in new_conditions],
            "observedGeneration": generation,
            **{k: v for k, v in (extra or {}).items() if v is not None},
        }
    )
    patch = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    old = conditions.find(before.get("conditions") or [], reasons.READY)
    new = conditions.find(patch["conditions"], reasons.READY)
    same_condition = (
        old is not None
        and new is not None
        and all(old.get(k) == new.get(k) for k in ("status", "reason", "message", "observedGeneration"))
    )
    if same_condition and all(before.get(k) == v for k, v in patch.items() if k != "conditions"):
        return
    if same_condition:
        patch["conditions"] = list(before.get("conditions") or [])
    try:
        await kube_status.patch_status(
            kube,
            group=base.GROUP,
            version=base.VERSION,
            plural=generators.PLURALS[kind],
            namespace=meta.get("namespace"),
            name=meta.get("name", ""),
            status=patch,
        )
    except kube_errors.KubeError as exc:
        log.warning("status of %s %s/%s not written: %s", kind, meta.get("namespace"), meta.get("name"), exc)
        return
    if not ok and conditions.transitioned(before.get("conditions") or [], patch["conditions"], reasons.READY):
        await kube_events.post(
            kube,
            regarding=_regarding(kind, meta),
            reason=reason,
            note=message[: problems.NOTE_MAX_CHARS],
            type="Warning",
            action="Generate",
            reporting_instance=instance,
        )

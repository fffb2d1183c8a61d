"""The writes of a pass: create, apply, replace or trim the target Secret/ConfigMap — or refuse.

Why here and not in kube/: kube/ writes what it is told; this module decides against the watch
cache (state.TargetCache) whether a write is due at all (drift.py), and refuses a target that is
protected or not ours (guards.py). Every refusal is a ``problems.Problem`` the pass reports as status.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from secretferry import logfields, metrics
from secretferry.kube import errors as kube_errors
from secretferry.kube import objects
from secretferry.models import labels, reserved
from secretferry.models import secretsync as sync_models
from secretferry.reconcile import deps as deps_mod
from secretferry.reconcile import desired as desired_mod
from secretferry.reconcile import drift, guards, outcomes, ownership, problems, reasons, state

log = logging.getLogger(__name__)


async def write(
    deps: deps_mod.Deps,
    entry: state.SyncEntry,
    sync: sync_models.SecretSync,
    want: desired_mod.DesiredObject,
) -> tuple[str | None, list[str]]:
    """Write the target when it differs; returns (why it was written, a ``drift`` reason, or None
    when it was not; keys now synced)."""
    tkey: state.TargetKey = (want.kind, want.namespace, want.name)
    protected = guards.Protected(
        namespace=deps.settings.namespace, hmac_key_secret=deps.settings.hmac_key_secret
    )
    refused = guards.protected_name(want, protected) or guards.reserved_marks(
        want, sync.spec.target, rules=reserved.parse_rules(deps.settings.forbidden_target_keys)
    )
    if refused is not None:
        raise refused
    actual = deps.targets.last_seen(tkey)
    if actual is None and want.creation_policy != "Merge":
        created = await _create(deps, tkey, want, entry=entry, keys=sorted(want.string_data))
        if created is not None:
            deps.targets.own(tkey, entry.key)
            return drift.MISSING, sorted(want.string_data)
    if actual is None:
        try:
            actual = await objects.get(deps.kube, kind=want.kind, namespace=want.namespace, name=want.name)
        except kube_errors.KubeError as exc:
            raise outcomes.from_kube_error(exc, what=f"reading {want.kind} {want.name}") from exc
    previously = drift.previously_synced(entry.status, kind=want.kind, name=want.name)
    if entry.origin is not None and "syncedKeys" not in entry.status:
        previously = _noted_keys(actual)  # a ClusterSecretSync's namespace after a restart
    _check_target(want, actual, previously, protected)
    retained = drift.retained_keys(want, actual, previously)
    keys = sorted(set(want.string_data) | retained)
    why = drift.needs_write(want, actual, previously_synced=previously)
    deps.targets.own(tkey, entry.key)
    if why is None:
        return None, keys
    manifest = _manifest(entry, want, keys)
    if retained and actual is not None:
        for field in ("data", "binaryData"):  # a ConfigMap keeps a retained bytes value in binaryData
            kept = {k: v for k, v in (actual.get(field) or {}).items() if k in retained}
            if kept:
                manifest.setdefault(field, {}).update(kept)
    remove = drift.keys_to_remove(want, actual, previously)
    what = f"{want.kind} {want.namespace}/{want.name}"
    try:
        if why == drift.TYPE_CHANGED:
            await _replace(deps, want, previously, protected, manifest=manifest)
        if not remove:
            deps.targets.expect(tkey, manifest)
        result = await ownership.apply(deps.kube, want, manifest, previously=previously)
        if remove:
            result = await objects.remove_keys(
                deps.kube,
                kind=want.kind,
                namespace=want.namespace,
                name=want.name,
                keys=sorted(remove),
                field_manager=ownership.manager(want),
            )
    except kube_errors.KubeError as exc:
        deps.targets.write_failed(tkey)
        raise outcomes.from_kube_error(exc, what=f"writing {what}") from exc
    deps.targets.written(tkey, result, cache=want.creation_policy != "Merge")
    log.info("wrote %s (%s): keys %s", what, why, ", ".join(keys), extra=_fields(entry, want))
    metrics.WRITES.labels(reason=why).inc()
    return why, keys


def _check_target(
    want: desired_mod.DesiredObject,
    actual: dict[str, Any] | None,
    previously: list[str],
    protected: guards.Protected,
) -> None:
    problem = guards.target_problem(want, actual, previously_synced=previously, protected=protected)
    if problem is not None:
        raise problem


async def _replace(
    deps: deps_mod.Deps,
    want: desired_mod.DesiredObject,
    previously: list[str],
    protected: guards.Protected,
    *,
    manifest: dict[str, Any],
) -> None:
    """Delete a Secret whose type must change, judged on a fresh read (the cache may be behind,
    and someone may have added keys since) and only that incarnation of it (uid precondition).

    Only once the apiserver has said it would create ``manifest`` (a dry run): a type change is
    a delete and a create, and a create refused after the delete would lose the Secret for good.
    desired.py already checks what the apiserver checks for each type; the dry run also covers
    what it cannot see (admission policies, webhooks, a quota) and rules it does not know yet."""
    fresh = await objects.get(deps.kube, kind=want.kind, namespace=want.namespace, name=want.name)
    if fresh is None:
        return
    _check_target(want, fresh, previously, protected)
    if drift.needs_write(want, fresh, previously_synced=previously) != drift.TYPE_CHANGED:
        return
    try:
        await objects.validate_create(deps.kube, manifest)
    except kube_errors.KubeError as exc:
        raise _replacement_refused(want, fresh, exc) from exc
    uid = (fresh.get("metadata") or {}).get("uid")
    await objects.delete(deps.kube, kind=want.kind, namespace=want.namespace, name=want.name, uid=uid)


def _replacement_refused(
    want: desired_mod.DesiredObject, fresh: dict[str, Any], exc: kube_errors.KubeError
) -> problems.Problem:
    """Why the type was not changed. An ``Invalid`` is told by its fields alone: its text may
    quote the value (Go's JSON errors name the offending character)."""
    kept = (
        f"{want.kind} {want.namespace}/{want.name} was kept as it is (type {fresh.get('type') or 'Opaque'},"
        f" its data untouched)"
    )
    if isinstance(exc, kube_errors.Invalid):
        fields = ", ".join(exc.fields) or "no field named"
        return problems.Problem(
            reasons.KUBERNETES_ERROR,
            f"changing the type to {want.type} means deleting and creating the {want.kind}, and the"
            f" apiserver would refuse the new one ({fields}); {kept}",
        )
    problem = outcomes.from_kube_error(exc, what=f"checking a {want.type} replacement (dry run)")
    return problems.Problem(problem.reason, f"{problem.message}; {kept}", retriable=problem.retriable)


def _manifest(entry: state.SyncEntry, want: desired_mod.DesiredObject, keys: list[str]) -> dict[str, Any]:
    """``want``'s body; for a ClusterSecretSync's namespace also the names of the keys it holds
    (``SYNCED_KEYS_ANNOTATION``): its per-namespace status lives in memory only."""
    manifest = want.manifest()
    if entry.origin is not None:
        manifest["metadata"].setdefault("annotations", {})[labels.SYNCED_KEYS_ANNOTATION] = ",".join(keys)
    return manifest


def _noted_keys(actual: Mapping[str, Any] | None) -> list[str]:
    """The key names a ClusterSecretSync noted on its target (none on a stranger's object: then
    nothing is taken for ours, and the label check refuses it anyway)."""
    annotations = ((actual or {}).get("metadata") or {}).get("annotations") or {}
    noted = str(annotations.get(labels.SYNCED_KEYS_ANNOTATION) or "")
    return [key for key in noted.split(",") if key]


async def _create(
    deps: deps_mod.Deps,
    tkey: state.TargetKey,
    want: desired_mod.DesiredObject,
    *,
    entry: state.SyncEntry,
    keys: list[str],
) -> dict[str, Any] | None:
    """Create a target the watch cache does not know; None when the name is taken (then the
    caller reads it and checks who owns it, exactly as for a known one)."""
    manifest = _manifest(entry, want, keys)
    deps.targets.expect(tkey, manifest)
    try:
        result = await objects.create(deps.kube, manifest, field_manager=ownership.manager(want))
    except kube_errors.AlreadyExists:
        deps.targets.write_failed(tkey)
        return None
    except kube_errors.KubeError as exc:
        deps.targets.write_failed(tkey)
        raise outcomes.from_kube_error(
            exc, what=f"creating {want.kind} {want.namespace}/{want.name}"
        ) from exc
    deps.targets.written(tkey, result, cache=True)
    log.info(
        "created %s %s/%s: keys %s",
        want.kind,
        want.namespace,
        want.name,
        ", ".join(sorted(want.string_data)),
        extra=_fields(entry, want),
    )
    metrics.WRITES.labels(reason=drift.MISSING).inc()
    return result


def _fields(entry: state.SyncEntry, want: desired_mod.DesiredObject) -> dict[str, str]:
    """A write's log fields: the SecretSync it is for, and its target (key names only, no values)."""
    return logfields.sync(entry.key, target=f"{want.kind}/{want.name}")

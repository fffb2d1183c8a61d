"""One SecretSync, one pass: resolve identity → fetch scopes → build → compare → write → status.

Why this order and these guards: the Secret is written only from a complete, successful fetch
and a successful render, so a failing or nonsensical service never empties or deletes a Secret
(failures only change status). A fetch that succeeds but looks wrong (a source listing nothing,
a listing cut at the depth limit) and a target that is not ours to write stop the pass too
(guards.py). Every write and every status patch is skipped when it would not change anything,
because at 10,000 objects each one echoes back as a watch event.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from secretferry import metrics
from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import events as kube_events
from secretferry.kube import objects
from secretferry.kube import status as kube_status
from secretferry.models import base as models_base
from secretferry.models import secretsync as sync_models
from secretferry.reconcile import (
    conditions,
    drift,
    guards,
    outcomes,
    reasons,
    renderpool,
    rollouts,
    slim,
    state,
)
from secretferry.reconcile import (
    desired as desired_mod,
)
from secretferry.reconcile import identities as ident_mod
from secretferry.service import auth
from secretferry.service import errors as service_errors
from secretferry.service import fetcher as fetcher_mod
from secretferry.service import models as service_models
from secretferry.service import scopes as scope_mod

log = logging.getLogger(__name__)
PLURAL = "secretsyncs"


@dataclass
class Deps:
    kube: kube_client.Kube
    settings: settings_mod.Settings
    hmac_key: bytes
    identities: ident_mod.IdentityRegistry
    fetcher: fetcher_mod.ScopeFetcher
    slugs: scope_mod.SlugCache
    scopes: state.ScopeIndex
    targets: state.TargetCache
    rollouts: rollouts.RolloutManager
    on_scopes_changed: Callable[[set[scope_mod.Scope], set[scope_mod.Scope]], None]
    on_identity: Callable[[ident_mod.IdentityEntry, tuple[str, str] | None], Awaitable[None]]
    """Told after each use of an identity: None when its login worked, else (reason, message)."""
    instance: str
    clock: Callable[[], float] = time.monotonic
    step_aside: Callable[[], Awaitable[None]] = lambda: asyncio.sleep(0)
    """Wait until the live work around this reconcile is done (``Scheduler.step_aside``)."""


def regarding(entry: state.SyncEntry) -> kube_events.ObjectRef:
    return {
        "apiVersion": models_base.API_VERSION,
        "kind": sync_models.SECRET_SYNC_KIND,
        "name": entry.key[1],
        "namespace": entry.key[0],
        "uid": entry.uid,
    }


async def reconcile(deps: Deps, entry: state.SyncEntry) -> float | None:
    """Bring one SecretSync's target in line; returns a retry delay in seconds, or None."""
    started = time.perf_counter()
    result = "error"
    try:
        delay, result = await _reconcile(deps, entry)
        return delay
    finally:
        metrics.SYNC_DURATION.observe(time.perf_counter() - started)
        metrics.SYNCS.labels(result=result).inc()


async def _reconcile(deps: Deps, entry: state.SyncEntry) -> tuple[float | None, str]:
    sync = entry.model
    if sync is None:
        await report(
            deps, entry, ok=False, reason=reasons.INVALID_SPEC, message=entry.invalid or "invalid spec"
        )
        return None, "invalid"
    try:
        identity = await deps.identities.resolve(sync)
        session = await deps.identities.session(identity)
        scopes = await _scopes(deps, sync, identity, session)
    except ident_mod.IdentityProblem as exc:
        _release_scopes(deps, entry)
        await report(deps, entry, ok=False, reason=exc.reason, message=exc.message)
        return _backoff(deps, entry), "identity"
    except service_errors.ServiceError as exc:
        failure = outcomes.from_service_error(exc, scope_text="resolving the project slug")
        await report(deps, entry, ok=False, reason=failure.reason, message=failure.message)
        return _backoff(deps, entry, failure.retry_after), "service"

    added, removed = deps.scopes.bind(
        entry.key,
        scopes,
        instant=sync.spec.instant_updates,
        refresh_seconds=sync.spec.refresh_interval_seconds,
        now=deps.clock(),
    )
    entry.scopes = scopes
    if added or removed:
        deps.on_scopes_changed(added, removed)

    force, entry.force_pending = entry.force_pending, False
    fetched: list[desired_mod.FetchedSource] = []
    for scope in scopes:
        scope_state = deps.scopes.get(scope)
        fresh_after = scope_state.fresh_after if scope_state else None
        try:
            got = await deps.fetcher.fetch(scope, session, not_older_than=fresh_after, force=force)
        except service_errors.ServiceError as exc:
            failure = outcomes.from_service_error(exc, scope_text=scope_text(scope))
            await _identity_after_error(deps, identity, exc)
            await report(deps, entry, ok=False, reason=failure.reason, message=failure.message)
            entry.force_pending = entry.force_pending or force
            retry_at = deps.fetcher.next_attempt_at(scope)
            delay = max(0.05, retry_at - deps.clock()) if retry_at is not None else None
            return delay if delay is not None else _backoff(deps, entry, failure.retry_after), "service"
        except ident_mod.IdentityProblem as exc:  # minting the ServiceAccount token at login failed
            await deps.on_identity(identity, (exc.reason, exc.message))
            await report(deps, entry, ok=False, reason=exc.reason, message=exc.message)
            return _backoff(deps, entry), "identity"
        fetched.append(to_fetched(got.secret_list, scope))
    await deps.on_identity(identity, None)

    source_problem = guards.source_problem(sync, fetched)
    if source_problem is not None:
        # Not retried on a timer of its own: the scope's resync and its events bring the next look.
        await report(deps, entry, ok=False, reason=source_problem[0], message=source_problem[1])
        return None, "source"

    try:
        want = await desired_mod.render_and_build(
            sync, fetched, hmac_key=deps.hmac_key, renderer=renderpool.shared(deps.settings)
        )
    except desired_mod.RenderError as exc:
        await report(deps, entry, ok=False, reason=exc.reason, message=exc.message)
        return None, "render"

    try:
        written, keys = await _write(deps, entry, sync, want)
    except _Refused as exc:
        await report(deps, entry, ok=False, reason=exc.reason, message=exc.message)
        return (_backoff(deps, entry) if exc.retriable else None), "target"

    previous_hmac = entry.status.get("dataHMAC")
    if written and previous_hmac and previous_hmac != want.data_hmac and want.kind == "Secret":
        deps.rollouts.data_changed(sync, want.name, want.data_hmac, regarding(entry))
    entry.failures = 0
    if written and _routine(entry):
        # A data update of a SecretSync that is Synced already: its status patch (which flips
        # nothing) waits until the other live work — typically the Secret writes of the other
        # SecretSyncs one event nudged — is done. See scheduler.py.
        await deps.step_aside()
    mode = _update_mode(deps, sync, scopes)
    await report(
        deps,
        entry,
        ok=True,
        reason=reasons.SYNCED,
        message=f"{want.kind} {want.name} holds {len(keys)} keys from {len(scopes)} source(s)",
        synced_keys=keys,
        data_hmac=want.data_hmac,
        target={"kind": want.kind, "name": want.name},
        wrote=written,
        mode=mode,
    )
    return None, "written" if written else "unchanged"


def _routine(entry: state.SyncEntry) -> bool:
    """Whether the SecretSync was Ready/Synced already, so a data update flips no condition."""
    ready = conditions.find(entry.status.get("conditions") or [], reasons.READY)
    return ready is not None and ready.get("status") == "True" and ready.get("reason") == reasons.SYNCED


def _release_scopes(deps: Deps, entry: state.SyncEntry) -> None:
    """An identity that cannot be used reads nothing: its scopes (and streams) are let go."""
    removed = deps.scopes.unbind(entry.key)
    entry.scopes = ()
    if removed:
        deps.on_scopes_changed(set(), removed)


def scope_text(scope: scope_mod.Scope) -> str:
    return f"project {scope.project_id} environment {scope.environment} path {scope.path}"


def to_fetched(secret_list: service_models.SecretList, scope: scope_mod.Scope) -> desired_mod.FetchedSource:
    direct = {s.secret_key: s.secret_value for s in secret_list.secrets}
    imported = [{s.secret_key: s.secret_value for s in group.secrets} for group in secret_list.imports]
    depth = 0
    if scope.recursive:
        depth = max(
            (guards.relative_depth(scope.path, s.secret_path) for s in secret_list.secrets), default=0
        )
    return desired_mod.FetchedSource(direct=direct, imported=imported, depth=depth)


async def _scopes(
    deps: Deps,
    sync: sync_models.SecretSync,
    identity: ident_mod.IdentityEntry,
    session: auth.AuthSession,
) -> tuple[scope_mod.Scope, ...]:
    identity_key = ident_mod.key_str(identity.key)
    result: list[scope_mod.Scope] = []
    for source in sync.spec.sources:
        project_id = source.project_id
        if project_id is None:
            assert source.project_slug is not None
            project_id = await deps.slugs.resolve(identity_key, source.project_slug, session)
        result.append(
            scope_mod.Scope(
                identity_key=identity_key,
                project_id=project_id,
                environment=source.environment,
                path=source.path,
                recursive=source.recursive,
                include_imports=source.include_imports,
                expand_references=source.expand_references,
                tag_slugs=tuple(sorted(source.tag_slugs)),
                metadata_filter=tuple(sorted((m.key, m.value) for m in source.metadata_filter)),
            )
        )
    return tuple(result)


def _update_mode(
    deps: Deps, sync: sync_models.SecretSync, scopes: Sequence[scope_mod.Scope]
) -> tuple[str, str] | None:
    """Streaming only when every scope is on a healthy stream; None while that is undecided."""
    if not sync.spec.instant_updates:
        return reasons.POLLING, f"{reasons.INSTANT_UPDATES_DISABLED}: spec.instantUpdates is false"
    states = [deps.scopes.get(scope) for scope in scopes]
    for st in states:
        if st is not None and st.mode == reasons.POLLING:
            return reasons.POLLING, st.mode_reason
    if any(st is None or not st.mode for st in states):
        return None
    return reasons.STREAMING, "event stream connected"


class _Refused(Exception):
    def __init__(self, reason: str, message: str, *, retriable: bool) -> None:
        super().__init__(message)
        self.reason, self.message, self.retriable = reason, message, retriable


async def _write(
    deps: Deps, entry: state.SyncEntry, sync: sync_models.SecretSync, want: desired_mod.DesiredObject
) -> tuple[bool, list[str]]:
    """Write the target when it differs; returns (written, keys now synced)."""
    tkey: state.TargetKey = (want.kind, want.namespace, want.name)
    protected = guards.Protected(
        namespace=deps.settings.namespace, hmac_key_secret=deps.settings.hmac_key_secret
    )
    refused = guards.protected_name(want, protected)
    if refused is not None:
        raise _Refused(*refused, retriable=False)
    actual = deps.targets.last_seen(tkey)
    if actual is None and want.creation_policy != "Merge":
        created = await _create(deps, tkey, want)
        if created is not None:
            deps.targets.own(tkey, entry.key)
            return True, sorted(want.string_data)
    if actual is None:
        try:
            actual = await objects.get(deps.kube, kind=want.kind, namespace=want.namespace, name=want.name)
        except kube_errors.KubeError as exc:
            failure = outcomes.from_kube_error(exc, what=f"reading {want.kind} {want.name}")
            raise _Refused(failure.reason, failure.message, retriable=failure.retriable) from exc
    previously = drift.previously_synced(entry.status, kind=want.kind, name=want.name)
    _check_target(want, actual, previously, protected)
    retained = drift.retained_keys(want, actual, previously)
    keys = sorted(set(want.string_data) | retained)
    why = drift.needs_write(want, actual, previously_synced=previously)
    deps.targets.own(tkey, entry.key)
    if why is None:
        return False, keys
    manifest = want.manifest()
    if retained and actual is not None:
        manifest.setdefault("data", {}).update({k: actual["data"][k] for k in retained})
    remove = drift.keys_to_remove(want, actual, previously)
    what = f"{want.kind} {want.namespace}/{want.name}"
    try:
        if why == drift.TYPE_CHANGED:
            await _replace(deps, want, previously, protected)
        if not remove:
            deps.targets.expect(tkey, manifest["data"])
        result = await objects.apply(deps.kube, manifest, force=want.creation_policy != "Merge")
        if remove:
            result = await objects.remove_keys(
                deps.kube, kind=want.kind, namespace=want.namespace, name=want.name, keys=sorted(remove)
            )
    except kube_errors.KubeError as exc:
        deps.targets.write_failed(tkey)
        failure = outcomes.from_kube_error(exc, what=f"writing {what}")
        raise _Refused(failure.reason, failure.message, retriable=failure.retriable) from exc
    deps.targets.written(tkey, result, cache=want.creation_policy != "Merge")
    log.info("wrote %s (%s): keys %s", what, why, ", ".join(keys))
    metrics.WRITES.labels(reason=why).inc()
    return True, keys


# A Merge target appears, or opts in, without an event we watch: look again with backoff.
_RETRIED_TARGET_PROBLEMS = frozenset({reasons.TARGET_NOT_FOUND, reasons.TARGET_NOT_OPTED_IN})


def _check_target(
    want: desired_mod.DesiredObject,
    actual: dict[str, Any] | None,
    previously: list[str],
    protected: guards.Protected,
) -> None:
    problem = guards.target_problem(want, actual, previously_synced=previously, protected=protected)
    if problem is not None:
        raise _Refused(*problem, retriable=problem[0] in _RETRIED_TARGET_PROBLEMS)


async def _replace(
    deps: Deps, want: desired_mod.DesiredObject, previously: list[str], protected: guards.Protected
) -> None:
    """Delete a Secret whose type must change, judged on a fresh read (the cache may be behind,
    and someone may have added keys since) and only that incarnation of it (uid precondition)."""
    fresh = await objects.get(deps.kube, kind=want.kind, namespace=want.namespace, name=want.name)
    if fresh is None:
        return
    _check_target(want, fresh, previously, protected)
    if drift.needs_write(want, fresh, previously_synced=previously) != drift.TYPE_CHANGED:
        return
    uid = (fresh.get("metadata") or {}).get("uid")
    await objects.delete(deps.kube, kind=want.kind, namespace=want.namespace, name=want.name, uid=uid)


async def _create(
    deps: Deps, tkey: state.TargetKey, want: desired_mod.DesiredObject
) -> dict[str, Any] | None:
    """Create a target the watch cache does not know; None when the name is taken (then the
    caller reads it and checks who owns it, exactly as for a known one)."""
    manifest = want.manifest()
    deps.targets.expect(tkey, manifest["data"])
    try:
        result = await objects.create(deps.kube, manifest)
    except kube_errors.AlreadyExists:
        deps.targets.write_failed(tkey)
        return None
    except kube_errors.KubeError as exc:
        deps.targets.write_failed(tkey)
        failure = outcomes.from_kube_error(exc, what=f"creating {want.kind} {want.namespace}/{want.name}")
        raise _Refused(failure.reason, failure.message, retriable=failure.retriable) from exc
    deps.targets.written(tkey, result, cache=True)
    log.info(
        "created %s %s/%s: keys %s", want.kind, want.namespace, want.name, ", ".join(sorted(want.string_data))
    )
    metrics.WRITES.labels(reason=drift.MISSING).inc()
    return result


def _backoff(deps: Deps, entry: state.SyncEntry, retry_after: float | None = None) -> float:
    entry.failures += 1
    base: float = min(
        deps.settings.backoff_max_seconds,
        deps.settings.backoff_initial_seconds * 2.0 ** min(entry.failures - 1, 30),
    )
    return max(base, retry_after or 0.0)


async def _identity_after_error(
    deps: Deps, identity: ident_mod.IdentityEntry | None, exc: service_errors.ServiceError
) -> None:
    if identity is not None and isinstance(exc, service_errors.AuthenticationError):
        await deps.on_identity(identity, (reasons.AUTH_FAILED, exc.message))


async def report(
    deps: Deps,
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

"""One SecretSync, one pass: resolve identity → fetch scopes → build → compare → write → status.

Why this order and these guards: the Secret is written only from a complete, successful fetch
and a successful render, so a failing or nonsensical service never empties or deletes a Secret
(failures only change status). A fetch that succeeds but looks wrong (a source listing nothing,
a listing cut at the depth limit) and a target that is not ours to write stop the pass too
(guards.py). Every write and every status patch is skipped when it would not change anything,
because at 10,000 objects each one echoes back as a watch event.

This module is the pass, read top to bottom; the writes are in target_writes.py, the status
patch and its Event in sync_report.py, what the pass is given in deps.py.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Final

from secretferry import backoff, metrics
from secretferry.models import generators
from secretferry.models import secretsync as sync_models
from secretferry.reconcile import (
    collisions,
    conditions,
    drift,
    guards,
    outcomes,
    problems,
    reasons,
    scheduler,
    state,
    sync_report,
    target_writes,
)
from secretferry.reconcile import deps as deps_mod
from secretferry.reconcile import desired as desired_mod
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import refresh as refresh_mod
from secretferry.reconcile.generators import store as generator_store
from secretferry.reconcile.rendering import pool, template_sources
from secretferry.service import auth
from secretferry.service import errors as service_errors
from secretferry.service import models as service_models
from secretferry.service import pacing as service_pacing
from secretferry.service import scopes as scope_mod

log = logging.getLogger(__name__)
# The shortest wait for a scope whose backoff is (nearly) over: a retry "now" still goes through
# the queue, behind live work.
_MIN_DELAY_SECONDS = 0.05
# Writes that change what a consumer of the Secret reads: new data, or the Secret recreated with
# another type (whose data may be the same: a rare, deliberate edit, worth the restart).
_DATA_WRITES: Final = frozenset({drift.DATA_CHANGED, drift.TYPE_CHANGED})


async def reconcile(deps: deps_mod.Deps, entry: state.SyncEntry) -> float | None:
    """Bring one SecretSync's target in line; returns a retry delay in seconds, or None."""
    started = time.perf_counter()
    result = "error"
    try:
        delay, result = await _reconcile(deps, entry)
        return delay
    finally:
        metrics.SYNC_DURATION.observe(time.perf_counter() - started)
        metrics.SYNCS.labels(result=result).inc()


async def _reconcile(deps: deps_mod.Deps, entry: state.SyncEntry) -> tuple[float | None, str]:
    sync = entry.model
    if sync is None:
        invalid = problems.Problem(reasons.INVALID_SPEC, entry.invalid or "invalid spec")
        return await _failed(deps, entry, invalid), "invalid"
    # The service can change its mind (a permission granted, a project created) without
    # Kubernetes hearing of it: what it refused for good is looked at again at the refresh.
    refresh = sync.spec.refresh_interval_seconds
    try:
        hold = await refresh_mod.held(deps, entry, sync)
    except problems.Problem as unreadable:
        return await _failed(deps, entry, unreadable), "target"
    if hold is not None:
        return await _held(deps, entry, sync, hold), "unchanged"
    try:
        identity = await deps.identities.resolve(sync)
        session = await deps.identities.session(identity)
        # Before anything is fetched: a template's author reads every value it sees (template_trust.py).
        await deps.identities.check_templates(identity, sync)
        scopes = await _scopes(deps, sync, identity, session)
    except problems.Problem as unusable:
        _release_scopes(deps, entry)
        return await _failed(deps, entry, unusable), "identity"
    except service_errors.ServiceError as exc:
        problem = outcomes.from_service_error(exc, scope_text="resolving the project slug")
        return await _failed(deps, entry, problem, look_again=refresh), "service"

    if refresh_mod.periodic(sync):
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
    else:
        # OnChange/CreatedOnce: no resync and no stream, so no scope held (refresh.py).
        _release_scopes(deps, entry)

    if not scheduler.running_live() and not entry.force_pending:
        # Routine work that would wait for rate-limit budget gives its worker back and comes back
        # at the window's reset (as backlog): a worker waiting there is one live work cannot use.
        paced = _paced_wait(deps, session, scopes)
        if paced > 0:
            return paced, "paced"
    force, entry.force_pending = entry.force_pending, False
    fetched: list[desired_mod.FetchedSource] = []
    collided: list[collisions.Collision] = []  # one key from several folders: shown in status
    generator_values = await _generator_sources(deps, entry, sync)
    if isinstance(generator_values, problems.Problem):
        return await _failed(deps, entry, generator_values), "source"
    service_scopes = iter(scopes)
    for source in sync.spec.sources:
        if source.generator_ref is not None:
            # A generator's value, read from the Secret it owns: no service call (generators/).
            fetched.append(desired_mod.FetchedSource(direct=generator_values[source.generator_ref]))
            continue
        scope = next(service_scopes)
        await deps.until_decided(scope)  # a new scope's first list goes after its stream's subscribe
        scope_state = deps.scopes.get(scope)
        # A scope nobody holds (refreshPolicy OnChange/CreatedOnce): None, so a new list.
        fresh_after = scope_state.fresh_after if scope_state else None
        try:
            # Under a rate limit, a new or changed SecretSync's list call goes before the backlog's.
            level = service_pacing.LIVE if scheduler.running_live() else service_pacing.ROUTINE
            with service_pacing.priority(level):
                got = await deps.fetcher.fetch(scope, session, not_older_than=fresh_after, force=force)
        except service_errors.ServiceError as exc:
            problem = outcomes.from_service_error(exc, scope_text=scope_text(scope))
            if source.project_slug is not None and _project_gone(exc):
                # Deleted, and maybe recreated under the same slug: the next pass looks it up again.
                deps.slugs.forget(scope.identity_key, source.project_slug, scope.project_id)
            await _identity_after_error(deps, identity, exc)
            entry.force_pending = entry.force_pending or force
            # The scope keeps its own backoff (one list call for all its SecretSyncs): come back
            # when it allows the next call.
            retry_at = deps.fetcher.next_attempt_at(scope)
            if problem.retriable and retry_at is not None:
                problem.retry_after = max(
                    problem.retry_after or 0.0, retry_at - deps.clock(), _MIN_DELAY_SECONDS
                )
            return await _failed(deps, entry, problem, look_again=refresh), "service"
        except problems.Problem as unusable:  # minting the ServiceAccount token at login failed
            entry.force_pending = entry.force_pending or force
            await deps.on_identity(identity, unusable)
            return await _failed(deps, entry, unusable), "identity"
        one, found = to_fetched(got.secret_list, scope)
        fetched.append(one)
        collided.extend(found)
    await deps.on_identity(identity, None)

    source_problem = guards.source_problem(sync, fetched)
    if source_problem is not None:
        # Not retried on a timer of its own: the scope's resync and its events bring the next look.
        return await _failed(deps, entry, source_problem), "source"

    try:
        texts = await _template_texts(deps, entry, sync)
    except problems.Problem as unresolved:
        # A source that appears, gets its label or changes queues this SecretSync again
        # (template_intake.py); the refresh looks again at what no watch event tells (a source
        # created without the label).
        return await _failed(deps, entry, unresolved, look_again=refresh), "render"
    # Waiting for a template worker (one namespace's bombs can keep its worker busy for minutes)
    # holds no reconcile slot; without templates there is nothing to wait for (scheduler.py).
    wait = deps.off_slot() if texts else contextlib.nullcontext()
    try:
        async with wait:
            want = await desired_mod.render_and_build(
                sync,
                fetched,
                hmac_key=deps.hmac_key,
                renderer=pool.shared(deps.settings),
                origin=entry.origin,
                templates=texts,
            )
    except problems.Problem as unrenderable:
        return await _failed(deps, entry, unrenderable), "render"

    try:
        why, keys = await target_writes.write(deps, entry, sync, want)
    except problems.Problem as refused:
        return await _failed(deps, entry, refused), "target"

    written = why is not None
    # Restarts follow the data, as the write found it, not the HMAC: that is keyed per spec
    # generation (desired.object_key), so an edit that leaves the data alone changes it too.
    # Never on a first sync (no dataHMAC in status yet) or a write of labels/annotations only.
    if why in _DATA_WRITES and entry.status.get("dataHMAC") and want.kind == "Secret":
        deps.rollouts.data_changed(sync, want.name, want.data_hmac, sync_report.regarding(entry))
    entry.retry = None  # a success: the next failure backs off from the start
    if written and _routine(entry):
        # A data update of a SecretSync that is Synced already: its status patch (which flips
        # nothing) waits until the other live work — typically the Secret writes of the other
        # SecretSyncs one event nudged — is done. See scheduler.py.
        await deps.step_aside()
    mode = _update_mode(deps, sync, scopes)
    await sync_report.report(
        deps,
        entry,
        ok=True,
        reason=reasons.SYNCED,
        message=f"{want.kind} {want.name} holds {len(keys)} keys from {len(scopes)} source(s)"
        + (f"; {collisions.describe(collided)}" if collided else ""),
        synced_keys=keys,
        data_hmac=want.data_hmac,
        target={"kind": want.kind, "name": want.name},
        wrote=written,
        mode=mode,
    )
    return None, "written" if written else "unchanged"


async def _held(
    deps: deps_mod.Deps, entry: state.SyncEntry, sync: sync_models.SecretSync, why: str
) -> float | None:
    """A pass that reads nothing (refresh.py): Synced from what the target holds; no scope kept.

    A SecretSync that was Synced keeps its message (the keys it names are still there): a restart
    then patches nothing."""
    _release_scopes(deps, entry)
    ready = conditions.find(entry.status.get("conditions") or [], reasons.READY)
    message = str(ready.get("message", why)) if ready is not None and _routine(entry) else why
    await sync_report.report(
        deps,
        entry,
        ok=True,
        reason=reasons.SYNCED,
        message=message,
        target={"kind": sync.spec.target.kind, "name": sync.target_name},
        mode=refresh_mod.mode(sync),
    )
    return None


async def _template_texts(
    deps: deps_mod.Deps, entry: state.SyncEntry, sync: sync_models.SecretSync
) -> dict[str, str]:
    """Target key -> template text: inline ``data``, or with ``templateFrom`` the merge of its
    sources and ``data`` (rendering/template_sources.py); {} without a template. Sources are in
    the SecretSync's namespace, or for a ClusterSecretSync's entry in its templatesNamespace."""
    template = sync.spec.target.template
    namespace = sync.metadata.namespace or ""
    if entry.origin is not None and entry.origin.templates_namespace is not None:
        namespace = entry.origin.templates_namespace
    key = entry.key
    if template is None or not template.template_from:
        if deps.template_sources is not None:
            deps.template_sources.bind(key, ())  # an edit that drops templateFrom: no more re-renders
        return dict(template.data) if template is not None else {}
    if deps.template_sources is None:
        raise problems.Problem(reasons.TEMPLATE_SOURCE_MISSING, "templateFrom is not available here")
    return await template_sources.resolve(
        template, namespace=namespace, reader=deps.template_sources, sync_key=key
    )


def _routine(entry: state.SyncEntry) -> bool:
    """Whether the SecretSync was Ready/Synced already, so a data update flips no condition."""
    ready = conditions.find(entry.status.get("conditions") or [], reasons.READY)
    return ready is not None and ready.get("status") == "True" and ready.get("reason") == reasons.SYNCED


def _release_scopes(deps: deps_mod.Deps, entry: state.SyncEntry) -> None:
    """An identity that cannot be used reads nothing: its scopes (and streams) are let go."""
    removed = deps.scopes.unbind(entry.key)
    entry.scopes = ()
    if removed:
        deps.on_scopes_changed(set(), removed)


def scope_text(scope: scope_mod.Scope) -> str:
    return f"project {scope.project_id} environment {scope.environment} path {scope.path}"


def to_fetched(
    secret_list: service_models.SecretList, scope: scope_mod.Scope
) -> tuple[desired_mod.FetchedSource, list[collisions.Collision]]:
    """What one source lists, and the keys its folders disagree on (``collisions``: the deepest
    folder wins)."""
    direct, found = collisions.direct(secret_list.secrets, root=scope.path)
    imported = [{s.secret_key: s.secret_value for s in group.secrets} for group in secret_list.imports]
    depth = 0
    if scope.recursive:
        depth = max(
            (guards.relative_depth(scope.path, s.secret_path) for s in secret_list.secrets), default=0
        )
    return desired_mod.FetchedSource(direct=direct, imported=imported, depth=depth), found


async def _scopes(
    deps: deps_mod.Deps,
    sync: sync_models.SecretSync,
    identity: ident_mod.IdentityEntry,
    session: auth.AuthSession,
) -> tuple[scope_mod.Scope, ...]:
    identity_key = ident_mod.key_str(identity.key)
    result: list[scope_mod.Scope] = []
    for source in sync.spec.sources:
        if source.generator_ref is not None or source.environment is None:
            continue  # a generator's value: read from its Secret, not a scope (_generator_sources)
        project_id = source.project_id
        if project_id is None:
            assert source.project_slug is not None
            if source.project_slug in (".", ".."):  # a URL normalizer would send it to another route
                raise problems.Problem(
                    reasons.INVALID_SPEC,
                    f"projectSlug {source.project_slug!r} is not a project slug; nothing was sent",
                )
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


async def _generator_sources(
    deps: deps_mod.Deps, entry: state.SyncEntry, sync: sync_models.SecretSync
) -> dict[generators.GeneratorRef, dict[str, str]] | problems.Problem:
    """``generatorRef`` -> its value, each from the Secret its generator owns, in the
    SecretSync's own namespace only (the ref has no namespace): from the generator intake's
    watches, no request, once they hold both objects. Bound first, so that a generator without a
    value yet queues this SecretSync with its first one (generators/intake.py)."""
    namespace = sync.metadata.namespace or ""
    refs = [s.generator_ref for s in sync.spec.sources if s.generator_ref is not None]
    if deps.generator_sources is not None:
        deps.generator_sources.bind(entry.key, [(r.kind, namespace, r.name) for r in refs])
    found: dict[generators.GeneratorRef, dict[str, str]] = {}
    for ref in refs:
        if ref in found:
            continue
        try:
            if deps.generator_sources is not None:
                found[ref] = await deps.generator_sources.value(ref, namespace=namespace)
            else:
                found[ref] = await generator_store.read_value(deps.kube, ref, namespace=namespace)
        except problems.Problem as problem:
            return problem
    return found


def _update_mode(
    deps: deps_mod.Deps, sync: sync_models.SecretSync, scopes: Sequence[scope_mod.Scope]
) -> tuple[str, str] | None:
    """Streaming only when every scope is on a healthy stream; None while that is undecided."""
    if not refresh_mod.periodic(sync):
        return refresh_mod.mode(sync)
    if not scopes:
        return None  # generator sources only: their watch brings every change, no stream to speak of
    if not sync.spec.instant_updates:
        return reasons.POLLING, f"{reasons.INSTANT_UPDATES_DISABLED}: spec.instantUpdates is false"
    states = [deps.scopes.get(scope) for scope in scopes]
    for st in states:
        if st is not None and st.mode == reasons.POLLING:
            return reasons.POLLING, st.mode_reason
    if any(st is None or not st.mode for st in states):
        return None
    return reasons.STREAMING, "event stream connected"


def _paced_wait(deps: deps_mod.Deps, session: auth.AuthSession, scopes: Sequence[scope_mod.Scope]) -> float:
    """Seconds the longest of the scopes' list calls would wait for rate-limit budget."""
    waits = [0.0]
    for scope in scopes:
        scope_state = deps.scopes.get(scope)
        fresh_after = scope_state.fresh_after if scope_state else None
        waits.append(deps.fetcher.paced_wait(scope, session, not_older_than=fresh_after))
    return max(waits)


async def _failed(
    deps: deps_mod.Deps, entry: state.SyncEntry, problem: problems.Problem, *, look_again: float | None = None
) -> float | None:
    """Report ``problem`` as the Ready condition; return when to try again (``problems``).

    Retriable: the SecretSync's own backoff, Retry-After honoured. Otherwise no timer — the change
    that fixes it is a watch event — except ``look_again``, for refusals only the service can lift.
    """
    await sync_report.report(deps, entry, ok=False, reason=problem.reason, message=problem.message)
    if not problem.retriable:
        return look_again
    if entry.retry is None:  # created on the first failure: most SecretSyncs never need one
        entry.retry = backoff.Backoff(
            deps.settings.backoff_initial_seconds, deps.settings.backoff_max_seconds, clock=deps.clock
        )
    return entry.retry.next_delay(problem.retry_after)


def _project_gone(exc: service_errors.ServiceError) -> bool:
    """A 404 from the service itself (not a route this server lacks): the project may be gone."""
    return isinstance(exc, service_errors.NotFound) and not isinstance(exc, service_errors.RouteNotFound)


async def _identity_after_error(
    deps: deps_mod.Deps, identity: ident_mod.IdentityEntry | None, exc: service_errors.ServiceError
) -> None:
    if identity is not None and isinstance(exc, service_errors.AuthenticationError):
        await deps.on_identity(identity, problems.Problem(outcomes.auth_reason(exc), exc.message))

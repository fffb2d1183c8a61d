"""A PushSecret's pass (``push``) and its removal (``remove``, behind the finalizer).

Both raise nothing: every failure becomes the Ready condition's reason, and an ``Outcome`` tells
the intake when to try again (``retry_after``) and which Secret to watch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from secretferry import metrics
from secretferry.models import pushsecret as push_models
from secretferry.reconcile import problems, reasons
from secretferry.reconcile.push import plan as plan_mod
from secretferry.reconcile.push import pushing, report, trust
from secretferry.service import errors as service_errors

log = logging.getLogger(__name__)
# Refusals about the identity cost no call (the registry is in memory) and the identity intake
# requeues SecretSyncs, not PushSecrets: so they are retried with backoff.
_IDENTITY_REASONS = frozenset(
    {reasons.IDENTITY_NOT_FOUND, reasons.IDENTITY_NOT_READY, reasons.IDENTITY_NOT_ALLOWED}
)


async def push(
    deps: pushing.PushDeps,
    body: Mapping[str, Any],
    *,
    last: Mapping[str, plan_mod.Record] | None = None,
) -> pushing.Outcome:
    """One pass. ``last``: the records the previous pass left (the intake keeps them), which the
    body's status may not show yet when the source changes again before our status patch echoes
    back; without them (after a restart) they come from status.pushedKeys."""
    model = push_models.PushSecret.from_body(body)
    namespace, name = model.metadata.namespace or "", model.metadata.name
    outcome = pushing.Outcome()
    if last is None:
        # Records of another destination (the spec changed it) say nothing about this one.
        same = model.status.destination in (None, trust.describe(model.spec.destination))
        last = pushing.records_of(model.status) if same else {}
    conflicts: list[str] = []
    records: dict[str, plan_mod.Record] | None = None
    wrote = False
    try:
        entry = await pushing.resolve_identity(deps, model)
        outcome.source_secret = await pushing.source_secret_name(deps, model)
        desired = await pushing.read_source(deps, model, outcome.source_secret)
        session = await deps.identities.session(entry)
        where = trust.describe(model.spec.destination)
        try:
            scope = await pushing.scope_of(deps, entry, session, model.spec.destination)
            remote = await pushing.list_destination(deps, session, scope)
            digest = pushing.digest_for(deps.hmac_key, namespace, name)
            todo = plan_mod.plan(
                desired,
                remote,
                last,
                digest=digest,
                update_policy=model.spec.update_policy,
                deletion_policy=model.spec.deletion_policy,
            )
            conflicts = todo.conflicts
            records = dict(todo.records)
            try:
                for op, items in (("create", todo.creates), ("update", todo.updates)):
                    for key, value in items.items():
                        answered = await pushing.write(deps, session, scope, op, key, value)  # type: ignore[arg-type]
                        records[key] = plan_mod.Record(
                            source=digest(key, value), remote=digest(key, answered or value)
                        )
                        wrote = True
                for key in todo.deletes:
                    await pushing.write(deps, session, scope, "delete", key)
                    wrote = True
            except BaseException:
                # Keep what was written so far, and what the failed write did not reach.
                for key, rec in last.items():
                    records.setdefault(key, rec)
                raise
            if conflicts and model.spec.update_policy == "IfNotExists":
                raise problems.Problem(
                    reasons.PUSH_CONFLICT,
                    f"changed at the service since our last push (or there before), left as they are "
                    f"under updatePolicy IfNotExists: {', '.join(conflicts)}; set Replace to overwrite",
                )
        except service_errors.ServiceError as exc:
            raise pushing.service_problem(exc, what=where) from None
    except problems.Problem as problem:
        outcome.retriable = problem.retriable or problem.reason in _IDENTITY_REASONS
        outcome.retry_after = problem.retry_after
        result = (
            "conflict"
            if problem.reason == reasons.PUSH_CONFLICT
            else ("failed" if problem.retriable or problem.reason == reasons.PUSH_FAILED else "refused")
        )
        metrics.PUSHES.labels(result).inc()
        outcome.records = records
        log.info("PushSecret %s/%s: %s", namespace, name, problem.reason)
        await report.report(
            deps,
            model,
            body,
            ready=problem,
            records=records,
            conflicts=conflicts,
            replaced=False,
            wrote=wrote,
        )
        return outcome
    metrics.PUSHES.labels("pushed" if wrote else "unchanged").inc()
    outcome.records = records
    await report.report(
        deps,
        model,
        body,
        ready=None,
        records=records,
        conflicts=conflicts,
        replaced=bool(conflicts),
        wrote=wrote,
    )
    return outcome


async def remove(deps: pushing.PushDeps, body: Mapping[str, Any]) -> pushing.Outcome:
    """The PushSecret is being deleted: under deletionPolicy Delete, delete what it left at the
    service (trust checks first, as for a push). Returns ``retriable`` while that failed: the
    finalizer stays until it worked (or someone removes it by hand)."""
    model = push_models.PushSecret.from_body(body)
    last = pushing.records_of(model.status)
    if model.spec.deletion_policy != "Delete" or not last:
        return pushing.Outcome()
    namespace, name = model.metadata.namespace or "", model.metadata.name
    try:
        entry = await pushing.resolve_identity(deps, model)
        session = await deps.identities.session(entry)
        try:
            scope = await pushing.scope_of(deps, entry, session, model.spec.destination)
            remote = await pushing.list_destination(deps, session, scope)
            digest = pushing.digest_for(deps.hmac_key, namespace, name)
            for key in plan_mod.plan_removal(
                remote,
                last,
                digest=digest,
                update_policy=model.spec.update_policy,
                deletion_policy=model.spec.deletion_policy,
            ):
                await pushing.write(deps, session, scope, "delete", key)
        except service_errors.ServiceError as exc:
            raise pushing.service_problem(exc, what=trust.describe(model.spec.destination)) from None
    except problems.Problem as problem:
        log.info("PushSecret %s/%s: removal failed: %s", namespace, name, problem.reason)
        await report.report(
            deps, model, body, ready=problem, records=last, conflicts=[], replaced=False, wrote=False
        )
        return pushing.Outcome(retriable=True, retry_after=problem.retry_after)
    return pushing.Outcome()

"""TemporaryPrivileges at the service: one small loop per resource, while this replica leads.

Each loop runs a pass, then sleeps until the next thing that can change: a new version of the
resource (kopf's events, handlers/operator.py, wake it at once), the start or end of the grant's
window (a timer: the status turns Active/Expired then without any call, since the service itself
stops counting a temporary privilege at its end time), the periodic read-back that repairs drift
(``privilege_check_interval_seconds``: a privilege deleted or changed at the service is recreated
or corrected), or a retry after a failure (backoff).

A pass: parse → finalizer → refuse permanent grants unless allowed → the granter's session → read
the privilege by slug (v1) → create it (v1; rules that need v2 are added by a v2 update right after)
or update it (v2 by id; v1 where the server lacks v2) when it differs → status. Deletion: the
privilege is deleted at the service (v2 by id, v1 by slug on a server without v2), then our
finalizer is removed; a privilege already gone is no failure.

Standby replicas keep the bodies kopf delivers but run no loop (``start``/``stop`` follow the
Lease, like the rest of the controller), so two replicas never grant at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pydantic

from secretferry import backoff, logfields, metrics
from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.kube import customresources, finalizers
from secretferry.kube import errors as kube_errors
from secretferry.kube import events as kube_events
from secretferry.kube import status as kube_status
from secretferry.models import base as models_base
from secretferry.models import errors as model_errors
from secretferry.models import temporaryprivilege as tp
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import problems, reasons
from secretferry.reconcile.privileges import report, wire
from secretferry.service import auth
from secretferry.service import client as service_client
from secretferry.service import errors as service_errors
from secretferry.service import models as service_models

log = logging.getLogger(__name__)
T = TypeVar("T")

FINALIZER = "secretferry.io/temporaryprivilege"
KIND = tp.TEMPORARY_PRIVILEGE_KIND
PLURAL = tp.PLURAL


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass
class _Entry:
    body: Mapping[str, Any]
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    grant: report.Grant | None = None
    start: datetime.datetime | None = None
    tried_generation: int | None = None
    """The generation the last call at the service was made for (a new one is always due)."""
    next_check: datetime.datetime | None = None
    status: dict[str, Any] | None = None
    state: str = report.FAILED
    failing: bool = False
    problem: problems.Problem | None = None
    """What the last call at the service (or the granter) failed with; kept while its retry waits."""
    retry: backoff.Backoff | None = None


class PrivilegeManager:
    def __init__(
        self,
        *,
        kube: kube_client.Kube,
        settings: settings_mod.Settings,
        identities: ident_mod.IdentityRegistry,
        instance: str,
        now: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        self._kube = kube
        self._settings = settings
        self._identities = identities
        self._instance = instance
        self._now = now
        self._entries: dict[str, _Entry] = {}
        self.leading = False

    # --- intake --------------------------------------------------------------------------------
    def event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A TemporaryPrivilege event from kopf: keep the body; while leading, wake its loop."""
        name = str(body.get("metadata", {}).get("name") or "")
        if not name:
            return
        log.debug("%s event (leading: %s)", event_type, self.leading, extra=logfields.about(KIND, None, name))
        if event_type == "DELETED":
            entry = self._entries.pop(name, None)
            if entry is not None and entry.task is not None:
                entry.task.cancel()
            self._count()
            if self.leading:  # one refused with SlugConflict may take the privilege over now
                for other_name, other in self._entries.items():
                    if other.failing:
                        self._run(other_name, other)
            return
        entry = self._entries.get(name)
        if entry is None:
            entry = self._entries[name] = _Entry(body=body)
        elif _version(body) < _version(entry.body):
            return  # an older copy than one we already act on (our own patch's answer, say)
        entry.body = body
        if self.leading:
            self._run(name, entry)

    def granter_changed(self, granter: str) -> None:
        """A ClusterMachineIdentity appeared, changed or went: the TemporaryPrivileges it grants
        that are not Granted try again now rather than at their next backoff step."""
        if not self.leading:
            return
        for name, entry in self._entries.items():
            spec = entry.body.get("spec") or {}
            if (spec.get("granterRef") or {}).get("name") != granter or not entry.failing:
                continue
            entry.next_check = None
            if entry.retry is not None:
                entry.retry.reset()
            self._run(name, entry)

    async def start(self) -> None:
        """This replica leads: read every TemporaryPrivilege and run a loop for each."""
        self.leading = True
        try:
            items = await customresources.list_items(self._kube, plural=PLURAL)
        except kube_errors.KubeError as exc:
            # kopf's events bring them anyway (each ADDED at its watch's start).
            log.warning("listing TemporaryPrivileges failed: %s", exc)
            items = []
        for body in items:
            self.event("ADDED", body)
        for name, entry in self._entries.items():
            self._run(name, entry)
        log.info("leading: %d TemporaryPrivileges", len(self._entries))

    async def stop(self) -> None:
        self.leading = False
        tasks = [e.task for e in self._entries.values() if e.task is not None]
        for entry in self._entries.values():
            entry.task = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _run(self, name: str, entry: _Entry) -> None:
        if entry.task is None or entry.task.done():
            entry.task = asyncio.create_task(self._loop(name, entry), name=f"temporaryprivilege {name}")
        else:
            entry.wake.set()

    async def _loop(self, name: str, entry: _Entry) -> None:
        while self._entries.get(name) is entry:
            entry.wake.clear()
            try:
                delay = await self._pass(entry)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug must not end the loop for good: log it, try again later
                log.exception("TemporaryPrivilege pass failed", extra=logfields.about(KIND, None, name))
                delay = self._settings.backoff_max_seconds
            self._count()
            if delay is None:
                await entry.wake.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(entry.wake.wait(), timeout=max(delay, 0.0))

    # --- the pass ---------------------------------------------------------------------------
    async def _pass(self, entry: _Entry) -> float | None:
        """One look at the resource; returns seconds until the next (None: only on a change)."""
        body = entry.body
        meta = body.get("metadata", {})
        if meta.get("deletionTimestamp"):
            return await self._finalize(entry)
        now = self._now()
        problem: problems.Problem | None = None
        try:
            model = tp.TemporaryPrivilege.from_body(body)
        except pydantic.ValidationError as exc:
            problem = problems.Problem(reasons.INVALID_SPEC, model_errors.describe_validation_error(exc))
            await self._report(entry, problem=problem, generation=meta.get("generation"), now=now)
            return None
        if FINALIZER not in (meta.get("finalizers") or []):
            try:
                await self._add_finalizer(entry)
            except kube_errors.KubeError as exc:
                problem = problems.Problem(reasons.KUBERNETES_ERROR, f"cannot add the finalizer: {exc}")
                await self._report(entry, problem=problem, generation=model.metadata.generation, now=now)
                return self._retry_delay(entry, None)
        if model.spec.permanent and not self._settings.allow_permanent_privileges:
            problem = problems.Problem(
                reasons.PERMANENT_NOT_ALLOWED,
                "permanent privileges are off in this operator (SECRETFERRY_ALLOW_PERMANENT_PRIVILEGES,"
                " chart config.allowPermanentPrivileges); set temporaryRange instead",
            )
            await self._report(entry, problem=problem, generation=model.metadata.generation, now=now)
            return None
        claimant = self._claimant(model)
        if claimant is not None:
            problem = problems.Problem(
                reasons.SLUG_CONFLICT,
                f"TemporaryPrivilege {claimant!r} already manages privilege {model.privilege_slug!r} of this"
                " identity in this project; set another spec.slug",
            )
            await self._report(entry, problem=problem, generation=model.metadata.generation, now=now)
            return None  # the claimant's deletion wakes this one (event)
        if entry.start is None:
            entry.start = _status_time(body, "startTime")
        # A wake-up in the middle of a backoff (our own status patch echoing back) does not call the
        # service early; a new generation does.
        waiting = entry.retry is not None and not entry.retry.ready()
        due = entry.tried_generation != model.metadata.generation or (
            not waiting and (entry.next_check is None or now >= entry.next_check or entry.grant is None)
        )
        checked_at: datetime.datetime | None = None
        if not due:
            problem = entry.problem  # nothing new was learnt: the status stays what it was
        else:
            entry.tried_generation = model.metadata.generation
            entry.problem = None
            try:
                entry.grant = await self._converge(entry, model, now)
            except problems.Problem as exc:
                problem = entry.problem = exc
            else:
                checked_at = now
                entry.next_check = now + datetime.timedelta(
                    seconds=self._settings.privilege_check_interval_seconds
                )
                if entry.retry is not None:
                    entry.retry.reset()
        await self._report(
            entry, problem=problem, generation=model.metadata.generation, now=now, checked_at=checked_at
        )
        waits = [report.next_change(entry.grant, now)]
        if not due and waiting and entry.retry is not None and entry.retry.retry_at is not None:
            waits.append(entry.retry.retry_at - asyncio.get_running_loop().time())
        elif problem is not None:
            waits.append(self._retry_delay(entry, problem) if problem.retriable else None)
        elif entry.next_check is not None:
            waits.append((entry.next_check - now).total_seconds())
        known = [w for w in waits if w is not None]
        return min(known) if known else None

    def _claimant(self, model: tp.TemporaryPrivilege) -> str | None:
        """The older TemporaryPrivilege managing the same privilege (identity, project, slug), if any:
        two resources on one privilege would overwrite each other's rules at every check, and the
        deletion of either would end the other's grant. The older one (creation, then name) keeps it."""
        mine = _address(model)
        own = self._entries.get(model.metadata.name)
        order = (_created(own.body) if own is not None else "", model.metadata.name)
        for name, other in self._entries.items():
            if name == model.metadata.name or (other.body.get("metadata") or {}).get("deletionTimestamp"):
                continue
            try:
                theirs = tp.TemporaryPrivilege.from_body(other.body)
            except pydantic.ValidationError:
                continue
            if _address(theirs) == mine and (_created(other.body), name) < order:
                return name
        return None

    async def _converge(
        self, entry: _Entry, model: tp.TemporaryPrivilege, now: datetime.datetime
    ) -> report.Grant:
        spec = model.spec
        session = await self._session(spec.granter_ref.name)
        slug = model.privilege_slug
        start = spec.temporary_access_start_time or entry.start or now.replace(microsecond=0)
        entry.start = None if spec.permanent else start
        where = f"privilege {slug} of identity {spec.identity_id} in project {spec.project_slug}"
        try:
            observed = await self._observe(session, spec, slug)
            if observed is None:
                observed = await self._create(session, spec, slug, start)
                log.info("created %s", where, extra=logfields.about(KIND, None, model.metadata.name))
            elif (what := wire.difference(observed, spec, start=start)) is not None:
                observed = await self._update(session, spec, slug, start, observed)
                log.info(
                    "updated %s (%s)", where, what, extra=logfields.about(KIND, None, model.metadata.name)
                )
        except service_errors.ServiceError as exc:
            raise _problem(exc, where) from exc
        return _grant(observed, slug)

    async def _observe(
        self, session: auth.AuthSession, spec: tp.TemporaryPrivilegeSpec, slug: str
    ) -> service_models.IdentityPrivilege | None:
        """The privilege of that slug, or None. Listed rather than read by slug: the read's 404
        would not say whether the privilege or the project is missing, and only the first is
        mended by a create."""
        listed = await _call(
            session,
            lambda c: c.list_identity_privileges(
                identity_id=spec.identity_id, project_slug=spec.project_slug
            ),
        )
        return next((p for p in listed if p.slug == slug), None)

    async def _create(
        self,
        session: auth.AuthSession,
        spec: tp.TemporaryPrivilegeSpec,
        slug: str,
        start: datetime.datetime,
    ) -> service_models.IdentityPrivilege:
        """v1 create. Rules that fit v1 go in at once when the grant is temporary; otherwise the
        privilege is created empty (it grants nothing) and its rules and window come with the v2
        update, so no moment grants more than the spec."""
        direct = not spec.permanent and wire.fits_v1(spec.permissions)
        # A permanent grant is created as a temporary one (the only create route) and made
        # permanent by the update right after; empty meanwhile.
        created = await _call(
            session,
            lambda c: c.create_identity_privilege_temporary(
                identity_id=spec.identity_id,
                project_slug=spec.project_slug,
                slug=slug,
                temporary_range=spec.temporary_range or "1m",
                temporary_access_start_time=start,
                permissions=wire.v1_items(spec.permissions) if direct else [],
            ),
        )
        if direct:
            return created
        try:
            return await self._update(session, spec, slug, start, created)
        except service_errors.ServiceError:
            # Leave nothing half-made behind: the next pass creates it again.
            with contextlib.suppress(service_errors.ServiceError):
                await self._delete(session, spec, slug, created.id)
            raise

    async def _update(
        self,
        session: auth.AuthSession,
        spec: tp.TemporaryPrivilegeSpec,
        slug: str,
        start: datetime.datetime,
        observed: service_models.IdentityPrivilege,
    ) -> service_models.IdentityPrivilege:
        """v2 by id; v1 by slug on a server without the v2 routes (rules that fit v1 only)."""
        privilege_id = observed.id
        if privilege_id:
            try:
                return await _call(
                    session,
                    lambda c: c.update_identity_privilege_v2(
                        privilege_id,
                        slug=slug,
                        permissions=wire.v2_items(spec.permissions),
                        type=wire.v2_type(spec, start),
                    ),
                )
            except service_errors.RouteNotFound:
                pass
        if not wire.fits_v1(spec.permissions):
            raise problems.Problem(
                reasons.SERVER_NOT_SUPPORTED,
                "these permissions (several non-basic actions, inverted, secretName or secretTags) need"
                " the service's v2 privilege routes, which this server lacks",
            )
        return await _call(
            session,
            lambda c: c.update_identity_privilege(
                privilege_slug=slug,
                identity_id=spec.identity_id,
                project_slug=spec.project_slug,
                permissions=wire.v1_items(spec.permissions),
                is_temporary=not spec.permanent,
                temporary_mode=None if spec.permanent else "relative",
                temporary_range=spec.temporary_range,
                temporary_access_start_time=None if spec.permanent else start,
            ),
        )

    async def _delete(
        self, session: auth.AuthSession, spec: tp.TemporaryPrivilegeSpec, slug: str, privilege_id: str | None
    ) -> None:
        """Delete at the service; already gone is fine."""
        try:
            if privilege_id:
                try:
                    await _call(session, lambda c: c.delete_identity_privilege_v2(privilege_id))
                    return
                except service_errors.RouteNotFound:
                    pass
            await _call(
                session,
                lambda c: c.delete_identity_privilege(
                    privilege_slug=slug, identity_id=spec.identity_id, project_slug=spec.project_slug
                ),
            )
        except service_errors.RouteNotFound:
            raise
        except service_errors.NotFound:
            return

    async def _session(self, granter: str) -> auth.AuthSession:
        entry = self._identities.get((ident_mod.CLUSTER, "", granter))
        if entry is None:
            raise problems.Problem(
                reasons.GRANTER_NOT_FOUND,
                f"ClusterMachineIdentity {granter!r} does not exist",
                retriable=True,
            )
        if entry.model is None:
            raise problems.Problem(
                reasons.GRANTER_NOT_READY,
                f"ClusterMachineIdentity {granter!r} has an invalid spec: {entry.invalid}",
                retriable=True,
            )
        try:
            return await self._identities.session(entry)
        except problems.Problem as exc:
            raise problems.Problem(
                reasons.GRANTER_NOT_READY,
                f"ClusterMachineIdentity {granter!r}: {exc.message}",
                retriable=True,
            ) from exc

    # --- deletion ---------------------------------------------------------------------------
    async def _finalize(self, entry: _Entry) -> float | None:
        body = entry.body
        meta = body.get("metadata", {})
        if FINALIZER not in (meta.get("finalizers") or []):
            return None
        now = self._now()
        try:
            model = tp.TemporaryPrivilege.from_body(body)
        except pydantic.ValidationError:
            model = None  # never created anything we could address: nothing to delete
        if model is not None and self._claimant(model) is not None:
            model = None  # the privilege is another resource's: never delete it for this one
        if model is not None:
            privilege_id = entry.grant.privilege_id if entry.grant else _status_text(body, "privilegeId")
            where = f"privilege {model.privilege_slug} of identity {model.spec.identity_id}"
            fields = logfields.about(KIND, None, model.metadata.name)
            try:
                session = await self._session(model.spec.granter_ref.name)
                await self._delete(session, model.spec, model.privilege_slug, privilege_id)
            except service_errors.ServiceError as exc:
                problem = _problem(exc, f"deleting {where}")
                await self._report(entry, problem=problem, generation=model.metadata.generation, now=now)
                return self._retry_delay(entry, problem)
            except problems.Problem as problem:
                # A granter that does not exist, for a resource that never recorded a privilege:
                # it never granted anything (a typo in granterRef, say), so it must not block the
                # deletion forever. One that did record one waits for its granter.
                if problem.reason != reasons.GRANTER_NOT_FOUND or privilege_id is not None:
                    await self._report(entry, problem=problem, generation=model.metadata.generation, now=now)
                    return self._retry_delay(entry, problem)
                log.info(
                    "no granter and no privilege recorded: nothing to delete for %s", where, extra=fields
                )
            else:
                log.info("deleted %s", where, extra=fields)
                await self._post(
                    entry, reason="Deleted", note="deleted the privilege at the service", warning=False
                )
        remaining = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        try:
            await finalizers.set_finalizers(
                self._kube,
                plural=PLURAL,
                namespace=None,
                name=meta["name"],
                finalizers=remaining,
                resource_version=str(meta.get("resourceVersion") or ""),
            )
        except kube_errors.NotFound:
            return None
        except kube_errors.KubeError as exc:
            log.warning(
                "removing the finalizer failed: %s", exc, extra=logfields.about(KIND, None, meta["name"])
            )
            return self._retry_delay(entry, None)
        entry.grant = None
        return None

    async def _add_finalizer(self, entry: _Entry) -> None:
        meta = entry.body.get("metadata", {})
        updated = await finalizers.set_finalizers(
            self._kube,
            plural=PLURAL,
            namespace=None,
            name=meta["name"],
            finalizers=[*(meta.get("finalizers") or []), FINALIZER],
            resource_version=str(meta.get("resourceVersion") or ""),
        )
        if updated.get("metadata"):
            entry.body = updated

    # --- status, Events, metrics ------------------------------------------------------------
    async def _report(
        self,
        entry: _Entry,
        *,
        problem: problems.Problem | None,
        generation: int | None,
        now: datetime.datetime,
        checked_at: datetime.datetime | None = None,
    ) -> None:
        previous = entry.status if entry.status is not None else dict(entry.body.get("status") or {})
        new = report.status(
            previous,
            grant=entry.grant,
            problem=problem,
            generation=generation,
            start=entry.start,
            checked_at=checked_at,
            now=now,
        )
        entry.state = report.state(entry.grant, problem, now)
        entry.failing = problem is not None
        if _without(new, "lastCheckedTime") == _without(previous, "lastCheckedTime") and checked_at is None:
            return
        patch: dict[str, Any] = {**dict.fromkeys(set(previous) - set(new)), **new}
        name = str(entry.body.get("metadata", {}).get("name"))
        try:
            await kube_status.patch_status(
                self._kube,
                group=models_base.GROUP,
                version=models_base.VERSION,
                plural=PLURAL,
                namespace=None,
                name=name,
                status=patch,
            )
        except kube_errors.NotFound:
            return
        except kube_errors.KubeError as exc:
            log.warning("status patch failed: %s", exc, extra=logfields.about(KIND, None, name))
            return
        entry.status = new
        await self._transitions(entry, report.reasons_of(previous), report.reasons_of(new), new)

    async def _transitions(
        self, entry: _Entry, before: Mapping[str, str], after: Mapping[str, str], new: Mapping[str, Any]
    ) -> None:
        """An Event per changed reason. Notes name no identity or project: Events about
        cluster-scoped objects live in namespace default, which more people may read."""
        for type_ in (reasons.READY, reasons.ACTIVE):
            reason = after.get(type_)
            if reason is None or reason == before.get(type_):
                continue
            if type_ == reasons.READY and reason == reasons.GRANTED:
                continue  # Active's Event says it better
            warning = type_ == reasons.READY
            note = {
                reasons.ACTIVE: f"privilege active until {new.get('expiresAt') or 'revoked (permanent)'}",
                reasons.EXPIRED: f"privilege expired at {new.get('expiresAt')}",
                reasons.PENDING: f"privilege starts at {new.get('startTime')}",
                reasons.NOT_GRANTED: "no privilege at the service",
            }.get(reason, f"not granted: {reason}")
            await self._post(entry, reason=reason, note=note, warning=warning)

    async def _post(self, entry: _Entry, *, reason: str, note: str, warning: bool) -> None:
        meta = entry.body.get("metadata", {})
        regarding: kube_events.ObjectRef = {
            "apiVersion": models_base.API_VERSION,
            "kind": KIND,
            "name": str(meta.get("name")),
            "uid": str(meta.get("uid") or ""),
        }
        await kube_events.post(
            self._kube,
            regarding=regarding,
            reason=reason,
            note=note,
            type="Warning" if warning else "Normal",
            action="Grant",
            reporting_instance=self._instance,
        )

    def _retry_delay(self, entry: _Entry, problem: problems.Problem | None) -> float:
        if entry.retry is None:
            entry.retry = backoff.Backoff(
                self._settings.backoff_initial_seconds,
                self._settings.backoff_max_seconds,
                # at least half the step: a failing privilege is never retried in a burst
                jitter=backoff.EQUAL_JITTER,
                clock=asyncio.get_running_loop().time,  # the clock the loop's own waits run on
            )
        return entry.retry.next_delay(problem.retry_after if problem is not None else None)

    def _count(self) -> None:
        counts = dict.fromkeys(metrics.PRIVILEGE_STATES, 0)
        for entry in self._entries.values():
            counts[entry.state] = counts.get(entry.state, 0) + 1
        for state_, count in counts.items():
            metrics.TEMPORARY_PRIVILEGES.labels(state=state_).set(count)


async def _call(session: auth.AuthSession, fn: Callable[[service_client.ServiceClient], Awaitable[T]]) -> T:
    return await session.call(fn)


def _grant(privilege: service_models.IdentityPrivilege, slug: str) -> report.Grant:
    if not privilege.is_temporary:
        return report.Grant(privilege_id=privilege.id, slug=privilege.slug or slug, start=None, end=None)
    return report.Grant(
        privilege_id=privilege.id,
        slug=privilege.slug or slug,
        start=privilege.temporary_access_start_time,
        end=privilege.temporary_access_end_time,
    )


def _problem(exc: service_errors.ServiceError, where: str) -> problems.Problem:
    req = f" (reqId {exc.req_id})" if exc.req_id else ""
    detail = f"{where}: {exc.message}{req}"
    reason: str
    if isinstance(exc, service_errors.RateLimited):
        reason = reasons.RATE_LIMITED
    elif isinstance(exc, service_errors.Unavailable | service_errors.ProtocolError):
        reason = reasons.SERVICE_UNAVAILABLE
    elif isinstance(exc, service_errors.AuthenticationError):
        reason = reasons.AUTH_FAILED
    elif isinstance(exc, service_errors.PermissionDenied):
        reason = reasons.GRANT_FORBIDDEN
    else:
        reason = reasons.GRANT_REFUSED
    retry_after = exc.retry_after if isinstance(exc, service_errors.Unavailable) else None
    # Not only the service's own retriable errors: a refusal (a missing membership, a project
    # being created, rights granted later) can be mended at the service without an event we see.
    return problems.Problem(reason, detail, retriable=True, retry_after=retry_after)


def _created(body: Mapping[str, Any]) -> str:
    """RFC 3339 in UTC with whole seconds: ordered as text."""
    return str((body.get("metadata") or {}).get("creationTimestamp") or "")


def _address(model: tp.TemporaryPrivilege) -> tuple[str, str, str]:
    return (model.spec.identity_id, model.spec.project_slug, model.privilege_slug)


def _version(body: Mapping[str, Any]) -> int:
    try:
        return int(body.get("metadata", {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _status_text(body: Mapping[str, Any], key: str) -> str | None:
    value = (body.get("status") or {}).get(key)
    return str(value) if isinstance(value, str) and value else None


def _status_time(body: Mapping[str, Any], key: str) -> datetime.datetime | None:
    text = _status_text(body, key)
    if text is None:
        return None
    try:
        return datetime.datetime.strptime(text, models_base.TIME_FORMAT).replace(tzinfo=datetime.UTC)
    except ValueError:
        return None


def _without(status_: Mapping[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in status_.items() if k != key}

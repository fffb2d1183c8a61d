"""One DynamicSecretLease over time: lease → write the Secret → renew … → replace → revoke.

``step(lease)`` does what is due now and returns how long to wait before the next step; the
handler's loop (handlers/leases.py) sleeps that long. The clock is injected (``clock``, epoch
seconds), so the whole schedule runs under virtual time in the unit tests.

- No lease (or the Secret holding its credentials is gone — the service hands credentials out
  once): take one, write the Secret, then restart opted-in consumers if this replaced a lease.
- Renewal due (schedule.py): renew; a refusal (400: past the max TTL) or a lease the service no
  longer knows (404) is replaced at once by a new lease; anything retriable is retried with
  backoff while the lease still lives.
- Deleted with ``revocationPolicy: Revoke``: revoke at the service (``release``); a lease the
  service no longer knows counts as revoked.

What is held is kept in status (leaseId, leaseCreatedAt, expiresAt, …) and read back after an
operator restart, so a restart neither takes a second lease nor loses the renewal schedule.

Secrets of tenants: the lease's credentials go into the Secret and nowhere else — not status,
Events, log lines or exception messages. The lease id is in status (an identifier, not a
credential) but is cut out of every Event and log line, as the service's own messages may quote it.

The per-namespace bound (``max_leases_per_namespace``) is counted here, over the objects of this
operator that hold a lease; it is checked before a lease is taken, never for a renewal.

Spec edits: the handlers tell ``noticed`` of every watch event; a generation other than the one
the last step worked with sets the object's ``woken`` event, which ends the loop's wait at once
(before: the wait ran out, up to ``MAX_WAIT_SECONDS``). The next step works with the new spec: a
new ``target.name`` takes a lease for that Secret, a new ``ttl`` is the term of the next renewal,
a new ``renewAtFraction`` moves the renewal; status shows the new ``observedGeneration`` and
``renewAt`` even when nothing else is due.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from secretferry import metrics
from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import events as kube_events
from secretferry.kube import status as kube_status
from secretferry.models import base as models_base
from secretferry.models import dynamicsecretlease as lease_models
from secretferry.reconcile import conditions, outcomes, problems, reasons, rollouts
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile.leases import schedule, target
from secretferry.service import errors as service_errors
from secretferry.service import leases as service_leases
from secretferry.service import models as service_models

log = logging.getLogger(__name__)
MAX_WAIT_SECONDS = (
    300.0  # look again at least this often: a deleted Secret is seen (a spec edit wakes at once)
)
MAX_RETRY_SECONDS = 300.0  # the backoff's ceiling for retriable failures
READY = "Ready"


def _epoch(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _time(epoch: float) -> datetime:
    return datetime.fromtimestamp(int(epoch), UTC)


def parse_ms(value: str | None) -> float | None:
    """Seconds of a service duration (the ``ms`` grammar: ``24h``, ``30m``, ``1d``); None if unreadable."""
    if not value:
        return None
    text = value.strip().lower()
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31557600.0}
    for unit in ("ms", "s", "m", "h", "d", "w", "y"):
        if text.endswith(unit):
            number = text[: -len(unit)].strip()
            break
    else:
        unit, number = "ms", text
    try:
        return float(number) * units[unit]
    except ValueError:
        return None


def _scrub(text: str, held: schedule.Held | None) -> str:
    """The text without the lease id (the service's messages may quote it)."""
    return text.replace(held.lease_id, "<lease>") if held is not None and held.lease_id else text


class LeaseKeeper:
    def __init__(
        self,
        *,
        kube: kube_client.Kube,
        identities: ident_mod.IdentityRegistry,
        rollouts_: rollouts.RolloutManager,
        settings: settings_mod.Settings,
        instance: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._kube = kube
        self._identities = identities
        self._rollouts = rollouts_
        self._settings = settings
        self._instance = instance
        self._clock = clock
        self._held: dict[str, schedule.Held] = {}
        self._holders: dict[str, set[str]] = {}  # namespace → uids holding a lease
        self._failures: dict[str, int] = {}
        self._reported: dict[str, tuple[str, str]] = {}
        self._slugs: dict[tuple[str, str], str] = {}  # (identity, project id) → slug
        self._generations: dict[str, int | None] = {}  # uid → the generation its last step worked with
        self._wakes: dict[str, asyncio.Event] = {}  # uid → set when a newer generation is seen
        self.calls = 0
        """Lease calls made (create, renew, revoke): the benchmark's count."""

    # --- bookkeeping ---------------------------------------------------------------------------
    def _uid(self, lease: lease_models.DynamicSecretLease) -> str:
        return lease.metadata.uid or f"{lease.metadata.namespace}/{lease.metadata.name}"

    def _hold(self, lease: lease_models.DynamicSecretLease, held: schedule.Held | None) -> None:
        uid, namespace = self._uid(lease), lease.metadata.namespace or ""
        if held is None:
            self._held.pop(uid, None)
            self._holders.get(namespace, set()).discard(uid)
        else:
            self._held[uid] = held
            self._holders.setdefault(namespace, set()).add(uid)
        metrics.LEASES_ACTIVE.set(sum(len(v) for v in self._holders.values()))

    def held(self, lease: lease_models.DynamicSecretLease) -> schedule.Held | None:
        """What this object holds: remembered, else as its status says (after a restart)."""
        uid = self._uid(lease)
        if uid in self._held:
            return self._held[uid]
        st = lease.status
        created, expires = _epoch(st.lease_created_at), _epoch(st.expires_at)
        renewed = _epoch(st.last_renewed_at) or created
        if not st.lease_id or created is None or expires is None or renewed is None:
            return None
        term = lease.spec.ttl and models_base.parse_duration(lease.spec.ttl)
        held = schedule.Held(
            lease_id=st.lease_id,
            created_at=created,
            expires_at=expires,
            term_seconds=float(term or (expires - renewed)),
            max_ttl_seconds=parse_ms(st.max_ttl),
        )
        self._hold(lease, held)
        return held

    def forget(self, lease: lease_models.DynamicSecretLease) -> None:
        uid = self._uid(lease)
        self._hold(lease, None)
        self._failures.pop(uid, None)
        self._reported.pop(uid, None)
        self._generations.pop(uid, None)
        self._wakes.pop(uid, None)

    # --- spec edits ----------------------------------------------------------------------------
    def woken(self, lease: lease_models.DynamicSecretLease) -> asyncio.Event:
        """Set when the object's spec changed since its last step: the loop stops waiting."""
        return self._wake(self._uid(lease))

    def _wake(self, uid: str) -> asyncio.Event:
        return self._wakes.setdefault(uid, asyncio.Event())

    def noticed(self, body: Mapping[str, Any]) -> None:
        """A watch event of a DynamicSecretLease (raw body): wake its loop when its generation is
        not the one its last step worked with (a status-only change, our own patches included,
        keeps the generation)."""
        meta = body.get("metadata") or {}
        uid = meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"
        if uid in self._generations and meta.get("generation") != self._generations[uid]:
            self._wake(uid).set()

    # --- the step --------------------------------------------------------------------------------
    async def step(self, lease: lease_models.DynamicSecretLease) -> float:
        """Do what is due; return the seconds until the next step."""
        now = self._clock()
        uid = self._uid(lease)
        self.woken(lease).clear()
        self._generations[uid] = lease.metadata.generation
        held = self._with_spec(lease, self.held(lease))
        if held is not None and not await target.present(self._kube, lease):
            held = None  # the credentials are gone with their Secret: a new lease is needed
        plan = schedule.next_step(held, now=now, fraction=lease.spec.renew_at_fraction)
        try:
            if plan.action == "wait":
                if held is not None and self._edited_while_leased(lease):
                    await self._report(lease, held, "True", reasons.LEASED, self._ready_text(held))
                return min(max(plan.at - now, 0.0), MAX_WAIT_SECONDS)
            if plan.action == "renew" and held is not None:
                renewed = await self._renew(lease, held)
                if renewed:
                    return self._after_success(lease)
            await self._acquire(lease, replacing=held)
            return self._after_success(lease)
        except problems.Problem as problem:
            return await self._failed(lease, problem, held)

    def _with_spec(
        self, lease: lease_models.DynamicSecretLease, held: schedule.Held | None
    ) -> schedule.Held | None:
        """What is held, with the spec's ``ttl`` as the term of the next renewal (an edited ttl)."""
        term = lease.spec.ttl and models_base.parse_duration(lease.spec.ttl)
        if held is None or not term or float(term) == held.term_seconds:
            return held
        held = dataclasses.replace(held, term_seconds=float(term))
        self._hold(lease, held)
        return held

    def _edited_while_leased(self, lease: lease_models.DynamicSecretLease) -> bool:
        """A spec edit that needs no call: status still names the old generation, and Ready says
        Leased (a renewal being retried keeps its own message until it succeeds)."""
        if lease.status.observed_generation == lease.metadata.generation:
            return False
        return self._reported.get(self._uid(lease)) in (None, ("True", reasons.LEASED))

    def _after_success(self, lease: lease_models.DynamicSecretLease) -> float:
        self._failures.pop(self._uid(lease), None)
        held = self._held.get(self._uid(lease))
        if held is None:
            return MAX_WAIT_SECONDS
        at = schedule.renew_at(held, lease.spec.renew_at_fraction)
        return min(max(at - self._clock(), 0.0), MAX_WAIT_SECONDS)

    async def _session_call(self, lease: lease_models.DynamicSecretLease, operation: str, fn: Any) -> Any:
        """Resolve the identity (tenancy checks), then one call through its session; with a
        ``projectId``, its slug is looked up first through the same session (once, then cached)."""
        entry = await self._identities.resolve_ref(lease.spec.identity_ref, lease.metadata.namespace or "")
        session = await self._identities.session(entry)
        ref = lease.spec.dynamic_secret
        slug = ref.project_slug
        if slug is None:
            project_id = ref.project_id
            assert project_id is not None  # the model wants exactly one of them
            slug_key = (ident_mod.key_str(entry.key), project_id)
            slug = self._slugs.get(slug_key)
            if slug is None:
                try:
                    project: service_models.Project = await session.call(
                        lambda c: c.get_project_by_id(project_id)
                    )
                except service_errors.ServiceError as exc:
                    raise outcomes.from_service_error(exc, scope_text=f"project {project_id!r}") from None
                slug = project.slug or ""
                self._slugs[slug_key] = slug
        where = {"project_slug": slug, "environment_slug": ref.environment, "path": ref.path}
        self.calls += 1
        try:
            result = await session.call(lambda c: fn(c, where))
        except service_errors.ServiceError as exc:
            metrics.LEASE_OPERATIONS.labels(operation=operation, result=type(exc).__name__).inc()
            raise
        metrics.LEASE_OPERATIONS.labels(operation=operation, result="success").inc()
        return result

    async def _renew(self, lease: lease_models.DynamicSecretLease, held: schedule.Held) -> bool:
        """Renew; False when the service refused it or no longer knows the lease (then replace)."""
        ttl = f"{int(held.term_seconds)}s"
        try:
            renewed: service_leases.Lease = await self._session_call(
                lease, "renew", lambda c, where: c.renew_lease(held.lease_id, ttl=ttl, **where)
            )
        except (service_errors.ValidationError, service_errors.NotFound):
            return False
        except service_errors.ServiceError as exc:
            problem = outcomes.from_service_error(
                exc, scope_text=f"renewing the lease of {lease.spec.dynamic_secret.name!r}"
            )
            raise problems.Problem(
                reasons.LEASE_RENEW_FAILED,
                _scrub(problem.message, held),
                retriable=True,
                retry_after=problem.retry_after,
            ) from None
        new = schedule.Held(
            lease_id=held.lease_id,
            created_at=held.created_at,
            expires_at=renewed.expire_at.timestamp(),
            term_seconds=held.term_seconds,
            max_ttl_seconds=held.max_ttl_seconds,
        )
        self._hold(lease, new)
        renewals = (lease.status.renewals or 0) + 1
        await self._report(
            lease,
            new,
            "True",
            reasons.LEASED,
            self._ready_text(new),
            renewed_at=self._clock(),
            renewals=renewals,
        )
        return True

    async def _acquire(
        self, lease: lease_models.DynamicSecretLease, *, replacing: schedule.Held | None
    ) -> None:
        namespace = lease.metadata.namespace or ""
        holders = self._holders.get(namespace, set()) - {self._uid(lease)}
        if replacing is None and len(holders) >= self._settings.max_leases_per_namespace:
            raise problems.Problem(
                reasons.LEASE_LIMIT_REACHED,
                f"namespace {namespace!r} already holds {len(holders)} leases, the operator's limit"
                " (maxLeasesPerNamespace); this one waits until another is deleted",
                retriable=True,
            )
        ref = lease.spec.dynamic_secret
        try:
            created: service_leases.LeaseCreated = await self._session_call(
                lease,
                "acquire",
                lambda c, where: c.create_lease(ref.name, ttl=lease.spec.ttl_wire, **where),
            )
        except service_errors.ValidationError as exc:
            raise problems.Problem(
                reasons.LEASE_REFUSED, f"the service refused a lease of {ref.name!r}: {exc.message}"
            ) from None
        except service_errors.ServiceError as exc:
            raise outcomes.from_service_error(exc, scope_text=f"leasing {ref.name!r}") from None
        now = self._clock()
        held = schedule.Held(
            lease_id=created.lease.id,
            created_at=(created.lease.created_at.timestamp() if created.lease.created_at else now),
            expires_at=created.lease.expire_at.timestamp(),
            term_seconds=float(
                models_base.parse_duration(lease.spec.ttl)
                if lease.spec.ttl
                else created.lease.expire_at.timestamp() - now
            ),
            max_ttl_seconds=parse_ms(created.dynamic_secret.max_ttl if created.dynamic_secret else None),
        )
        try:
            await target.write(self._kube, lease, created.data)
        except problems.Problem:
            # Credentials nobody will ever see must not live on: give the lease back at once.
            await self._revoke(lease, held, quiet=True)
            raise
        self._hold(lease, held)
        taken = (lease.status.leases_taken or 0) + 1
        max_ttl = created.dynamic_secret.max_ttl if created.dynamic_secret else None
        await self._report(
            lease,
            held,
            "True",
            reasons.LEASED,
            self._ready_text(held),
            renewed_at=now,
            renewals=0,
            taken=taken,
            max_ttl=max_ttl,
        )
        if replacing is not None:
            await self._event(
                lease,
                "Normal",
                reasons.LEASE_REPLACED,
                "a new lease replaced one that could not be renewed; the Secret holds its credentials",
            )
            explicit = frozenset((t.kind, t.name) for t in lease.spec.rollout_restart_targets)
            # The restart annotation's value: a digest of the lease id, new per lease, no credential.
            digest = hashlib.sha256(held.lease_id.encode()).hexdigest()[:16]
            self._rollouts.changed(
                namespace,
                lease.metadata.name,
                lease.target_name,
                digest,
                explicit=explicit,
                regarding=self._ref(lease),
            )

    def _ready_text(self, held: schedule.Held) -> str:
        expiry = _time(held.expires_at).strftime(models_base.TIME_FORMAT)
        return f"the Secret holds the credentials of a lease that expires at {expiry}"

    # --- failures ----------------------------------------------------------------------------
    async def _failed(
        self, lease: lease_models.DynamicSecretLease, problem: problems.Problem, held: schedule.Held | None
    ) -> float:
        uid = self._uid(lease)
        failures = self._failures.get(uid, 0) + 1
        self._failures[uid] = failures
        delay = min(self._settings.lease_retry_seconds * 2 ** (failures - 1), MAX_RETRY_SECONDS)
        if problem.retry_after:
            delay = max(delay, problem.retry_after)
        message = _scrub(problem.message, held)
        live = held is not None and self._clock() < held.expires_at
        if live and held is not None:
            # Still leased: Ready stays True, the message says the renewal is being retried.
            delay = min(delay, max(held.expires_at - self._clock(), 1.0))
            await self._report(
                lease, held, "True", problem.reason, f"{self._ready_text(held)}; {message}; retried"
            )
        else:
            reason = reasons.LEASE_EXPIRED if held is not None else problem.reason
            if held is not None:
                self._hold(lease, None)
            await self._report(lease, None, "False", reason, message)
        return float(delay)

    # --- release (deletion) -------------------------------------------------------------------
    async def release(self, lease: lease_models.DynamicSecretLease) -> None:
        """At deletion: revoke under Revoke (raises a retriable ``problems.Problem`` on failure,
        keeping what is held for the retry)."""
        held = self.held(lease)
        if held is None:
            self.forget(lease)
            return
        if lease.spec.revocation_policy == "Retain":
            note = "deleted; the lease is left to expire (revocationPolicy Retain)"
            await self._event(lease, "Normal", reasons.LEASE_RETAINED, note)
        else:
            await self._revoke(lease, held, quiet=False)
            note = "deleted; the lease was revoked at the service"
            await self._event(lease, "Normal", reasons.LEASE_REVOKED, note)
        self.forget(lease)

    async def _revoke(
        self, lease: lease_models.DynamicSecretLease, held: schedule.Held, *, quiet: bool
    ) -> None:
        try:
            await self._session_call(lease, "revoke", lambda c, where: c.revoke_lease(held.lease_id, **where))
        except service_errors.NotFound:
            pass  # expired and revoked by the service already, or revoked by hand
        except (service_errors.ServiceError, problems.Problem) as exc:
            if quiet:
                log.warning(
                    "could not give back a lease whose Secret could not be written; it expires by itself"
                )
                return
            text = (
                exc.message if isinstance(exc, (service_errors.ServiceError, problems.Problem)) else str(exc)
            )
            await self._event(
                lease,
                "Warning",
                reasons.LEASE_REVOKE_FAILED,
                _scrub(f"revocation failed, retried: {text}", held),
            )
            raise problems.Problem(reasons.LEASE_REVOKE_FAILED, _scrub(text, held), retriable=True) from None
        self._hold(lease, None)

    # --- status and Events --------------------------------------------------------------------
    def _ref(self, lease: lease_models.DynamicSecretLease) -> kube_events.ObjectRef:
        return {
            "apiVersion": models_base.API_VERSION,
            "kind": lease_models.DYNAMIC_SECRET_LEASE_KIND,
            "name": lease.metadata.name,
            "namespace": lease.metadata.namespace,
            "uid": lease.metadata.uid or "",
        }

    async def _event(
        self,
        lease: lease_models.DynamicSecretLease,
        type_: Literal["Normal", "Warning"],
        reason: str,
        note: str,
    ) -> None:
        await kube_events.post(
            self._kube,
            regarding=self._ref(lease),
            reason=reason,
            note=note,
            type=type_,
            action="Lease",
            reporting_instance=self._instance,
        )

    async def _report(
        self,
        lease: lease_models.DynamicSecretLease,
        held: schedule.Held | None,
        ready: conditions.Status,
        reason: str,
        message: str,
        *,
        renewed_at: float | None = None,
        renewals: int | None = None,
        taken: int | None = None,
        max_ttl: str | None = None,
    ) -> None:
        """Patch status (what is held, the Ready condition); an Event when Ready's reason changes."""
        uid = self._uid(lease)
        previous = self._reported.get(uid)
        self._reported[uid] = (ready, reason)
        cond = conditions.set_condition(
            [c.model_dump(mode="json", by_alias=True) for c in lease.status.conditions],
            type_=READY,
            status=ready,
            reason=reason,
            message=message,
            observed_generation=lease.metadata.generation,
            now=conditions.now(),
        )
        status: dict[str, Any] = {
            "conditions": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in cond],
            "observedGeneration": lease.metadata.generation,
            "target": lease.target_name,
        }
        if held is not None:
            status |= {
                "leaseId": held.lease_id,
                "leaseCreatedAt": _time(held.created_at).strftime(models_base.TIME_FORMAT),
                "expiresAt": _time(held.expires_at).strftime(models_base.TIME_FORMAT),
                "renewAt": _time(schedule.renew_at(held, lease.spec.renew_at_fraction)).strftime(
                    models_base.TIME_FORMAT
                ),
            }
        elif ready == "False":
            status |= {
                "leaseId": None,
                "expiresAt": None,
                "renewAt": None,
                "leaseCreatedAt": None,
                "lastRenewedAt": None,
            }
        if renewed_at is not None:
            status["lastRenewedAt"] = _time(renewed_at).strftime(models_base.TIME_FORMAT)
        if renewals is not None:
            status["renewals"] = renewals
        if taken is not None:
            status["leasesTaken"] = taken
        if max_ttl is not None:
            status["maxTtl"] = max_ttl
        try:
            await kube_status.patch_status(
                self._kube,
                group=models_base.GROUP,
                version=models_base.VERSION,
                plural=lease_models.PLURAL,
                namespace=lease.metadata.namespace,
                name=lease.metadata.name,
                status=status,
            )
        except kube_errors.KubeError as exc:
            log.warning(
                "status patch of DynamicSecretLease %s/%s failed: %s",
                lease.metadata.namespace,
                lease.metadata.name,
                exc,
            )
        if (previous != (ready, reason) and previous is not None) or (previous is None and ready == "False"):
            await self._event(
                lease, "Normal" if ready == "True" else "Warning", reason, _scrub(message, held)
            )
        elif previous is None and ready == "True":
            await self._event(lease, "Normal", reason, "leased; the Secret holds the credentials")

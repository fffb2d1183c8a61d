"""Leader election with a coordination.k8s.io Lease, for replicas > 1.

Why our own and not kopf's peering: the SecretSync intake, scheduler, streams and rollouts are
our own tasks, which kopf's peering does not pause, so two replicas would both write. One Lease
decides who runs them; the others stay warm and take over when its renewals stop.

The rule is client-go's (``tools/leaderelection``): a replica judges the holder only by what it
has itself observed, on its own monotonic clock. It remembers the last Lease record it saw and
when it first saw it; a standby takes over only once that record has stayed the same for the
holder's ``leaseDurationSeconds`` of *its* time. The ``renewTime`` in the Lease is the holder's
wall clock, so comparing it with ours would let a standby whose clock runs ahead take over from
a healthy leader. The times written (``acquireTime``, ``renewTime``) stay wall-clock for people
and ``kubectl``; no decision reads them.

Safety, step by step: a leader's renewal that started at ``t`` is written after ``t``, so a
standby observes it after ``t`` and cannot take over before ``t + lease_duration``. The leader
gives up at ``t + renew_deadline`` (earlier) when no later renewal succeeded. Every write
carries the resourceVersion it was decided on, so of two standbys taking over at once, one gets
409 Conflict. Left over (as in client-go): a clock that runs faster than another's by more than
``lease_duration / renew_deadline``, which no wall-clock rule protects against either.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from secretferry.kube import errors
from secretferry.kube.client import Kube

log = logging.getLogger(__name__)

# A standby waits between one and 1.5 retry periods between polls, so standbys started together
# do not poll in step. client-go allows up to 2.2; half a period keeps the takeover within
# lease + 2 * 1.5 retry periods of the last renewal (21 s with the default settings).
_STANDBY_JITTER_FRACTION = 0.5
# client-go writes a released Lease with a one-second duration, so a reader that still judges by
# renewTime (an older secretferry during an upgrade) takes it over after a second as well.
_RELEASED_LEASE_SECONDS = 1

Callback = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Timings:
    """See the ``leader_*`` settings: lease_duration > renew_deadline > retry_period."""

    lease_duration_seconds: int
    renew_deadline_seconds: float
    retry_period_seconds: float


@dataclass(frozen=True)
class Record:
    """The part of a Lease that says who holds it; any change to it counts as a sign of life."""

    holder: str
    lease_duration_seconds: int
    acquire_time: str
    renew_time: str
    transitions: int

    @classmethod
    def of(cls, lease: dict[str, Any]) -> Record:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=str(spec.get("acquireTime") or ""),
            renew_time=str(spec.get("renewTime") or ""),
            transitions=int(spec.get("leaseTransitions") or 0),
        )


def micro_time(moment: datetime) -> str:
    """A MicroTime as the apiserver writes it (always UTC, microseconds, ``Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Elector:
    """One replica's candidacy for one Lease. ``run`` it in a task; ``release`` on shutdown."""

    def __init__(
        self,
        kube: Kube,
        *,
        namespace: str,
        name: str,
        identity: str,
        timings: Timings,
        wall: Callable[[], datetime] = _utcnow,
        jitter: Callable[[], float] = random.random,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """``annotations``: written on the Lease with every claim and renewal, so what the holder
        advertises (the webhook receiver's address, ``reconcile.webhook_relay``) always belongs to
        the holder named beside it; removed on release."""
        self._kube = kube
        self._annotations = dict(annotations or {})
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace, safe='')}/leases"
        self._path = f"{self._collection}/{quote(name, safe='')}"
        self._namespace, self._name, self._identity = namespace, name, identity
        self._timings = timings
        self._wall = wall  # only for the timestamps written, never for a decision
        self._jitter = jitter
        self._observed: Record | None = None
        self._observed_at = 0.0  # event-loop (monotonic) time the observed record was first seen
        self._lease: dict[str, Any] | None = None  # the last Lease read or written: its resourceVersion
        self.leading = False

    @property
    def holder(self) -> str:
        """The holder last observed; empty before the first read or after a release."""
        return self._observed.holder if self._observed else ""

    def holder_annotation(self, key: str) -> str | None:
        """An annotation of the Lease last observed, if it has a holder other than us (what the
        leader advertises, as a standby last saw it: at most a retry period old)."""
        if self._lease is None or self.holder in ("", self._identity):
            return None
        value = ((self._lease.get("metadata") or {}).get("annotations") or {}).get(key)
        return str(value) if value is not None else None

    async def run(self, *, on_started_leading: Callback, on_stopped_leading: Callback) -> None:
        """Wait for the Lease, lead, and return once leadership is lost.

        ``on_stopped_leading`` runs when a renewal misses its deadline or another holder is seen,
        which is before any standby can take over (see the module docstring), and when starting
        or renewing fails unexpectedly, since nothing would renew the Lease any more. Not when the
        task is cancelled: that is the caller shutting down (and releasing the Lease once its work
        stopped).
        """
        renewed_at = await self._acquire()
        self.leading = True
        log.info("became the leader of Lease %s/%s as %s", self._namespace, self._name, self._identity)
        try:
            await on_started_leading()
            await self._renew(renewed_at)
        except Exception:
            log.exception("leading Lease %s/%s failed; stepping down", self._namespace, self._name)
        self.leading = False
        await on_stopped_leading()

    async def release(self) -> bool:
        """Hand the Lease over at once, if we hold it: standbys take an empty holder without waiting
        (client-go's ReleaseOnCancel). Call it only after our work has stopped. True if released."""
        if self._observed is not None and self._observed.holder != self._identity:
            return False  # a standby: no request, so a shutdown does not wait for an unreachable apiserver
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._timings.renew_deadline_seconds):
                lease = await self._kube.request("GET", self._path)
                if Record.of(lease).holder != self._identity:
                    return False
                now = micro_time(self._wall())
                spec = dict(lease.get("spec") or {})
                spec.pop("holderIdentity", None)
                spec.update(leaseDurationSeconds=_RELEASED_LEASE_SECONDS, acquireTime=now, renewTime=now)
                meta = dict(lease.get("metadata") or {})
                if meta.get("annotations"):
                    meta["annotations"] = {
                        k: v for k, v in meta["annotations"].items() if k not in self._annotations
                    }
                body = {**lease, "metadata": meta, "spec": spec}
                self._observe(body, await self._write("PUT", body), loop)
        except (errors.KubeError, TimeoutError) as exc:  # it runs out by itself; standbys only wait longer
            log.warning("could not release Lease %s/%s: %s", self._namespace, self._name, _why(exc))
            return False
        self.leading = False
        log.info("released Lease %s/%s", self._namespace, self._name)
        return True

    # --- the two loops ----------------------------------------------------------------------------
    async def _acquire(self) -> float:
        """Poll until we hold the Lease; returns the loop time the winning attempt started at."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                # bounded, so a hung request cannot stall the polls; an unanswered write that did
                # land shows up as our own holder on the next read, and is renewed from there
                async with asyncio.timeout(self._timings.renew_deadline_seconds):
                    if await self._try():
                        return started
            except (errors.KubeError, TimeoutError) as exc:
                log.warning("leader election (standby): %s", _why(exc))
            retry = self._timings.retry_period_seconds
            await asyncio.sleep(retry * (1 + _STANDBY_JITTER_FRACTION * self._jitter()))

    async def _renew(self, renewed_at: float) -> None:
        """Renew every retry period; return when no renewal succeeded for ``renew_deadline``
        seconds since the start of the last good one, or when someone else holds the Lease."""
        loop = asyncio.get_running_loop()
        next_try = renewed_at + self._timings.retry_period_seconds
        while True:
            deadline = renewed_at + self._timings.renew_deadline_seconds
            await asyncio.sleep(max(0.0, min(next_try, deadline) - loop.time()))
            if loop.time() >= deadline:
                log.error(
                    "could not renew Lease %s/%s for %.1f s; stepping down",
                    self._namespace,
                    self._name,
                    loop.time() - renewed_at,
                )
                return
            started = loop.time()
            try:
                async with asyncio.timeout_at(deadline):  # past the deadline an answer is no use
                    renewed = await self._try()
            except (errors.KubeError, TimeoutError) as exc:
                log.warning("leader election (renewing): %s", _why(exc))
                renewed = False
            if renewed:
                renewed_at = started
            elif self.holder not in ("", self._identity):
                log.error(
                    "Lease %s/%s is now held by %s; stepping down", self._namespace, self._name, self.holder
                )
                return
            next_try = loop.time() + self._timings.retry_period_seconds

    # --- one attempt --------------------------------------------------------------------------------
    async def _try(self) -> bool:
        """One attempt to take or renew the Lease (client-go's tryAcquireOrRenew)."""
        loop = asyncio.get_running_loop()
        now = micro_time(self._wall())
        if self.leading and self._lease is not None:
            # fast path: the Lease as we last wrote it. Any refusal falls back to reading it first,
            # as client-go does: a 409 means it changed, a 404 that someone deleted it (then the
            # slow path creates it again instead of renewing in vain until the deadline).
            try:
                body = self._claim(self._lease, now)
                self._observe(body, await self._write("PUT", body), loop)
                return True
            except errors.KubeError as exc:
                log.debug(
                    "leader election: renewing %s/%s in place failed (%s)",
                    self._namespace,
                    self._name,
                    _why(exc),
                )
        try:
            lease = await self._kube.request("GET", self._path)
        except errors.NotFound:
            body = self._claim({"metadata": {"name": self._name, "namespace": self._namespace}}, now)
            try:
                self._observe(body, await self._write("POST", body), loop)
            except errors.Conflict:  # another candidate created it first
                return False
            return True
        self._observe(lease, lease, loop)
        holder = Record.of(lease).holder
        if holder and holder != self._identity and not self._expired(loop):
            return False
        body = self._claim(lease, now)
        try:
            self._observe(body, await self._write("PUT", body), loop)
        except errors.Conflict:  # changed since our read: someone renewed it or won the race
            return False
        return True

    def _claim(self, lease: dict[str, Any], now: str) -> dict[str, Any]:
        """The Lease with us as its holder, renewed now: kept acquireTime if we held it already."""
        spec = dict(lease.get("spec") or {})
        if spec.get("holderIdentity") != self._identity:
            # every change of holder counts (a released Lease's too, as in client-go); a new one starts at 0
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if spec else 0)
            spec["acquireTime"] = now
        spec.update(
            holderIdentity=self._identity,
            leaseDurationSeconds=self._timings.lease_duration_seconds,
            renewTime=now,
        )
        spec.setdefault("acquireTime", now)
        meta = dict(lease.get("metadata") or {})
        if self._annotations:
            meta["annotations"] = {**(meta.get("annotations") or {}), **self._annotations}
        return {
            **lease,
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": spec,
        }

    async def _write(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        path = self._collection if method == "POST" else self._path
        return await self._kube.request(method, path, body=body)

    def _observe(self, sent: dict[str, Any], answer: dict[str, Any], loop: asyncio.AbstractEventLoop) -> None:
        """Remember the Lease as it now stands, and when its record first looked this way to us."""
        lease = answer if answer.get("spec") is not None else sent
        record = Record.of(lease)
        if record != self._observed:
            self._observed, self._observed_at = record, loop.time()
        self._lease = lease

    def _expired(self, loop: asyncio.AbstractEventLoop) -> bool:
        """The holder's record has not changed for its lease duration, on our clock."""
        declared = self._observed.lease_duration_seconds if self._observed else 0
        duration = declared or self._timings.lease_duration_seconds  # the holder's own, as client-go
        return loop.time() - self._observed_at >= duration


def _why(exc: Exception) -> str:
    return "no answer in time" if isinstance(exc, TimeoutError) else str(exc)

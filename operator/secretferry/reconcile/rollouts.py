"""Rollout restarts after a Secret's data really changed — and only then.

Why so careful: restarting workloads is the costliest thing an operator can do to its users.
A restart is asked for only when a write changed the Secret's data, as the write found it (so
never on a first sync, a no-op resync, an operator restart, or a spec edit that re-keys the data
HMAC but leaves the data alone; see sync.py), and each workload is
restarted at most once per cooldown: changes inside the cooldown coalesce into one restart at
its end, carrying the newest HMAC.

The restart itself is a pod-template annotation patch; the value is the data HMAC, so patching
the same value twice is a no-op for the Deployment controller.

Finding the consumers lists the namespace's workloads. Changes are planned per namespace in
batches: one event often rewrites dozens of Secrets of one namespace, and one listing (started
after all of those writes, so it sees every workload that could hold old data) serves them all.

An install may turn restarts off (``SECRETFERRY_ROLLOUTS_ENABLED=false``, the chart then grants
no rights on workloads): nothing is planned, listed or patched, so no call is refused by RBAC.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from secretferry import logfields, metrics
from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import events as kube_events
from secretferry.kube import workloads
from secretferry.models import secretsync as sync_models

log = logging.getLogger(__name__)
WorkloadKey = tuple[str, str, str]  # (kind, namespace, name)


def restart_annotation(secret_name: str) -> str:
    """One annotation per consumed Secret, so two Secrets of one workload do not overwrite each other."""
    name = f"restart-{secret_name}"
    return f"secretferry.io/{name[:63].rstrip('-.')}"


@dataclass(frozen=True)
class _Change:
    secret_name: str
    data_hmac: str
    explicit: frozenset[tuple[str, str]]
    """``spec.rolloutRestartTargets`` as (kind, name)."""
    regarding: kube_events.ObjectRef


@dataclass
class _Pending:
    annotations: dict[str, str] = field(default_factory=dict)
    reasons: set[str] = field(default_factory=set)
    regarding: kube_events.ObjectRef | None = None
    task: asyncio.Task[None] | None = None


class RolloutManager:
    def __init__(
        self,
        kube: kube_client.Kube,
        *,
        cooldown_seconds: float,
        instance: str,
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube = kube
        self._enabled = enabled
        self._cooldown = cooldown_seconds
        self._instance = instance
        self._clock = clock
        self._last: dict[WorkloadKey, float] = {}
        self._pending: dict[WorkloadKey, _Pending] = {}
        self._batches: dict[str, list[_Change]] = {}
        self._planners: dict[str, asyncio.Task[None]] = {}
        self.restarts = 0

    def data_changed(
        self, sync: sync_models.SecretSync, secret_name: str, data_hmac: str, regarding: kube_events.ObjectRef
    ) -> None:
        """Called after a write that changed a Secret's data; finds and schedules the restarts."""
        if not self._enabled:
            return
        namespace = sync.metadata.namespace or ""
        explicit = frozenset((t.kind, t.name) for t in sync.spec.rollout_restart_targets)
        self._batches.setdefault(namespace, []).append(_Change(secret_name, data_hmac, explicit, regarding))
        if namespace not in self._planners:
            self._planners[namespace] = asyncio.create_task(self._plan_namespace(namespace))

    async def _plan_namespace(self, namespace: str) -> None:
        """Plan batch after batch: changes that arrive during a listing wait for the next one."""
        try:
            while batch := self._batches.pop(namespace, None):
                await self._plan(namespace, batch)
        finally:
            del self._planners[namespace]

    async def _plan(self, namespace: str, batch: list[_Change]) -> None:
        found: dict[str, list[tuple[workloads.WorkloadKind, str]]] = {}
        try:
            found = await workloads.consumers(
                self._kube, namespace=namespace, secret_names={c.secret_name for c in batch}
            )
        except kube_errors.KubeError as exc:
            names = ", ".join(sorted({c.secret_name for c in batch}))
            log.warning(
                "cannot list workloads in %s consuming %s: %s",
                namespace,
                names,
                exc,
                extra={logfields.NAMESPACE: namespace},
            )
        for change in batch:  # in order: a later change of the same Secret carries the newer HMAC
            targets = set(change.explicit) | set(found.get(change.secret_name, ()))
            for kind, name in sorted(targets):
                self._schedule(
                    (kind, namespace, name),
                    restart_annotation(change.secret_name),
                    change.data_hmac,
                    change.secret_name,
                    change.regarding,
                )

    def _schedule(
        self,
        key: WorkloadKey,
        annotation: str,
        value: str,
        secret_name: str,
        regarding: kube_events.ObjectRef,
    ) -> None:
        pending = self._pending.setdefault(key, _Pending())
        pending.annotations[annotation] = value
        pending.reasons.add(secret_name)
        pending.regarding = regarding
        if pending.task is not None:
            return  # coalesced into the restart already waiting for the cooldown
        wait = max(0.0, self._last.get(key, -1e18) + self._cooldown - self._clock())
        pending.task = asyncio.create_task(self._restart_after(key, wait))

    async def _restart_after(self, key: WorkloadKey, wait: float) -> None:
        if wait > 0:
            await asyncio.sleep(wait)
        pending = self._pending.pop(key)
        kind, namespace, name = key
        self._last[key] = self._clock()
        try:
            await workloads.restart(
                self._kube,
                kind=kind,  # type: ignore[arg-type]  # kinds come from the CRD's enum
                namespace=namespace,
                name=name,
                annotations=pending.annotations,
            )
        except kube_errors.NotFound:
            fields = logfields.about(kind, namespace, name)
            log.info("rollout target %s %s/%s does not exist; skipped", kind, namespace, name, extra=fields)
            return
        except kube_errors.KubeError as exc:
            fields = logfields.about(kind, namespace, name)
            log.warning("rollout restart of %s %s/%s failed: %s", kind, namespace, name, exc, extra=fields)
            return
        self.restarts += 1
        metrics.ROLLOUTS.labels(kind=kind).inc()
        if pending.regarding is None:
            return
        await kube_events.post(
            self._kube,
            regarding=pending.regarding,
            reason="RolloutRestarted",
            note=f"restarted {kind} {name}: data of Secret(s) {', '.join(sorted(pending.reasons))} changed",
            type="Normal",
            action="Restart",
            reporting_instance=self._instance,
        )

    async def close(self) -> None:
        tasks = list(self._planners.values()) + [p.task for p in self._pending.values() if p.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

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

Whose restart it is: the operator may patch every workload of a served namespace; the author
of a SecretSync (a tenant, see README "Security model") may not. So a workload is restarted
only when its own annotations, which only who may write the workload can set, admit the change
(``refusal``): ``secretferry.io/restart-on`` listing the SecretSync by name (what
``spec.rolloutRestartTargets`` needs, like ``merge-from`` for a Merge target), or
``secretferry.io/auto-reload: "true"`` on a workload whose pods read the changed Secret (its
owner chose that Secret's data as the workload's input already). This is checked on the
workload read just before the patch, and the patch carries that read's resourceVersion, so an
opt-in taken back meanwhile stops it. A refusal is a Warning Event on the SecretSync and a log
line naming the missing annotation; it counts against the cooldown like a restart.

An install may turn restarts off (``SECRETFERRY_ROLLOUTS_ENABLED=false``, the chart then grants
no rights on workloads): nothing is planned, listed or patched, so no call is refused by RBAC.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from secretferry import logfields, metrics
from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import events as kube_events
from secretferry.kube import workloads
from secretferry.models import secretsync as sync_models

log = logging.getLogger(__name__)
WorkloadKey = tuple[str, str, str]  # (kind, namespace, name)


_PATCH_ATTEMPTS = 2  # a Conflict means the workload changed since it was read: read it once more


def restart_annotation(secret_name: str) -> str:
    """One annotation per consumed Secret, so two Secrets of one workload do not overwrite each other."""
    name = f"restart-{secret_name}"
    return f"secretferry.io/{name[:63].rstrip('-.')}"


def _listed(annotations: Mapping[str, str], key: str) -> set[str]:
    return {name.strip() for name in annotations.get(key, "").split(",")} - {""}


def refusal(workload: workloads.Workload, *, sync_name: str, secret_name: str) -> str | None:
    """Why SecretSync ``sync_name``'s change of Secret ``secret_name`` may not restart
    ``workload``, or None when the workload's owner admitted it. Exact names, no wildcard: a
    wildcard would admit every SecretSync anyone in the namespace can create."""
    if sync_name in _listed(workload.annotations, workloads.RESTART_ON_ANNOTATION):
        return None
    auto = workload.annotations.get(workloads.AUTO_RELOAD_ANNOTATION) == "true"
    if auto and workloads.references_secret(workload.pod_spec, secret_name):
        return None
    return _not_opted_in(workload.kind, workload.name, sync_name=sync_name, secret_name=secret_name)


def _not_opted_in(kind: str, name: str, *, sync_name: str, secret_name: str) -> str:
    """The same words for a workload that did not opt in and one that does not exist: a
    SecretSync's author must not learn through us which workloads exist."""
    return (
        f"{kind} {name} does not exist or has not opted in: it is restarted for SecretSync "
        f"{sync_name!r} only when annotated {workloads.RESTART_ON_ANNOTATION} listing {sync_name!r}, "
        f'or {workloads.AUTO_RELOAD_ANNOTATION}: "true" while its pods read Secret {secret_name!r} '
        f"(someone who may edit that {kind} sets it); not restarted"
    )


@dataclass(frozen=True)
class _Change:
    sync_name: str
    secret_name: str
    data_hmac: str
    explicit: frozenset[tuple[str, str]]
    """``spec.rolloutRestartTargets`` as (kind, name)."""
    regarding: kube_events.ObjectRef


@dataclass(frozen=True)
class _Request:
    """One SecretSync's ask to restart a workload for one Secret, checked when the restart is due."""

    sync_name: str
    secret_name: str
    value: str
    regarding: kube_events.ObjectRef


@dataclass
class _Pending:
    requests: dict[tuple[str, str], _Request] = field(default_factory=dict)
    """(pod-template annotation, SecretSync name) → the newest request."""
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
        explicit = frozenset((t.kind, t.name) for t in sync.spec.rollout_restart_targets)
        self.changed(
            sync.metadata.namespace or "",
            sync.metadata.name,
            secret_name,
            data_hmac,
            explicit=explicit,
            regarding=regarding,
        )

    def changed(
        self,
        namespace: str,
        owner_name: str,
        secret_name: str,
        data_hmac: str,
        *,
        explicit: frozenset[tuple[str, str]],
        regarding: kube_events.ObjectRef,
    ) -> None:
        """``data_changed`` for any kind that writes a Secret and lists rolloutRestartTargets (a
        DynamicSecretLease too): ``owner_name`` is the name workloads opt in to with
        ``secretferry.io/restart-on``, under the same rules."""
        if not self._enabled:
            return
        change = _Change(owner_name, secret_name, data_hmac, explicit, regarding)
        self._batches.setdefault(namespace, []).append(change)
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
            request = _Request(change.sync_name, change.secret_name, change.data_hmac, change.regarding)
            for kind, name in sorted(targets):
                self._schedule((kind, namespace, name), restart_annotation(change.secret_name), request)

    def _schedule(self, key: WorkloadKey, annotation: str, request: _Request) -> None:
        pending = self._pending.setdefault(key, _Pending())
        slot = (annotation, request.sync_name)
        pending.requests.pop(slot, None)  # re-inserted last: the newest request of an annotation wins
        pending.requests[slot] = request
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
        fields = logfields.about(kind, namespace, name)
        try:
            for attempt in range(_PATCH_ATTEMPTS):
                workload = await workloads.read(
                    self._kube,
                    kind=kind,  # type: ignore[arg-type]  # kinds come from the CRD's enum
                    namespace=namespace,
                    name=name,
                )
                admitted, refused = _split(workload, pending.requests.values())
                if not admitted:
                    break
                try:
                    await workloads.restart(
                        self._kube,
                        kind=workload.kind,
                        namespace=namespace,
                        name=name,
                        annotations=_annotations(pending, admitted),
                        resource_version=workload.resource_version,
                    )
                except kube_errors.Conflict:
                    if attempt + 1 < _PATCH_ATTEMPTS:
                        continue
                    raise
                break
        except kube_errors.NotFound:
            admitted = []
            refused = [
                (r, _not_opted_in(kind, name, sync_name=r.sync_name, secret_name=r.secret_name))
                for r in pending.requests.values()
            ]
        except kube_errors.KubeError as exc:
            log.warning("rollout restart of %s %s/%s failed: %s", kind, namespace, name, exc, extra=fields)
            return
        for request, why in refused:
            await self._refused(key, request, why)
        if not admitted:
            return
        self.restarts += 1
        metrics.ROLLOUTS.labels(kind=kind).inc()
        secrets = ", ".join(sorted({r.secret_name for r in admitted}))
        await kube_events.post(
            self._kube,
            regarding=admitted[-1].regarding,
            reason="RolloutRestarted",
            note=f"restarted {kind} {name}: data of Secret(s) {secrets} changed",
            type="Normal",
            action="Restart",
            reporting_instance=self._instance,
        )

    async def _refused(self, key: WorkloadKey, request: _Request, why: str) -> None:
        """Say on the SecretSync, and in the log, which annotation the workload lacks."""
        kind, namespace, name = key
        fields = logfields.about(kind, namespace, name)
        log.info(
            "rollout restart for SecretSync %s/%s refused: %s",
            namespace,
            request.sync_name,
            why,
            extra=fields,
        )
        await kube_events.post(
            self._kube,
            regarding=request.regarding,
            reason="RolloutNotOptedIn",
            note=why,
            type="Warning",
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


def _split(
    workload: workloads.Workload, requests: Iterable[_Request]
) -> tuple[list[_Request], list[tuple[_Request, str]]]:
    """The requests the workload admits (in order), and the refused ones with why."""
    admitted: list[_Request] = []
    refused: list[tuple[_Request, str]] = []
    for request in requests:
        why = refusal(workload, sync_name=request.sync_name, secret_name=request.secret_name)
        if why is None:
            admitted.append(request)
        else:
            refused.append((request, why))
    return admitted, refused


def _annotations(pending: _Pending, admitted: list[_Request]) -> dict[str, str]:
    """Pod-template annotation → newest admitted value."""
    chosen = {id(r) for r in admitted}
    return {annotation: r.value for (annotation, _), r in pending.requests.items() if id(r) in chosen}

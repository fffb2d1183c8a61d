"""A ClusterSecretSync's status: counts over its namespaces, the first failures, Ready, an Event.

Why counted here and not per pass: a ClusterSecretSync may cover a thousand namespaces, each
reconciled by the SecretSync pass as its own entry (cluster_syncs.py). Each pass that changes an
entry's status says so (``due``, through ``Deps.on_cluster_report``); the counts are made from
the entries' in-memory statuses at most every ``_COALESCE_SECONDS`` per ClusterSecretSync, and
patched only when they differ from the status last written. A thousand namespaces syncing at
start-up are then a handful of patches, not a thousand.

What status shows: how many namespaces are selected, ready and failed, and the first
``MAX_FAILURES_SHOWN`` failing namespaces (sorted) with the reason and message a SecretSync there
would show. Those messages name keys, kinds and names, never values (sync.py's rule), and the
object is cluster-scoped: only who may read ClusterSecretSyncs (an admin) reads them.

Events: on a Ready transition only (False: Warning; back to True: Normal), through the process's
Event correlator (kube/events.py), which rate-limits them per object. They name counts, not
namespaces (``event_note``): a cluster-scoped object's Events live in namespace ``default``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from secretferry import metrics
from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import events as kube_events
from secretferry.kube import status as kube_status
from secretferry.models import base as models_base
from secretferry.models import clustersecretsync as css_models
from secretferry.reconcile import conditions, problems, reasons, state

log = logging.getLogger(__name__)
# Counts are made at most this often per ClusterSecretSync: a burst of namespace passes (start-up,
# a change at the service reaching a thousand namespaces) is one status patch, and status still
# follows within well under a second.
_COALESCE_SECONDS: Final = 0.25
_STATES: Final = ("ready", "failed", "pending")


@dataclass
class ClusterRecord:
    """One ClusterSecretSync as the operator keeps it (the intake's; counted here)."""

    name: str
    uid: str
    generation: int | None
    status: dict[str, Any]
    """As last read or written: the baseline for "does status need a patch?"."""
    namespaces: set[str] = field(default_factory=set)
    """The namespaces selected now (each has an entry under ``state.cluster_key``)."""
    invalid: str | None = None
    """Why the spec does not parse; then no namespace is selected."""
    force_annotation: str | None = None
    """``secretferry.io/force-sync`` as last seen: a new value forces a read in every namespace."""


@dataclass(frozen=True, slots=True)
class Summary:
    ready: int
    failed: list[css_models.NamespaceFailure]
    pending: int


def summarize(record: ClusterRecord, syncs: Mapping[state.SyncKey, state.SyncEntry]) -> Summary:
    """Count the record's namespaces by the Ready condition their entries hold now."""
    ready, pending = 0, 0
    failed: list[css_models.NamespaceFailure] = []
    for namespace in sorted(record.namespaces):
        entry = syncs.get(state.cluster_key(namespace, record.name))
        cond = conditions.find(entry.status.get("conditions") or [], reasons.READY) if entry else None
        if cond is None:
            pending += 1
        elif cond.get("status") == "True":
            ready += 1
        else:
            failed.append(
                css_models.NamespaceFailure(
                    namespace=namespace,
                    reason=str(cond.get("reason", "")),
                    message=str(cond.get("message", ""))[: problems.NOTE_MAX_CHARS],
                )
            )
    return Summary(ready=ready, failed=failed, pending=pending)


def ready_condition(record: ClusterRecord, summary: Summary) -> tuple[conditions.Status, str, str]:
    """(status, reason, message) of Ready for these counts."""
    if record.invalid is not None:
        return "False", reasons.INVALID_SPEC, record.invalid
    selected = len(record.namespaces)
    if summary.failed:
        first = ", ".join(f"{f.namespace} ({f.reason})" for f in summary.failed[:3])
        more = f" and {len(summary.failed) - 3} more" if len(summary.failed) > 3 else ""
        return (
            "False",
            reasons.NAMESPACES_FAILED,
            f"{len(summary.failed)} of {selected} namespaces fail: {first}{more}; see status.failures",
        )
    if summary.pending:
        return "Unknown", reasons.PROGRESSING, f"{summary.ready} of {selected} namespaces synced so far"
    if not selected:
        return "True", reasons.NO_NAMESPACES_SELECTED, "the selection matches no namespace served"
    return "True", reasons.SYNCED, f"all {selected} selected namespaces hold the target"


def event_note(record: ClusterRecord, summary: Summary, *, reason: str, message: str) -> str:
    """An Event's note: counts only. A cluster-scoped object's Events are in namespace
    ``default``, which people other than cluster admins may be able to read; which namespaces
    fail, and why, stays in the ClusterSecretSync's status."""
    if reason == reasons.NAMESPACES_FAILED:
        return (
            f"{len(summary.failed)} of {len(record.namespaces)} selected namespaces fail;"
            " see the ClusterSecretSync's status.failures"
        )
    return message


def regarding(record: ClusterRecord) -> kube_events.ObjectRef:
    return {
        "apiVersion": models_base.API_VERSION,
        "kind": css_models.CLUSTER_SECRET_SYNC_KIND,
        "name": record.name,
        "uid": record.uid,
    }


class ClusterReport:
    """Counts and patches the status of every ClusterSecretSync whose namespaces changed."""

    def __init__(
        self,
        *,
        kube: kube_client.Kube,
        syncs: Mapping[state.SyncKey, state.SyncEntry],
        records: Mapping[str, ClusterRecord],
        instance: str,
    ) -> None:
        self._kube = kube
        self._syncs = syncs
        self._records = records
        self._instance = instance
        self._due: set[str] = set()
        self._wake = asyncio.Event()

    def due(self, name: str) -> None:
        """ClusterSecretSync ``name``'s counts may have changed: recount soon."""
        self._due.add(name)
        self._wake.set()

    def entry_reported(self, entry: state.SyncEntry) -> None:
        """``Deps.on_cluster_report``: an expanded entry's status changed."""
        name = state.cluster_name(entry.key)
        if name is not None:
            self.due(name)

    def forget(self, name: str) -> None:
        """The ClusterSecretSync is gone: its series go too."""
        self._due.discard(name)
        for each in _STATES:
            with contextlib.suppress(KeyError):
                metrics.CLUSTER_SYNC_NAMESPACES.remove(name, each)

    async def loop(self) -> None:
        """Forever: wait for a due ClusterSecretSync, let a burst settle, report every due one."""
        while True:
            await self._wake.wait()
            await asyncio.sleep(_COALESCE_SECONDS)
            self._wake.clear()
            due, self._due = self._due, set()
            for name in sorted(due):
                record = self._records.get(name)
                if record is not None:
                    await self.report(record)

    async def report(self, record: ClusterRecord) -> None:
        """Patch ``record``'s status when the counts differ; an Event on a Ready transition."""
        summary = summarize(record, self._syncs)
        for each, count in zip(_STATES, (summary.ready, len(summary.failed), summary.pending), strict=True):
            metrics.CLUSTER_SYNC_NAMESPACES.labels(record.name, each).set(count)
        ready, reason, message = ready_condition(record, summary)
        before = record.status
        status = css_models.ClusterSecretSyncStatus(
            conditions=conditions.set_condition(
                before.get("conditions") or [],
                type_=reasons.READY,
                status=ready,
                reason=reason,
                message=message,
                observed_generation=record.generation,
                now=conditions.now(),
                stalled_override=_namespaces_stalled(reason, summary),
            ),
            observed_generation=record.generation,
            selected_namespaces=len(record.namespaces),
            ready_namespaces=summary.ready,
            failed_namespaces=len(summary.failed),
            failures=summary.failed[: css_models.MAX_FAILURES_SHOWN],
        )
        patch = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        if all(before.get(k) == v for k, v in patch.items()):
            return
        try:
            await kube_status.patch_status(
                self._kube,
                group=models_base.GROUP,
                version=models_base.VERSION,
                plural=css_models.PLURAL,
                namespace=None,
                name=record.name,
                status=patch,
            )
        except kube_errors.NotFound:
            return  # deleted meanwhile: the intake forgets it
        except kube_errors.KubeError as exc:
            log.warning("status of ClusterSecretSync %s not written: %s", record.name, exc)
            self.due(record.name)  # counted again at the next change or the next due
            return
        record.status = {**before, **patch}
        if ready != "Unknown" and conditions.transitioned(
            before.get("conditions") or [], patch["conditions"], reasons.READY
        ):
            note = event_note(record, summary, reason=reason, message=message)
            await self._announce(record, ok=ready == "True", reason=reason, message=note)

    async def _announce(self, record: ClusterRecord, *, ok: bool, reason: str, message: str) -> None:
        await kube_events.post(
            self._kube,
            regarding=regarding(record),
            reason=reason,
            note=message[: problems.NOTE_MAX_CHARS],
            type="Normal" if ok else "Warning",
            action="Sync",
            reporting_instance=self._instance,
        )
        if ok:
            log.info("ClusterSecretSync %s is Ready: %s", record.name, message)
        else:
            log.warning("ClusterSecretSync %s is not Ready (%s): %s", record.name, reason, message)


def _namespaces_stalled(reason: str, summary: Summary) -> bool | None:
    """``NamespacesFailed`` is kstatus' Stalled only if some namespace fails for a reason only a
    change fixes: a service down in every namespace is retried, as it is for a SecretSync. Any other
    reason (``InvalidSpec``) speaks for itself (None)."""
    if reason != reasons.NAMESPACES_FAILED:
        return None
    return any(conditions.stalled("False", f.reason) for f in summary.failed)

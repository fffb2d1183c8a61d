"""ClusterSecretSyncs in: our LIST+WATCH, the namespaces they select, one entry per namespace.

Why in memory and not child SecretSync objects: a child in a tenant's namespace is one the tenant
(with ``edit`` there) could change, and what it says would be written. Each selected namespace
gets an entry in the controller's SecretSync table under ``state.cluster_key`` (no SecretSync can
have that key), holding the SecretSync the ClusterSecretSync stands for there
(cluster_selection.expanded_body) and its origin (desired.ClusterOrigin). The work queue, the
scope index and the pass are the SecretSyncs' own: a scope read by a ClusterSecretSync and by
SecretSyncs is listed once for all of them, and every guard applies (a Secret that exists and is
not ours is a TargetConflict for that namespace; nothing is overwritten).

What moves the selection: the ClusterSecretSync itself (created, edited, deleted) and the
namespace watch (identity_intake.py feeds ``namespace_changed``: a namespace created, relabelled
or deleted). A namespace no longer selected loses its entry, and with creationPolicy Owner the
target there too, if it is still ours (our sync label and the ClusterSecretSync's owner
reference; the uid precondition deletes only that incarnation); Orphan leaves it. A deleted
ClusterSecretSync's Owner targets go with it through the garbage collector (their owner
reference), Orphan ones stay.

Status is counted over the entries in cluster_report.py.

templateFrom: a ClusterSecretSync's sources are read from the namespace its admin names
(``spec.templatesNamespace``), never from each selected namespace (whose tenant could write a
labelled ConfigMap there); the origin carries it to the pass (sync._template_texts).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

import pydantic

from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.kube import customresources, objects, watching
from secretferry.kube import errors as kube_errors
from secretferry.models import clustersecretsync as css_models
from secretferry.models import errors as model_errors
from secretferry.models import labels
from secretferry.reconcile import (
    cluster_report,
    cluster_selection,
    desired,
    namespace_labels,
    scheduler,
    slim,
    state,
    sync_intake,
    tasks,
)

log = logging.getLogger(__name__)


class ClusterSyncs:
    def __init__(
        self,
        *,
        kube: kube_client.Kube,
        settings: settings_mod.Settings,
        syncs: MutableMapping[state.SyncKey, state.SyncEntry],
        queue: scheduler.Scheduler[state.SyncKey],
        namespaces: namespace_labels.NamespaceLabels,
        sync_intake_: sync_intake.SyncIntake,
        records: dict[str, cluster_report.ClusterRecord],
        report: cluster_report.ClusterReport,
        background: tasks.Tasks,
        serves: Callable[[str], bool] = lambda namespace: True,
    ) -> None:
        self._kube = kube
        self._served = frozenset(settings.watched_namespaces())
        self._serves = serves
        """The namespace selector's verdict (served.py): a selected namespace this release does
        not serve gets no entry, and one it stops serving is let go without removing its target."""
        self._syncs = syncs
        self._queue = queue
        self._namespaces = namespaces
        self._sync_intake = sync_intake_
        self._records = records
        self._report = report
        self._background = background
        self._specs: dict[str, css_models.ClusterSecretSyncSpec | None] = {}
        self._bodies: dict[str, dict[str, Any]] = {}
        self._initial_listed = False

    # --- the ClusterSecretSyncs ------------------------------------------------------------------
    async def watch(self, lists_may_start: asyncio.Event) -> None:
        path = customresources.collection_path(css_models.PLURAL)
        seen: set[str] = set()
        async for event in watching.watch(self._kube, path=path, list_after=lists_may_start):
            if event.type == "SYNCED":
                for gone in [name for name in self._records if name not in seen]:
                    self.deleted(gone)
                seen = set()
                self._initial_listed = True
                continue
            name = str((event.object.get("metadata") or {}).get("name", ""))
            if event.type == "DELETED":
                self.deleted(name)
                continue
            seen.add(name)
            self.upserted(event.object, live=self._initial_listed or not event.listed)

    def upserted(self, body: Mapping[str, Any], *, live: bool) -> None:
        meta = body.get("metadata") or {}
        name, uid, generation = str(meta.get("name", "")), str(meta.get("uid", "")), meta.get("generation")
        force = (meta.get("annotations") or {}).get(state.FORCE_SYNC_ANNOTATION)
        record = self._records.get(name)
        if record is not None and record.uid == uid and record.generation == generation:
            if force != record.force_annotation:
                record.force_annotation = force
                if force is not None:
                    self._force(record)
            return  # else a status-only change, most likely our own patch echoing back
        if record is not None and record.uid != uid:
            self.deleted(name)  # recreated under the same name: another object
            record = None
        try:
            spec: css_models.ClusterSecretSyncSpec | None = css_models.ClusterSecretSync.from_body(body).spec
            invalid = None
        except pydantic.ValidationError as exc:
            spec, invalid = None, model_errors.describe_validation_error(exc)
        if record is None:
            record = cluster_report.ClusterRecord(
                name=name, uid=uid, generation=generation, status=slim.status(body.get("status"))
            )
            self._records[name] = record
        record.generation, record.invalid, record.force_annotation = generation, invalid, force
        self._specs[name] = spec
        self._bodies[name] = {"metadata": dict(meta), "spec": body.get("spec") or {}}
        self._select(record, live=live)

    def _force(self, record: cluster_report.ClusterRecord) -> None:
        """The force-sync annotation moved: every namespace reads the service once, now."""
        for namespace in sorted(record.namespaces):
            key = state.cluster_key(namespace, record.name)
            entry = self._syncs.get(key)
            if entry is not None:
                entry.force_pending = True
                self._queue.enqueue(key, live=True)

    def deleted(self, name: str) -> None:
        """The ClusterSecretSync is gone: its entries go; its Owner targets follow through the
        garbage collector (their owner reference), so none is deleted here."""
        record = self._records.pop(name, None)
        self._specs.pop(name, None)
        self._bodies.pop(name, None)
        self._report.forget(name)
        if record is None:
            return
        for namespace in sorted(record.namespaces):
            self._sync_intake.deleted(state.cluster_key(namespace, name))

    # --- namespaces --------------------------------------------------------------------------
    def namespace_changed(self, namespace: str | None) -> None:
        """A namespace was created, relabelled or deleted (None: the namespace listing is complete,
        so every selection can be made now)."""
        known = self._namespaces.known()
        if known is None:
            return
        if namespace is None:
            # A complete listing (start-up, or a relist after the watch expired): what it changes
            # is backlog; namespaces created or relabelled later arrive one by one, as live work.
            for record in list(self._records.values()):
                self._select(record, live=False)
            return
        found = known.get(namespace)
        for record in list(self._records.values()):
            spec = self._specs.get(record.name)
            chosen = (
                found is not None
                and spec is not None
                and bool(cluster_selection.selected(spec, {namespace: found}, served=self._served))
            )
            wanted = chosen and self._serves(namespace)
            if wanted and namespace not in record.namespaces:
                record.namespaces.add(namespace)
                self._put(record, namespace, live=True)
                self._report.due(record.name)
            elif not wanted and namespace in record.namespaces:
                record.namespaces.discard(namespace)
                # A namespace that is gone took its Secrets along; only a deselected one is cleaned.
                # One this release no longer serves (namespace selector) is let go, never cleaned:
                # another release takes it over (served.py).
                self._drop(record, namespace, remove_target=found is not None and not chosen)
                self._report.due(record.name)

    # --- selection -------------------------------------------------------------------------------
    def _select(self, record: cluster_report.ClusterRecord, *, live: bool) -> None:
        known = self._namespaces.known()
        if known is None:
            return  # made once the namespace watch has listed (namespace_changed(None))
        spec = self._specs.get(record.name)
        if spec is None:
            # An invalid spec is a failure, and a failure never deletes a Secret: the entries keep
            # what they had (the last valid spec), status says InvalidSpec.
            self._report.due(record.name)
            return
        chosen = cluster_selection.selected(spec, known, served=self._served)
        want = {namespace for namespace in chosen if self._serves(namespace)}
        for namespace in sorted(record.namespaces - want):
            self._drop(record, namespace, remove_target=namespace not in chosen)
        for namespace in sorted(want):
            self._put(record, namespace, live=live)
        record.namespaces = want
        self._report.due(record.name)

    def _put(self, record: cluster_report.ClusterRecord, namespace: str, *, live: bool) -> None:
        """The entry for ``namespace`` at the record's generation, queued when new or changed."""
        key = state.cluster_key(namespace, record.name)
        current = self._syncs.get(key)
        if current is not None and current.uid == record.uid and current.generation == record.generation:
            return
        same = current is not None and current.uid == record.uid
        self._syncs[key] = state.SyncEntry(
            key=key,
            uid=record.uid,
            generation=record.generation,
            body=cluster_selection.expanded_body(self._bodies[record.name], namespace),
            # The last status (in memory) says which keys were written there before (drift.py).
            status=current.status if current is not None and same else {},
            origin=desired.ClusterOrigin(
                name=record.name, uid=record.uid, templates_namespace=self._templates_namespace(record.name)
            ),
        )
        self._queue.enqueue(key, live=live)

    def _templates_namespace(self, name: str) -> str | None:
        spec = self._specs.get(name)
        return spec.templates_namespace if spec is not None else None

    def _drop(self, record: cluster_report.ClusterRecord, namespace: str, *, remove_target: bool) -> None:
        key = state.cluster_key(namespace, record.name)
        entry = self._syncs.get(key)
        self._sync_intake.deleted(key)
        if not remove_target or entry is None:
            return
        target = _target_of(entry)
        if target is not None:
            kind, name = target
            self._background.spawn_side(self._remove_target(record, namespace, kind=kind, name=name))

    async def _remove_target(
        self, record: cluster_report.ClusterRecord, namespace: str, *, kind: objects.Kind, name: str
    ) -> None:
        """Delete the target in a namespace no longer selected, if it is still ours."""
        try:
            obj = await objects.get(self._kube, kind=kind, namespace=namespace, name=name)
            if obj is None or not _ours(obj, record):
                return
            uid = (obj.get("metadata") or {}).get("uid")
            await objects.delete(self._kube, kind=kind, namespace=namespace, name=name, uid=uid)
        except kube_errors.KubeError as exc:
            log.warning(
                "ClusterSecretSync %s: %s %s/%s (namespace no longer selected) not removed: %s",
                record.name,
                kind,
                namespace,
                name,
                exc,
            )
            return
        log.info(
            "ClusterSecretSync %s: removed %s %s/%s (namespace no longer selected)",
            record.name,
            kind,
            namespace,
            name,
        )


def _target_of(entry: state.SyncEntry) -> tuple[objects.Kind, str] | None:
    """The target an Owner entry wrote (status), or would write (spec); None under Orphan."""
    target = (entry.body.get("spec") or {}).get("target") or {}
    if target.get("creationPolicy", "Owner") != "Owner":
        return None  # Orphan keeps the Secret when the namespace leaves the selection
    written = entry.status.get("target") or {}
    kind = written.get("kind") or target.get("kind") or "Secret"
    name = written.get("name") or target.get("name") or entry.body["metadata"]["name"]
    return ("ConfigMap" if kind == "ConfigMap" else "Secret"), str(name)


def _ours(obj: Mapping[str, Any], record: cluster_report.ClusterRecord) -> bool:
    """Our sync label and an owner reference to this very ClusterSecretSync (uid)."""
    meta = obj.get("metadata") or {}
    if (meta.get("labels") or {}).get(labels.SYNC_LABEL) != labels.cluster_sync_label_value(record.name):
        return False
    return any(ref.get("uid") == record.uid for ref in meta.get("ownerReferences") or [])

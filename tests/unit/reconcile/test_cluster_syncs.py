"""ClusterSecretSyncs in: the namespaces they select become entries of the SecretSync table, and
follow namespaces and the spec; a namespace that leaves loses the target we own there."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from reconcile_fakes import FakeApiserver, FakeKube, RecordingQueue

from secretferry import settings as settings_mod
from secretferry.kube import objects, watching
from secretferry.models import labels
from secretferry.reconcile import cluster_report, cluster_syncs, namespace_labels, state, sync_intake, tasks

pytestmark = pytest.mark.looptime


def _body(
    generation: int = 1, *, selector: str = "pay", policy: str = "Owner", uid: str = "css-uid"
) -> dict[str, Any]:
    return {
        "metadata": {"name": "shared", "uid": uid, "generation": generation},
        "spec": {
            "namespaceSelector": {"matchLabels": {"team": selector}},
            "namespaces": ["named"],
            "syncTemplate": {
                "identityRef": {"kind": "ClusterMachineIdentity", "name": "cid"},
                "sources": [{"projectId": "p", "environment": "dev"}],
                "target": {"name": "pull", "creationPolicy": policy},
            },
        },
    }


class World:
    def __init__(self, **settings: Any) -> None:
        self.api = FakeApiserver()
        kube = FakeKube(self.api.answer).port()
        self.syncs: dict[state.SyncKey, state.SyncEntry] = {}
        self.queue = RecordingQueue()
        self.labels = namespace_labels.NamespaceLabels(kube)
        self.records: dict[str, cluster_report.ClusterRecord] = {}
        self.background = tasks.Tasks()
        intake = sync_intake.SyncIntake(
            kube=kube,
            syncs=self.syncs,
            scopes=state.ScopeIndex(jitter_fraction=0),
            targets=state.TargetCache(),
            queue=self.queue.port(),
            on_scopes_changed=lambda added, removed: None,
        )
        self.sync_intake = intake
        report = cluster_report.ClusterReport(kube=kube, syncs=self.syncs, records=self.records, instance="i")
        self.clusters = cluster_syncs.ClusterSyncs(
            kube=kube,
            settings=settings_mod.Settings(**settings),
            syncs=self.syncs,
            queue=self.queue.port(),
            namespaces=self.labels,
            sync_intake_=intake,
            records=self.records,
            report=report,
            background=self.background,
        )

    def namespace(self, name: str, team: str | None = None) -> None:
        self.labels.seen(name, {"team": team} if team else {})
        self.clusters.namespace_changed(name)

    def listed(self, **namespaces: str | None) -> None:
        for name, team in namespaces.items():
            self.labels.seen(name, {"team": team} if team else {})
        self.labels.listed(set(namespaces))
        self.clusters.namespace_changed(None)

    def selected(self) -> set[str]:
        return {k[0] for k, e in self.syncs.items() if e.origin is not None}

    def our_secret(self, namespace: str, *, uid: str = "css-uid") -> None:
        self.api.put(
            objects.path("Secret", namespace, "pull"),
            {
                "metadata": {
                    "name": "pull",
                    "namespace": namespace,
                    "labels": {labels.SYNC_LABEL: labels.cluster_sync_label_value("shared")},
                    "ownerReferences": [{"kind": "ClusterSecretSync", "name": "shared", "uid": uid}],
                },
                "data": {},
            },
        )


def test_nothing_is_selected_before_the_namespaces_are_listed() -> None:
    w = World()
    w.clusters.upserted(_body(), live=False)
    assert w.syncs == {}
    w.listed(named=None, a="pay", b="pay", c="other")
    assert w.selected() == {"named", "a", "b"}
    key = state.cluster_key("a", "shared")
    assert w.queue.queued[key] is False  # start-up: backlog
    entry = w.syncs[key]
    assert entry.origin is not None and (entry.origin.name, entry.origin.uid) == ("shared", "css-uid")
    assert entry.body["metadata"]["namespace"] == "a"


async def test_namespaces_arriving_relabelled_and_leaving() -> None:
    w = World()
    w.listed(a="pay")
    w.clusters.upserted(_body(), live=True)
    assert w.selected() == {"a"}
    w.namespace("new", "pay")
    assert w.selected() == {"a", "new"} and w.queue.queued[state.cluster_key("new", "shared")] is True

    w.our_secret("new")
    w.namespace("new", "other")  # relabelled away: entry gone, our Secret removed
    await asyncio.sleep(0.1)
    assert w.selected() == {"a"}
    assert objects.path("Secret", "new", "pull") not in w.api.objects

    w.labels.gone("a")
    w.clusters.namespace_changed("a")  # deleted: its Secrets went with it, nothing to delete
    assert w.selected() == set()


async def test_a_deselected_namespace_keeps_what_is_not_ours_and_orphans() -> None:
    w = World()
    w.listed(a="pay", b="pay")
    w.clusters.upserted(_body(), live=True)
    w.our_secret("a", uid="another-incarnation")  # not this ClusterSecretSync's
    w.clusters.upserted(_body(2, selector="nobody"), live=True)
    await asyncio.sleep(0.1)
    assert w.selected() == set()  # "named" does not exist
    assert objects.path("Secret", "a", "pull") in w.api.objects

    w2 = World()
    w2.listed(a="pay")
    w2.clusters.upserted(_body(policy="Orphan"), live=True)
    w2.our_secret("a")
    w2.clusters.upserted(_body(2, selector="nobody", policy="Orphan"), live=True)
    await asyncio.sleep(0.1)
    assert objects.path("Secret", "a", "pull") in w2.api.objects  # Orphan keeps it


def test_an_edit_replaces_the_entries_and_keeps_their_status() -> None:
    w = World()
    w.listed(a="pay")
    w.clusters.upserted(_body(), live=False)
    key = state.cluster_key("a", "shared")
    w.syncs[key].status = {"syncedKeys": ["A"]}
    w.queue.queued.clear()
    w.clusters.upserted(_body(), live=True)  # a status echo: nothing
    assert w.queue.queued == {}
    w.clusters.upserted(_body(2), live=True)
    assert w.queue.queued == {key: True}
    assert w.syncs[key].generation == 2 and w.syncs[key].status == {"syncedKeys": ["A"]}


def test_deleted_drops_every_entry_and_a_recreated_object_starts_afresh() -> None:
    w = World()
    w.listed(a="pay", b="pay")
    w.clusters.upserted(_body(), live=True)
    w.syncs[state.cluster_key("a", "shared")].status = {"syncedKeys": ["A"]}
    w.clusters.upserted(_body(uid="other-uid"), live=True)
    assert w.syncs[state.cluster_key("a", "shared")].status == {}
    w.clusters.deleted("shared")
    assert w.syncs == {} and w.records == {}


def test_only_served_namespaces() -> None:
    w = World(watch_namespaces="a")
    w.listed(a="pay", b="pay")
    w.clusters.upserted(_body(), live=True)
    assert w.selected() == {"a"}


async def test_an_invalid_spec_selects_nothing_and_deletes_nothing() -> None:
    w = World()
    w.listed(a="pay")
    body = _body(2)
    body["spec"]["syncTemplate"]["identityRef"]["kind"] = "MachineIdentity"
    w.clusters.upserted(body, live=True)
    assert w.selected() == set()
    assert "ClusterMachineIdentity" in (w.records["shared"].invalid or "")

    w = World()
    w.listed(a="pay")
    w.clusters.upserted(_body(), live=True)
    w.our_secret("a")
    w.clusters.upserted(body, live=True)  # valid before: a failure keeps the entries and the Secret
    await asyncio.sleep(0.1)
    assert w.selected() == {"a"} and w.syncs[state.cluster_key("a", "shared")].generation == 1
    assert objects.path("Secret", "a", "pull") in w.api.objects
    assert w.records["shared"].invalid is not None


async def test_a_secretsync_relist_leaves_the_cluster_entries_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SecretSync watch's SYNCED drops what the listing did not show: never our entries."""
    w = World()
    w.listed(a="pay")
    w.clusters.upserted(_body(), live=True)

    async def one_listing(*_: Any, **__: Any) -> AsyncIterator[watching.WatchEvent]:
        yield watching.WatchEvent(type="SYNCED", object={}, listed=True)

    monkeypatch.setattr(watching, "watch", one_listing)
    await w.sync_intake.watch(None, asyncio.Event())
    assert w.selected() == {"a"}


def test_the_force_sync_annotation_forces_every_namespace() -> None:
    w = World()
    w.listed(a="pay", b="pay")
    w.clusters.upserted(_body(), live=False)
    w.queue.queued.clear()
    body = _body()
    body["metadata"]["annotations"] = {state.FORCE_SYNC_ANNOTATION: "now"}
    w.clusters.upserted(body, live=True)
    keys = {state.cluster_key(ns, "shared") for ns in ("a", "b")}
    assert w.queue.queued == dict.fromkeys(keys, True)
    assert all(w.syncs[k].force_pending for k in keys)
    w.queue.queued.clear()
    w.clusters.upserted(body, live=True)  # the same value again: nothing
    assert w.queue.queued == {}

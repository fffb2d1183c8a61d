"""The controller's intake: identities read at start-up, managed objects the watch reports gone,
and resyncs from the event streams.

No apiserver is involved: the controller gets a stand-in for the Kubernetes client and for the
watch, its scheduler is never started, and what it queued is read back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.kube import watching
from secretferry.reconcile import controller as controller_mod
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import state
from secretferry.service import scopes
from secretferry.service import streams as streams_mod

GROUP_PATH = "/apis/secretferry.io/v1alpha1"


def _controller(kube: object = None, **settings: Any) -> controller_mod.Controller:
    return controller_mod.Controller(
        kube=cast(kube_client.Kube, kube if kube is not None else object()),
        settings=settings_mod.Settings(**settings),
        hmac_key=b"k" * 32,
        instance="test",
        clock=lambda: 42.0,
    )


def _record_enqueues(
    ctl: controller_mod.Controller, monkeypatch: pytest.MonkeyPatch
) -> dict[state.SyncKey, bool]:
    queued: dict[state.SyncKey, bool] = {}

    def enqueue(key: state.SyncKey, *, live: bool = True, first: bool = False) -> None:
        queued[key] = live

    monkeypatch.setattr(ctl.queue, "enqueue", enqueue)
    return queued


class IdentityLists:
    """Answers a LIST of identities with one object named after the collection."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        assert method == "GET"
        self.paths.append(path)
        namespace = path.split("/namespaces/")[1].split("/")[0] if "/namespaces/" in path else None
        meta = {"name": "from-" + (namespace or "cluster"), "uid": path, "generation": 1}
        if namespace is not None:
            meta["namespace"] = namespace
        return {"items": [{"metadata": meta, "spec": {}}]}


async def test_start_up_reads_cluster_identities_and_those_of_each_watched_namespace() -> None:
    kube = IdentityLists()
    ctl = _controller(kube, watch_namespaces="a,b")
    await ctl._list_identities()
    assert kube.paths == [
        f"{GROUP_PATH}/clustermachineidentities",
        f"{GROUP_PATH}/namespaces/a/machineidentities",
        f"{GROUP_PATH}/namespaces/b/machineidentities",
    ]
    assert ctl.identities.get((ident_mod.CLUSTER, "", "from-cluster")) is not None
    assert ctl.identities.get((ident_mod.MACHINE, "a", "from-a")) is not None
    assert ctl.identities.get((ident_mod.MACHINE, "b", "from-b")) is not None


async def test_start_up_reads_machine_identities_cluster_wide_when_serving_every_namespace() -> None:
    kube = IdentityLists()
    await _controller(kube)._list_identities()
    assert kube.paths == [f"{GROUP_PATH}/clustermachineidentities", f"{GROUP_PATH}/machineidentities"]


def _secret(name: str, namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"}, "data": {}}


async def test_a_managed_secret_gone_from_a_relisting_is_forgotten_and_its_secretsync_repaired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctl = _controller()
    kept, gone = ("Secret", "ns", "kept"), ("Secret", "ns", "gone")
    for key in (kept, gone):
        ctl.targets.remember(key, _secret(key[2]))
    ctl.syncs[("ns", "app")] = state.SyncEntry(key=("ns", "app"), uid="u", generation=1, body={}, status={})
    ctl.targets.own(gone, ("ns", "app"))
    ctl._targets_ready.set()
    queued = _record_enqueues(ctl, monkeypatch)
    paths: list[str] = []

    async def relisting(kube: object, *, path: str, **kwargs: Any) -> AsyncIterator[watching.WatchEvent]:
        paths.append(path)
        yield watching.WatchEvent("ADDED", _secret("kept"), listed=True)
        yield watching.WatchEvent("SYNCED", {})

    monkeypatch.setattr(controller_mod.watching, "watch", relisting)
    await ctl._watch_targets("Secret", None, asyncio.Event())

    assert paths == ["/api/v1/secrets"]
    assert ctl.targets.last_seen(kept) is not None
    assert ctl.targets.last_seen(gone) is None
    assert queued == {("ns", "app"): True}  # repaired as live work
    assert ("Secret", None) in ctl._synced_sources


async def test_a_deleted_managed_configmap_is_forgotten_and_its_secretsync_repaired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctl = _controller()
    target = ("ConfigMap", "ns", "cm")
    ctl.targets.remember(target, {**_secret("cm"), "kind": "ConfigMap"})
    ctl.syncs[("ns", "app")] = state.SyncEntry(key=("ns", "app"), uid="u", generation=1, body={}, status={})
    ctl.targets.own(target, ("ns", "app"))
    ctl._targets_ready.set()
    queued = _record_enqueues(ctl, monkeypatch)

    async def deletion(kube: object, *, path: str, **kwargs: Any) -> AsyncIterator[watching.WatchEvent]:
        assert path == "/api/v1/configmaps"
        yield watching.WatchEvent("DELETED", _secret("cm"))

    monkeypatch.setattr(controller_mod.watching, "watch", deletion)
    await ctl._watch_targets("ConfigMap", "ns", asyncio.Event())

    assert ctl.targets.last_seen(target) is None
    assert queued == {("ns", "app"): True}


@pytest.mark.parametrize(
    ("reason", "live"),
    [
        (streams_mod.RESYNC_EVENT, True),
        (streams_mod.RESYNC_UNKNOWN, True),
        (streams_mod.RESYNC_RECONNECT, False),
    ],
)
async def test_an_event_resync_is_live_work_and_a_reconnect_resync_waits_in_the_backlog(
    reason: str, live: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctl = _controller()
    scope = scopes.Scope("MachineIdentity/ns/id", "p", "dev", "/")
    ctl.scopes.bind(("ns", "app"), [scope], instant=True, refresh_seconds=300, now=0)
    queued = _record_enqueues(ctl, monkeypatch)
    ctl._on_resync({scope}, reason)
    assert queued == {("ns", "app"): live}
    found = ctl.scopes.get(scope)
    assert found is not None and found.fresh_after == 42.0  # what was fetched before is stale

"""Managed Secrets and ConfigMaps in: what the watch reports gone is forgotten and repaired.

No apiserver: the watch is replaced by a generator of events; the work queue records what was queued.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from reconcile_fakes import FakeKube, RecordingQueue

from secretferry.reconcile import state, target_intake


def _secret(name: str, namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"}, "data": {}}


def _intake(
    targets: state.TargetCache, queue: RecordingQueue
) -> tuple[target_intake.TargetIntake, dict[state.SyncKey, state.SyncEntry]]:
    syncs = {("ns", "app"): state.SyncEntry(key=("ns", "app"), uid="u", generation=1, body={}, status={})}
    intake = target_intake.TargetIntake(
        kube=FakeKube().port(), targets=targets, syncs=syncs, queue=queue.port()
    )
    return intake, syncs


async def test_a_managed_secret_gone_from_a_relisting_is_forgotten_and_its_secretsync_repaired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    targets, queue = state.TargetCache(), RecordingQueue()
    kept, gone = ("Secret", "ns", "kept"), ("Secret", "ns", "gone")
    for key in (kept, gone):
        targets.remember(key, _secret(key[2]))
    targets.own(gone, ("ns", "app"))
    intake, _ = _intake(targets, queue)
    intake.ready.set()
    paths: list[str] = []

    async def relisting(kube: object, *, path: str, **kwargs: Any) -> AsyncIterator[Any]:
        paths.append(path)
        yield target_intake.watching.WatchEvent("ADDED", _secret("kept"), listed=True)
        yield target_intake.watching.WatchEvent("SYNCED", {})

    monkeypatch.setattr(target_intake.watching, "watch", relisting)
    await intake.watch("Secret", None, asyncio.Event())

    assert paths == ["/api/v1/secrets"]
    assert targets.last_seen(kept) is not None
    assert targets.last_seen(gone) is None
    assert queue.queued == {("ns", "app"): True}  # repaired as live work
    assert ("Secret", None) in intake.synced_sources


async def test_a_deleted_managed_configmap_is_forgotten_and_its_secretsync_repaired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    targets, queue = state.TargetCache(), RecordingQueue()
    target = ("ConfigMap", "ns", "cm")
    targets.remember(target, {**_secret("cm"), "kind": "ConfigMap"})
    targets.own(target, ("ns", "app"))
    intake, _ = _intake(targets, queue)
    intake.ready.set()

    async def deletion(kube: object, *, path: str, **kwargs: Any) -> AsyncIterator[Any]:
        assert path == "/api/v1/configmaps"
        yield target_intake.watching.WatchEvent("DELETED", _secret("cm"))

    monkeypatch.setattr(target_intake.watching, "watch", deletion)
    await intake.watch("ConfigMap", "ns", asyncio.Event())

    assert targets.last_seen(target) is None
    assert queue.queued == {("ns", "app"): True}


async def test_nothing_is_repaired_before_the_cache_is_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    targets, queue = state.TargetCache(), RecordingQueue()
    targets.own(("Secret", "ns", "s"), ("ns", "app"))
    intake, _ = _intake(targets, queue)

    async def deletion(kube: object, *, path: str, **kwargs: Any) -> AsyncIterator[Any]:
        yield target_intake.watching.WatchEvent("DELETED", _secret("s"))

    monkeypatch.setattr(target_intake.watching, "watch", deletion)
    await intake.watch("Secret", "ns", asyncio.Event())

    assert queue.queued == {}

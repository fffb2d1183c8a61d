"""One namespace of a ClusterSecretSync through the SecretSync pass (sync.py), as cluster_syncs.py
hands it over: the target names the ClusterSecretSync, status goes to its counts (no patch of a
SecretSync that does not exist), and a SecretSync of the namespace cannot take the target.
Same World as test_sync.py: virtual clock, fake apiserver, real fetcher and indexes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from test_sync import HOST, NAMESPACE, VALUES, FakeList, World, sync_body

from secretferry.kube import objects
from secretferry.models import labels
from secretferry.reconcile import cluster_selection, conditions, desired, reasons, state, sync
from secretferry.reconcile import identities as ident_mod
from secretferry.service import auth, client

pytestmark = pytest.mark.looptime

CSS: dict[str, Any] = {
    "metadata": {"name": "shared", "uid": "css-uid", "generation": 3},
    "spec": {
        "namespaces": [NAMESPACE],
        "syncTemplate": {
            "identityRef": {"kind": "ClusterMachineIdentity", "name": "cid"},
            "sources": [{"projectId": "p-1", "environment": "dev"}],
            "target": {"name": "pull"},
        },
    },
}
KEY = state.cluster_key(NAMESPACE, "shared")
TARGET = objects.path("Secret", NAMESPACE, "pull")


@pytest.fixture
async def world() -> AsyncIterator[World]:
    service = FakeList()
    async with client.ServiceClient(HOST, transport=httpx.MockTransport(service.handler)) as api:
        made = World(api, service)
        cluster = made.registry.upsert(
            ident_mod.CLUSTER,
            {
                "metadata": {"name": "cid", "uid": "uid-cid", "generation": 1},
                "spec": {
                    "auth": {"accessToken": {"secretRef": {"namespace": "ops", "name": "t", "key": "t"}}}
                },
            },
        )
        cluster.session = auth.AuthSession(api, auth.StaticTokenCredentials("t"), clock=made.clock)
        made.syncs[KEY] = state.SyncEntry(
            key=KEY,
            uid="css-uid",
            generation=3,
            body=cluster_selection.expanded_body(CSS, NAMESPACE),
            status={},
            origin=desired.ClusterOrigin("shared", "css-uid"),
        )
        try:
            yield made
        finally:
            await made.deps.rollouts.close()
            await made.registry.close()


async def run_cluster(world: World) -> list[state.SyncEntry]:
    reported: list[state.SyncEntry] = []
    world.deps.on_cluster_report = reported.append
    entry = world.syncs[KEY]
    entry.parse()
    try:
        await sync.reconcile(world.deps, entry)
    finally:
        entry.model = None
    return reported


def status_calls(world: World) -> list[str]:
    return [p for m, p, _ in world.kube.calls if m == "PATCH" and p.endswith("/status")]


async def test_the_target_names_the_cluster_secretsync_and_status_stays_in_memory(world: World) -> None:
    reported = await run_cluster(world)
    assert world.apiserver.secret_data(NAMESPACE, "pull") == VALUES
    meta = world.apiserver.objects[TARGET]["metadata"]
    assert meta["labels"][labels.SYNC_LABEL] == "cluster_shared"
    assert meta["labels"][labels.CLUSTER_SYNC_LABEL] == "shared"
    assert [(r["kind"], r["uid"]) for r in meta["ownerReferences"]] == [("ClusterSecretSync", "css-uid")]
    assert status_calls(world) == []  # no SecretSync "ClusterSecretSync/shared" to patch
    assert [e.key for e in reported] == [KEY]
    ready = conditions.find(world.syncs[KEY].status["conditions"], reasons.READY)
    assert ready is not None and (ready["status"], ready["reason"]) == ("True", reasons.SYNCED)
    assert world.syncs[KEY].status["syncedKeys"] == sorted(VALUES)

    # A pass that changes nothing writes and reports nothing.
    world.kube.calls.clear()
    assert await run_cluster(world) == []
    assert [c for c in world.kube.calls if c[0] != "GET"] == []


async def test_a_secretsync_of_the_namespace_cannot_take_the_target(world: World) -> None:
    await run_cluster(world)
    before = world.apiserver.objects[TARGET]["metadata"]["resourceVersion"]
    world.credentials(allow_templates=None)  # the namespace's own identity works
    await world.run(sync_body(target={"name": "pull"}))
    ready = world.ready()
    assert (ready["status"], ready["reason"]) == ("False", reasons.TARGET_CONFLICT)
    assert world.apiserver.objects[TARGET]["metadata"]["resourceVersion"] == before


async def test_a_foreign_secret_is_not_taken_over(world: World) -> None:
    world.apiserver.put(TARGET, {"metadata": {"name": "pull", "namespace": NAMESPACE}, "data": {}})
    await run_cluster(world)
    ready = conditions.find(world.syncs[KEY].status["conditions"], reasons.READY)
    assert ready is not None and ready["reason"] == reasons.TARGET_CONFLICT
    assert world.apiserver.objects[TARGET].get("data") == {}


async def test_retained_keys_survive_a_restart(world: World) -> None:
    """deletionPolicy Retain (the default): a key gone at the service stays in the target, also
    after a restart, when the entry's in-memory status is gone: the target notes its keys."""
    await run_cluster(world)
    gone = sorted(VALUES)[-1]
    del world.service.secrets[gone]
    world.later()
    await run_cluster(world)
    assert set(world.apiserver.secret_data(NAMESPACE, "pull") or {}) == set(VALUES)
    noted = world.apiserver.objects[TARGET]["metadata"]["annotations"][labels.SYNCED_KEYS_ANNOTATION]
    assert noted.split(",") == sorted(VALUES)

    # A restart: nothing in memory; a new key at the service makes the next pass write.
    world.syncs[KEY].status = {}
    world.deps.targets = state.TargetCache()
    world.service.secrets["NEW_KEY"] = "new-value-1"
    world.later()
    await run_cluster(world)
    data = world.apiserver.secret_data(NAMESPACE, "pull") or {}
    assert set(data) == {*VALUES, "NEW_KEY"}  # the retained key was not taken for a stranger's

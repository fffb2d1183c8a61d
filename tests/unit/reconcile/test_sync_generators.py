"""A SecretSync pass with ``generatorRef`` sources: the generator's value joins the merged data
(after rewrite), read only from the Secret the generator owns; nothing else is read through it."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from test_sync import HOST, NAMESPACE, SECRET_PATH, VALUES, FakeList, World, sync_body

from secretferry.kube import errors as kube_errors
from secretferry.kube import objects
from secretferry.reconcile import reasons, served
from secretferry.reconcile.generators import intake, store
from secretferry.service import client

pytestmark = pytest.mark.looptime

GEN_PATH = f"/apis/secretferry.io/v1alpha1/namespaces/{NAMESPACE}/passwordgenerators/db"
GENERATED = "generated-password-value-1"
SOURCES: list[dict[str, Any]] = [
    {"projectId": "p-1", "environment": "dev"},
    {
        "generatorRef": {"kind": "PasswordGenerator", "name": "db"},
        "rewrite": [{"from": "password", "to": "DB_ADMIN"}],
    },
]


@pytest.fixture
async def world() -> AsyncIterator[World]:
    """test_sync's world (one SecretSync over fakes), with a generator's Secret to read."""
    service = FakeList()
    async with client.ServiceClient(HOST, transport=httpx.MockTransport(service.handler)) as api:
        made = World(api, service)
        try:
            yield made
        finally:
            await made.deps.rollouts.close()
            await made.registry.close()


def put_generator(world: World, *, owned: bool) -> None:
    world.apiserver.put(
        GEN_PATH, {"metadata": {"name": "db", "namespace": NAMESPACE, "uid": "uid-gen"}, "spec": {}}
    )
    meta: dict[str, Any] = {"name": "db", "namespace": NAMESPACE}
    if owned:
        meta["ownerReferences"] = [
            {"kind": "PasswordGenerator", "name": "db", "uid": "uid-gen", "controller": True}
        ]
    world.apiserver.put(
        objects.path("Secret", NAMESPACE, "db"),
        {"metadata": meta, "data": {"password": base64.b64encode(GENERATED.encode()).decode()}},
    )


def target(world: World) -> dict[str, str] | None:
    found = world.apiserver.objects.get(SECRET_PATH)
    if found is None:
        return None
    return {k: base64.b64decode(v).decode() for k, v in (found.get("data") or {}).items()}


async def test_the_generated_value_joins_the_fetched_ones(world: World) -> None:
    put_generator(world, owned=True)
    assert await world.run(sync_body(sources=SOURCES)) is None
    assert world.ready()["reason"] == reasons.SYNCED
    assert target(world) == {**VALUES, "DB_ADMIN": GENERATED}
    assert GENERATED not in world.shown()
    assert world.service.calls == 1  # the generator source costs no service call


async def test_a_secret_the_generator_does_not_own_is_not_read(world: World) -> None:
    put_generator(world, owned=False)
    delay = await world.run(sync_body(sources=SOURCES))
    assert world.ready()["reason"] == reasons.GENERATOR_NOT_READY
    assert delay is not None  # retried; the generator's first value also queues it
    assert target(world) is None
    assert GENERATED not in world.shown()


async def test_a_missing_generator(world: World) -> None:
    world.apiserver.faults[("GET", GEN_PATH)] = kube_errors.NotFound(404, "NotFound", "gone")
    assert await world.run(sync_body(sources=SOURCES)) is None
    assert world.ready()["reason"] == reasons.GENERATOR_NOT_FOUND
    assert target(world) is None


async def test_only_generator_sources_need_no_scope(world: World) -> None:
    put_generator(world, owned=True)
    assert await world.run(sync_body(sources=SOURCES[1:])) is None
    assert target(world) == {"DB_ADMIN": GENERATED}
    assert world.service.calls == 0


def test_the_store_reads_by_owner_uid_not_by_label() -> None:
    labelled_only = {"labels": {store.GENERATOR_LABEL: "db"}}
    assert not store.owned_by(labelled_only, "uid-gen")
    assert not store.owned_by({"ownerReferences": [{"uid": "uid-gen", "controller": True}]}, None)


# --- the generator intake's watch cache: a pass reads nothing from the apiserver --------------


def gen_reads(world: World) -> list[str]:
    """GETs of generators and of Secrets other than the target."""
    return [
        p
        for m, p, _ in world.kube.calls
        if m == "GET" and (p == GEN_PATH or p == objects.path("Secret", NAMESPACE, "db"))
    ]


def cached_intake(world: World, *, namespace: str = NAMESPACE) -> intake.GeneratorIntake:
    """A generator intake whose watches showed generator ``db`` and its Secret in ``namespace``."""
    gi = intake.GeneratorIntake(
        kube=world.kube.port(),
        instance="t",
        enqueue_sync=lambda key: None,
        served=served.ServedNamespaces(None),
    )
    gi._bodies[("PasswordGenerator", namespace, "db")] = {
        "metadata": {"name": "db", "namespace": namespace, "uid": "uid-gen"},
        "spec": {},
    }
    secret = {
        "metadata": {
            "name": "db",
            "namespace": namespace,
            "resourceVersion": "1",
            "ownerReferences": [
                {"kind": "PasswordGenerator", "name": "db", "uid": "uid-gen", "controller": True}
            ],
        },
        "data": {"password": base64.b64encode(GENERATED.encode()).decode()},
    }
    gi._secret_changed((namespace, "db"), intake._slim_secret(secret), listed=True)
    world.deps.generator_sources = gi
    return gi


async def test_a_pass_reads_the_generator_from_the_watch_cache_not_the_apiserver(world: World) -> None:
    """Before: 2 GETs per pass (the generator, its Secret); with the watches' cache: 0."""
    put_generator(world, owned=True)
    uncached = await world.run(sync_body(sources=SOURCES))
    assert uncached is None and len(gen_reads(world)) == 2  # the read, as every pass made it before

    gi = cached_intake(world)
    world.kube.calls.clear()
    for _ in range(3):
        world.later()
        assert await world.run(sync_body(sources=SOURCES)) is None
    assert target(world) == {**VALUES, "DB_ADMIN": GENERATED}
    assert gen_reads(world) == [] and gi.reads == 0


async def test_the_cache_answers_only_in_the_consumers_own_namespace(world: World) -> None:
    """A generator of another namespace in the cache is no answer: the pass reads its own
    namespace (where there is none) and gets GeneratorNotFound, as before."""
    gi = cached_intake(world, namespace="other-team")
    world.apiserver.faults[("GET", GEN_PATH)] = kube_errors.NotFound(404, "NotFound", "gone")
    assert await world.run(sync_body(sources=SOURCES)) is None
    assert world.ready()["reason"] == reasons.GENERATOR_NOT_FOUND
    assert gi.reads == 1 and target(world) is None


async def test_a_cached_secret_the_generator_does_not_own_is_not_read(world: World) -> None:
    gi = cached_intake(world)
    labelled_only = {
        "metadata": {"name": "db", "namespace": NAMESPACE, "resourceVersion": "2", "labels": {}},
        "data": {"password": base64.b64encode(b"a tenant's own value").decode()},
    }
    gi._secret_changed((NAMESPACE, "db"), intake._slim_secret(labelled_only), listed=False)
    assert await world.run(sync_body(sources=SOURCES)) is not None
    assert world.ready()["reason"] == reasons.GENERATOR_NOT_READY
    assert target(world) is None and gi.reads == 0

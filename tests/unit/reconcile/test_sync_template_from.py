"""One pass with ``template.templateFrom`` (sync.py over rendering/template_sources.py): the
identity's opt-in first, sources read through the pass's reader, a failure that leaves the target
as it is, and a render in the shared worker pool like inline templates.

The world of test_sync.py (fake apiserver, fake service, real registry and indexes); the source
reader is a dict.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from test_sync import NAMESPACE, REFRESH_SECONDS, SECRET_PATH, SETTINGS, VALUES, World, sync_body, synced
from test_sync import world as world  # the fixture

from secretferry.reconcile import reasons
from secretferry.reconcile.rendering import pool as renderpool
from secretferry.reconcile.rendering import template_sources as ts

pytestmark = pytest.mark.looptime

SOURCE: ts.SourceKey = ("ConfigMap", NAMESPACE, "shared")
TARGET = {"template": {"templateFrom": [{"configMap": {"name": "shared"}}]}}


class Reader:
    def __init__(self, found: dict[ts.SourceKey, ts.Found]) -> None:
        self.found = found
        self.read_keys: list[ts.SourceKey] = []
        self.bound: dict[tuple[str, str], list[ts.SourceKey]] = {}

    async def read(self, key: ts.SourceKey) -> ts.Found:
        self.read_keys.append(key)
        return self.found.get(key, ts.Absent.MISSING)

    def bind(self, sync_key: tuple[str, str], keys: Iterable[ts.SourceKey]) -> None:
        self.bound[sync_key] = list(keys)


def configmap(data: dict[str, str]) -> ts.SourceObject:
    return ts.parse("ConfigMap", {"metadata": {"name": "shared", "namespace": NAMESPACE}, "data": data})


async def test_template_from_needs_the_identitys_opt_in_before_any_source_is_read(world: World) -> None:
    reader = Reader({SOURCE: configmap({"bit": "{{ 'Y' if DB_PASS[0] == 'h' else 'N' }}"})})
    world.deps.template_sources = reader
    world.credentials(allow_templates=None)

    await world.run(sync_body(target=TARGET))

    assert world.ready()["reason"] == reasons.TEMPLATES_NOT_ALLOWED
    assert reader.read_keys == [] and world.service.calls == 0
    assert world.target_writes() == []


async def test_a_missing_source_keeps_the_existing_target_and_looks_again_at_the_refresh(
    world: World,
) -> None:
    await synced(world)
    before = world.apiserver.objects[SECRET_PATH]
    reader = Reader({})
    world.deps.template_sources = reader
    world.credentials(allow_templates="id")

    delay = await world.run(sync_body(generation=2, target=TARGET))

    ready = world.ready()
    assert (ready["status"], ready["reason"]) == ("False", reasons.TEMPLATE_SOURCE_MISSING)
    assert f"ConfigMap {NAMESPACE}/shared" in ready["message"]
    assert world.target_writes() == []
    assert world.apiserver.objects[SECRET_PATH] == before
    assert reader.bound == {(NAMESPACE, "app"): [SOURCE]}  # its appearance queues this SecretSync
    assert delay == REFRESH_SECONDS


@pytest.mark.looptime(False)  # a real worker process renders: its pipe is real I/O
async def test_a_labelled_source_renders_in_the_worker_pool_with_inline_data_last(world: World) -> None:
    world.deps.template_sources = Reader(
        {SOURCE: configmap({"url": "db://{{ DB_USER }}", "user": "from the ConfigMap"})}
    )
    world.credentials(allow_templates="id")
    off_slot = world.record_off_slot()
    target = {"template": {**TARGET["template"], "data": {"user": "{{ DB_USER }}!"}}}
    try:
        await world.run(sync_body(target=target))
    finally:
        await renderpool.shared(SETTINGS).close()

    assert world.ready()["reason"] == reasons.SYNCED
    assert off_slot == ["left", "back"]  # rendered like inline templates: off the reconcile slot
    assert world.apiserver.secret_data(NAMESPACE, "app") == {
        "url": f"db://{VALUES['DB_USER']}",
        "user": f"{VALUES['DB_USER']}!",
    }


async def test_an_edit_that_drops_template_from_lets_go_of_its_sources(world: World) -> None:
    reader = Reader({})
    world.deps.template_sources = reader
    world.credentials(allow_templates="id")
    await world.run(sync_body(target=TARGET))
    assert reader.bound == {(NAMESPACE, "app"): [SOURCE]}

    await world.run(sync_body(generation=2))

    assert world.ready()["reason"] == reasons.SYNCED
    assert reader.bound == {(NAMESPACE, "app"): []}  # a change to the ConfigMap queues it no more

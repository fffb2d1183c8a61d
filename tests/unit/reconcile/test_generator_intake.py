"""The generator intake's bookkeeping: which SecretSyncs a new value queues, and the queue's
one-pass-at-a-time rule per generator."""

from __future__ import annotations

import asyncio
from typing import Any

from reconcile_fakes import FakeApiserver, FakeKube

from secretferry.kube import objects
from secretferry.reconcile import served
from secretferry.reconcile.generators import intake

KEY = ("PasswordGenerator", "app", "db")


def make(api: FakeApiserver | None = None) -> tuple[intake.GeneratorIntake, list[tuple[str, str]]]:
    queued: list[tuple[str, str]] = []
    kube = FakeKube((api or FakeApiserver()).answer)
    gi = intake.GeneratorIntake(
        kube=kube.port(), instance="t", enqueue_sync=queued.append, served=served.ServedNamespaces(None)
    )
    return gi, queued


def test_a_new_value_queues_exactly_the_secretsyncs_bound_to_it() -> None:
    gi, queued = make()
    gi.bind(("app", "s1"), [KEY])
    gi.bind(("app", "s2"), [KEY, ("UUIDGenerator", "app", "id")])
    gi.bind(("app", "s3"), [("UUIDGenerator", "app", "id")])
    gi._written(*KEY)
    assert sorted(queued) == [("app", "s1"), ("app", "s2")]
    gi.bind(("app", "s1"), [])  # an edit that drops the generatorRef
    queued.clear()
    gi._written(*KEY)
    assert queued == [("app", "s2")]
    assert gi.users(("UUIDGenerator", "app", "id")) == {("app", "s2"), ("app", "s3")}


async def test_the_queue_generates_once_and_queues_the_users() -> None:
    api = FakeApiserver()
    gi, queued = make(api)
    gi.bind(("app", "s1"), [KEY])
    body: dict[str, Any] = {
        "metadata": {"name": "db", "namespace": "app", "uid": "u", "generation": 1},
        "spec": {},
    }
    gi._bodies[KEY] = body
    gi.enqueue(KEY)
    gi.enqueue(KEY)  # a duplicate request is free
    runner = asyncio.create_task(gi.run())
    for _ in range(100):
        await asyncio.sleep(0)
        if queued:
            break
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)
    assert queued == [("app", "s1")]
    assert set(api.secret_data("app", "db") or {}) == {"password"}
    assert objects.path("Secret", "app", "db") in api.objects

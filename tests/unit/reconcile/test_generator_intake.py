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
    path = objects.path("Secret", "app", "db")
    for _ in range(100):
        await asyncio.sleep(0)
        if KEY in gi._stored:
            break
    assert set(api.secret_data("app", "db") or {}) == {"password"}
    assert queued == []  # not from the write: from its watch event, which the cache then holds
    stored = api.objects[path]
    gi._secret_changed(("app", "db"), intake._slim_secret(stored), listed=False)
    assert queued == [("app", "s1")]
    assert KEY not in gi._pending  # our own write's echo does not queue the generator again
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)


def test_the_secret_watch_keeps_only_generator_values_and_queues_users_on_change() -> None:
    gi, queued = make()
    gi.bind(("app", "s1"), [KEY])
    gi._bodies[KEY] = {"metadata": {"name": "db", "namespace": "app", "uid": "u"}, "spec": {}}
    owner = {"kind": "PasswordGenerator", "name": "db", "uid": "u", "controller": True}

    def secret(version: str, value: str, *, owned: bool = True) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": "db", "namespace": "app", "resourceVersion": version}
        if owned:
            meta["ownerReferences"] = [owner]
        return {"metadata": meta, "data": {"password": value, "other": "not kept"}}

    gi._secret_changed(("app", "db"), intake._slim_secret(secret("1", "djE=")), listed=True)
    assert gi._secrets[("app", "db")]["data"] == {"password": "djE="}  # the generator's key only
    assert queued == [("app", "s1")] and KEY not in gi._pending  # a listing: the value is new
    queued.clear()
    gi._secret_changed(("app", "db"), intake._slim_secret(secret("2", "djE=")), listed=False)
    assert queued == []  # same value (a label edit): the consumers read the same
    assert KEY in gi._pending  # not our write: the generator looks again
    gi._secret_changed(("app", "db"), intake._slim_secret(secret("3", "djI=")), listed=False)
    assert queued == [("app", "s1")]
    queued.clear()
    gi._secret_changed(("app", "db"), None, listed=False)  # deleted
    assert queued == [("app", "s1")] and ("app", "db") not in gi._secrets
    unowned = intake._slim_secret(secret("4", "eA==", owned=False))
    assert unowned["data"] == {}  # a Secret no generator controls: no value kept

"""template_intake: the labelled sources' watch re-queues their users; what the cache has not seen
is read from the apiserver, an unlabelled object's metadata alone.

No apiserver: the watch is replaced by a generator of events, the Kubernetes client by a
``FakeKube`` that records each request; the work queue records what was queued.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import REGISTRY
from reconcile_fakes import FakeKube, RecordingQueue

from secretferry.kube import errors as kube_errors
from secretferry.reconcile import problems, reasons, state, template_intake
from secretferry.reconcile.rendering import template_sources as ts

LABEL = {"secretferry.io/template-source": "true"}
SOURCE: ts.SourceKey = ("ConfigMap", "ns", "tpl")


def configmap(name: str = "tpl", data: dict[str, str] | None = None, namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": LABEL}, "data": data or {"a": "1"}}


def entry(key: state.SyncKey) -> state.SyncEntry:
    return state.SyncEntry(key=key, uid="u", generation=1, body={}, status={})


def intake_with(
    queue: RecordingQueue, kube: FakeKube | None = None, *syncs: state.SyncKey
) -> template_intake.TemplateSourceIntake:
    known = {key: entry(key) for key in syncs}
    return template_intake.TemplateSourceIntake(
        kube=(kube or FakeKube()).port(), syncs=known, queue=queue.port()
    )


def feed(monkeypatch: pytest.MonkeyPatch, events: list[Any], seen: dict[str, Any]) -> None:
    async def stream(kube: object, *, path: str, **kwargs: Any) -> AsyncIterator[Any]:
        seen.update(path=path, **kwargs)
        for event in events:
            yield event

    monkeypatch.setattr(template_intake.watching, "watch", stream)


Event = template_intake.watching.WatchEvent


async def test_a_changed_source_queues_every_secretsync_using_it_as_live_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queue = RecordingQueue()
    intake = intake_with(queue, None, ("ns", "one"), ("ns", "two"), ("ns", "other"))
    intake.bind(("ns", "one"), [SOURCE])
    intake.bind(("ns", "two"), [SOURCE])
    intake.bind(("ns", "other"), [("ConfigMap", "ns", "unrelated")])
    seen: dict[str, Any] = {}
    feed(monkeypatch, [Event("MODIFIED", configmap(data={"a": "2"}))], seen)
    rerenders = REGISTRY.get_sample_value("secretferry_template_source_rerenders_total") or 0.0

    await intake.watch("ConfigMap", "ns", asyncio.Event())

    assert queue.queued == {("ns", "one"): True, ("ns", "two"): True}
    assert REGISTRY.get_sample_value("secretferry_template_source_rerenders_total") == rerenders + 2
    assert REGISTRY.get_sample_value("secretferry_template_sources", {"kind": "ConfigMap"}) == 1
    # Only what consented is sent: the apiserver filters by the label.
    assert (
        seen["path"] == "/api/v1/configmaps"
        and seen["label_selector"] == "secretferry.io/template-source=true"
    )
    assert seen["namespace"] == "ns"
    assert intake.cached() == 1


async def test_an_unchanged_relisting_queues_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    queue = RecordingQueue()
    intake = intake_with(queue, None, ("ns", "one"))
    intake.bind(("ns", "one"), [SOURCE])
    same = configmap(data={"a": "1"})
    feed(monkeypatch, [Event("ADDED", same, listed=True), Event("SYNCED", {})], {})
    await intake.watch("ConfigMap", None, asyncio.Event())
    queue.queued.clear()

    feed(monkeypatch, [Event("ADDED", same, listed=True), Event("SYNCED", {})], {})
    await intake.watch("ConfigMap", None, asyncio.Event())
    assert queue.queued == {}


async def test_a_source_deleted_or_unlabelled_queues_its_users_and_leaves_the_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queue = RecordingQueue()
    intake = intake_with(queue, None, ("ns", "one"))
    intake.bind(("ns", "one"), [SOURCE])
    feed(monkeypatch, [Event("ADDED", configmap()), Event("DELETED", configmap())], {})
    await intake.watch("ConfigMap", "ns", asyncio.Event())
    assert queue.queued == {("ns", "one"): True}
    assert intake.cached() == 0


async def test_a_source_missing_from_a_relisting_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    queue = RecordingQueue()
    intake = intake_with(queue, None, ("ns", "one"))
    feed(monkeypatch, [Event("ADDED", configmap())], {})
    await intake.watch("ConfigMap", "ns", asyncio.Event())
    intake.bind(("ns", "one"), [SOURCE])

    feed(monkeypatch, [Event("SYNCED", {})], {})
    await intake.watch("ConfigMap", "ns", asyncio.Event())
    assert intake.cached() == 0
    assert queue.queued == {("ns", "one"): True}


async def test_a_deleted_secretsync_is_dropped_from_the_index_not_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queue = RecordingQueue()
    intake = intake_with(queue)  # ("ns", "gone") is no longer among the SecretSyncs
    intake.bind(("ns", "gone"), [SOURCE])
    feed(monkeypatch, [Event("ADDED", configmap())], {})
    await intake.watch("ConfigMap", "ns", asyncio.Event())
    assert queue.queued == {}
    assert intake.users(SOURCE) == set()


def test_rebinding_replaces_the_sources_a_secretsync_uses() -> None:
    intake = intake_with(RecordingQueue())
    other: ts.SourceKey = ("Secret", "ns", "other")
    intake.bind(("ns", "one"), [SOURCE, other])
    intake.bind(("ns", "one"), [other])
    assert intake.users(SOURCE) == set()
    assert intake.users(other) == {("ns", "one")}


# --- reads the cache has not seen ------------------------------------------------------------------


async def test_a_cached_source_is_read_without_a_request(monkeypatch: pytest.MonkeyPatch) -> None:
    kube = FakeKube()
    intake = intake_with(RecordingQueue(), kube)
    feed(monkeypatch, [Event("ADDED", configmap(data={"a": "cached"}))], {})
    await intake.watch("ConfigMap", "ns", asyncio.Event())
    got = await intake.read(SOURCE)
    assert isinstance(got, ts.SourceObject) and got.templates == {"a": "cached"}
    assert kube.calls == []


async def test_an_uncached_labelled_source_is_read_through_the_label_selector() -> None:
    async def answer(method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {"items": [configmap(data={"a": "fresh"})]}

    kube = FakeKube(answer)
    got = await intake_with(RecordingQueue(), kube).read(SOURCE)
    assert isinstance(got, ts.SourceObject) and got.templates == {"a": "fresh"}
    [(method, path, kwargs)] = kube.calls
    assert (method, path) == ("GET", "/api/v1/namespaces/ns/configmaps")
    assert kwargs["query"] == {
        "labelSelector": "secretferry.io/template-source=true",
        "fieldSelector": "metadata.name=tpl",
    }


@pytest.mark.parametrize(("exists", "expected"), [(True, ts.Absent.NOT_LABELLED), (False, ts.Absent.MISSING)])
async def test_an_unlabelled_object_is_asked_for_its_metadata_only(exists: bool, expected: ts.Absent) -> None:
    async def answer(method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        if "query" in kwargs:
            return {"items": []}  # the selector leaves it out: its data never leaves the apiserver
        if not exists:
            raise kube_errors.NotFound(404, "NotFound", "not found")
        return {"metadata": {"name": "theirs", "namespace": "ns"}}

    kube = FakeKube(answer)
    got = await intake_with(RecordingQueue(), kube).read(("Secret", "ns", "theirs"))
    assert got is expected
    _, (method, path, kwargs) = kube.calls
    assert (method, path) == ("GET", "/api/v1/namespaces/ns/secrets/theirs")
    assert kwargs["accept"].startswith("application/json;as=PartialObjectMetadata;")


async def test_an_apiserver_failure_is_a_retried_kubernetes_error() -> None:
    async def answer(method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        raise kube_errors.Unavailable(503, "ServiceUnavailable", "apiserver busy")

    with pytest.raises(problems.Problem) as caught:
        await intake_with(RecordingQueue(), FakeKube(answer)).read(SOURCE)
    assert caught.value.reason == reasons.KUBERNETES_ERROR and caught.value.retriable
    assert "reading template source ConfigMap ns/tpl" in caught.value.message

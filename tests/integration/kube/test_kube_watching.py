"""Our LIST+WATCH loop against the real apiserver."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from secretferry.kube import client, errors, objects, watching

pytestmark = pytest.mark.integration

SECRETS = "/api/v1/secrets"


def _secret(namespace: str, name: str, value: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "data": {"k": base64.b64encode(value.encode()).decode()},
    }


async def _next(
    stream: AsyncIterator[watching.WatchEvent], wait_seconds: float = 30.0
) -> watching.WatchEvent:
    return await asyncio.wait_for(anext(stream), wait_seconds)


def _name(event: watching.WatchEvent) -> str:
    return str(event.object["metadata"]["name"])


async def test_list_then_watch(kube: client.Kube, namespace: str) -> None:
    for i in range(3):
        await objects.apply(kube, _secret(namespace, f"s{i}", "v"), force=True)
    async with contextlib.aclosing(watching.watch(kube, path=SECRETS, namespace=namespace)) as stream:
        listed = [await _next(stream) for _ in range(4)]
        assert [e.type for e in listed] == ["ADDED"] * 3 + ["SYNCED"]
        assert sorted(_name(e) for e in listed[:3]) == ["s0", "s1", "s2"]
        assert listed[0].object["kind"] == "Secret" and listed[0].object["apiVersion"] == "v1"
        assert listed[3].object == {}

        await objects.apply(kube, _secret(namespace, "s1", "changed"), force=True)
        modified = await _next(stream)
        assert (modified.type, _name(modified)) == ("MODIFIED", "s1")
        await objects.apply(kube, _secret(namespace, "s3", "new"), force=True)
        added = await _next(stream)
        assert (added.type, _name(added)) == ("ADDED", "s3")
        await objects.delete(kube, kind="Secret", namespace=namespace, name="s0")
        deleted = await _next(stream)
        assert (deleted.type, _name(deleted)) == ("DELETED", "s0")


async def test_label_selector_filters(kube: client.Kube, namespace: str) -> None:
    await objects.apply(kube, _secret(namespace, "mine", "v", {"sf": "yes"}), force=True)
    await objects.apply(kube, _secret(namespace, "other", "v"), force=True)
    async with contextlib.aclosing(
        watching.watch(kube, path=SECRETS, namespace=namespace, label_selector="sf=yes")
    ) as stream:
        first, synced = await _next(stream), await _next(stream)
        assert (first.type, _name(first), synced.type) == ("ADDED", "mine", "SYNCED")
        await objects.apply(kube, _secret(namespace, "other", "changed"), force=True)
        await objects.apply(kube, _secret(namespace, "mine", "changed", {"sf": "yes"}), force=True)
        event = await _next(stream)
        assert (event.type, _name(event)) == ("MODIFIED", "mine")
        # Losing the label takes the object out of the selection: the server reports it DELETED.
        await objects.apply(kube, _secret(namespace, "mine", "changed"), force=True)
        event = await _next(stream)
        assert (event.type, _name(event)) == ("DELETED", "mine")


async def test_pagination(kube: client.Kube, namespace: str) -> None:
    for i in range(5):
        await objects.apply(kube, _secret(namespace, f"p{i}", "v"), force=True)
    path = watching.scoped_path(SECRETS, namespace)
    pages = [page async for page in watching.list_pages(kube, path=path, page_size=2)]
    assert [len(items) for items, _ in pages] == [2, 2, 1]
    assert all(version for _, version in pages)


async def test_rewatch_after_server_timeout_without_relisting(kube: client.Kube, namespace: str) -> None:
    async with contextlib.aclosing(
        watching.watch(kube, path=SECRETS, namespace=namespace, timeout_seconds=1)
    ) as stream:
        assert (await _next(stream)).type == "SYNCED"
        await asyncio.sleep(2.5)  # the server has ended at least one watch by now
        await objects.apply(kube, _secret(namespace, "late", "v"), force=True)
        event = await _next(stream)
        assert (event.type, _name(event)) == ("ADDED", "late")


async def test_gone_during_watch_relists(
    kube: client.Kube, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_watch_once = watching.watch_once
    expire_next = False

    async def expiring_once(*args: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        nonlocal expire_next
        if expire_next:
            expire_next = False
            raise errors.Gone(410, "Expired", "too old resource version")
        async for event in real_watch_once(*args, **kwargs):
            yield event

    monkeypatch.setattr(watching, "watch_once", expiring_once)
    await objects.apply(kube, _secret(namespace, "x", "v"), force=True)
    async with contextlib.aclosing(watching.watch(kube, path=SECRETS, namespace=namespace)) as stream:
        types = [(await _next(stream)).type for _ in range(2)]
        expire_next = True  # the watch that follows the first SYNCED is refused
        types += [(await _next(stream)).type for _ in range(2)]
        assert types == ["ADDED", "SYNCED", "ADDED", "SYNCED"]
        await objects.apply(kube, _secret(namespace, "y", "v"), force=True)
        event = await _next(stream)
        assert (event.type, _name(event)) == ("ADDED", "y")


async def test_a_change_during_a_held_back_list_arrives_before_the_list(
    kube: client.Kube, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The early watch: an object created while the LIST is held back (``list_after``) or still
    coming in is delivered at once, not after the whole listing (a new SecretSync during a
    10,000-object start-up)."""
    for i in range(3):
        await objects.apply(kube, _secret(namespace, f"old{i}", "v"), force=True)
    real_watch_once = watching.watch_once
    list_gate, early_watching = asyncio.Event(), asyncio.Event()

    async def observed_once(*args: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        early_watching.set()  # called with the version read before the LIST: later changes replay
        async for event in real_watch_once(*args, **kwargs):
            yield event

    monkeypatch.setattr(watching, "watch_once", observed_once)
    stream = watching.watch(kube, path=SECRETS, namespace=namespace, list_after=list_gate)
    async with contextlib.aclosing(stream):
        first = asyncio.ensure_future(_next(stream))
        await asyncio.wait_for(early_watching.wait(), 30)
        await objects.apply(kube, _secret(namespace, "fresh", "v"), force=True)
        event = await first
        assert (event.type, _name(event), event.listed) == ("ADDED", "fresh", False)
        list_gate.set()
        rest = [await _next(stream) for _ in range(5)]
        assert [e.type for e in rest] == ["ADDED"] * 4 + ["SYNCED"]
        assert all(e.listed for e in rest[:4])
        assert sorted(_name(e) for e in rest[:4]) == ["fresh", "old0", "old1", "old2"]
        # Afterwards the main watch carries on from the LIST's version.
        await objects.delete(kube, kind="Secret", namespace=namespace, name="old1")
        deleted = await _next(stream)
        assert (deleted.type, _name(deleted)) == ("DELETED", "old1")


async def test_a_metadata_only_watch_never_receives_data(kube: client.Kube, namespace: str) -> None:
    """``metadata_only``: lists and watch events carry PartialObjectMetadata (annotations, no
    ``data``), so a watch of every Secret of a namespace holds no Secret value."""
    listed_secret = _secret(namespace, "listed", "listed-value-marker")
    listed_secret["metadata"]["annotations"] = {"secretferry.io/allowed-identities": "a"}
    await objects.apply(kube, listed_secret, force=True)
    stream = watching.watch(kube, path=SECRETS, namespace=namespace, metadata_only=True)
    async with contextlib.aclosing(stream):
        listed = [await _next(stream) for _ in range(2)]
        assert [e.type for e in listed] == ["ADDED", "SYNCED"]
        assert listed[0].object["kind"] == "PartialObjectMetadata"
        assert listed[0].object["metadata"]["annotations"] == {"secretferry.io/allowed-identities": "a"}
        assert "data" not in listed[0].object
        changed = _secret(namespace, "listed", "changed-value-marker")
        changed["metadata"]["annotations"] = {}
        await objects.apply(kube, changed, force=True)
        modified = await _next(stream)
        assert modified.type == "MODIFIED" and modified.object["kind"] == "PartialObjectMetadata"
        assert "data" not in modified.object
        assert not modified.object["metadata"].get("annotations")
        assert "value-marker" not in repr(listed) + repr(modified)

"""Correlated Events on a real apiserver: events.k8s.io accepts our series updates, and an Event
deleted meanwhile is posted anew. The correlation's clock is virtual (starting now)."""

from __future__ import annotations

import time

import pytest

from secretferry.kube import client, eventcache, events

pytestmark = pytest.mark.integration


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def _post(
    kube: client.Kube, namespace: str, correlator: eventcache.Correlator, note: str = "n"
) -> bool:
    return await events.post(
        kube,
        regarding={"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "namespace": namespace, "uid": "u"},
        reason="Flapping",
        note=note,
        type="Warning",
        action="Sync",
        reporting_instance="test",
        correlator=correlator,
    )


async def _events(kube: client.Kube, namespace: str) -> list[dict[str, object]]:
    listed = await kube.request("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    return list(listed["items"])


async def test_repeats_update_one_events_series(kube: client.Kube, namespace: str) -> None:
    clock = Clock()
    correlator = eventcache.Correlator(clock=clock)
    for _ in range(20):
        assert await _post(kube, namespace, correlator)
        clock.now += 2
    [event] = await _events(kube, namespace)
    series = event["series"]
    assert isinstance(series, dict) and series["count"] == 16  # patched at the 16th, 30 s after the post
    assert series["lastObservedTime"].startswith(time.strftime("%Y-%m-%dT", time.gmtime(clock.now - 10)))

    await kube.request(
        "DELETE",
        f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/{event['metadata']['name']}",  # type: ignore[index]
    )
    clock.now += 30
    assert await _post(kube, namespace, correlator)
    [again] = await _events(kube, namespace)
    assert "series" not in again and again["note"] == "n"


async def test_ten_different_notes_make_one_combined_event(kube: client.Kube, namespace: str) -> None:
    clock = Clock()
    correlator = eventcache.Correlator(clock=clock)
    for i in range(20):
        assert await _post(kube, namespace, correlator, note=f"holds {i} keys")
        clock.now += 1
    notes = sorted(str(e["note"]) for e in await _events(kube, namespace))
    assert len(notes) == 10
    assert "(combined from similar events): holds 9 keys" in notes

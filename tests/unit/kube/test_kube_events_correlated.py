"""kube.events.post through the correlation: what reaches the apiserver, and the metrics."""

from __future__ import annotations

from typing import Any, cast

from secretferry import metrics
from secretferry.kube import client, errors, eventcache, events

REGARDING: events.ObjectRef = {
    "apiVersion": "secretferry.io/v1alpha1",
    "kind": "SecretSync",
    "name": "app",
    "namespace": "ns",
    "uid": "u1",
}


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.fail: errors.KubeError | None = None

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.calls.append((method, path, kwargs))
        if self.fail is not None:
            fail, self.fail = self.fail, None
            raise fail
        return {}


def counted(result: str) -> float:
    return metrics.EVENTS.labels(result=result)._value.get()


async def _post(kube: Recorder, correlator: eventcache.Correlator, note: str = "login rejected") -> bool:
    return await events.post(
        cast(client.Kube, kube),
        regarding=REGARDING,
        reason="AuthFailed",
        note=note,
        type="Warning",
        action="Sync",
        reporting_instance="pod-1",
        namespaces=events.TerminatingNamespaces(),
        correlator=correlator,
    )


async def test_repeats_become_one_event_with_a_series() -> None:
    clock, kube = Clock(), Recorder()
    correlator = eventcache.Correlator(clock=clock)
    posted, series = counted("posted"), counted("series")
    assert await _post(kube, correlator)
    for _ in range(5):
        clock.now += 1
        assert await _post(kube, correlator)
    assert [m for m, _, _ in kube.calls] == ["POST"]
    name = kube.calls[0][2]["body"]["metadata"]["name"]
    clock.now += 30
    assert await _post(kube, correlator)
    method, path, kwargs = kube.calls[-1]
    assert (method, path) == ("PATCH", f"/apis/events.k8s.io/v1/namespaces/ns/events/{name}")
    assert kwargs["body"] == {"series": {"count": 7, "lastObservedTime": "2023-11-14T22:13:55.000000Z"}}
    assert kwargs["content_type"] == "application/merge-patch+json"
    assert (counted("posted") - posted, counted("series") - series) == (1, 6)


async def test_an_event_gone_from_the_apiserver_is_posted_anew() -> None:
    clock, kube = Clock(), Recorder()
    correlator = eventcache.Correlator(clock=clock)
    await _post(kube, correlator)
    clock.now += 60
    kube.fail = errors.NotFound(404, "NotFound", "events not found")
    assert await _post(kube, correlator)
    assert [m for m, _, _ in kube.calls] == ["POST", "PATCH", "POST"]
    clock.now += 1
    await _post(kube, correlator)  # counts into the new one
    assert len(kube.calls) == 3


async def test_a_refused_post_is_not_counted_into_and_the_next_is_posted() -> None:
    kube = Recorder()
    correlator = eventcache.Correlator(clock=Clock())
    failed = counted("failed")
    kube.fail = errors.Forbidden(403, "Forbidden", "no")
    assert not await _post(kube, correlator)
    assert counted("failed") - failed == 1
    assert await _post(kube, correlator)
    assert [m for m, _, _ in kube.calls] == ["POST", "POST"]


async def test_a_flapping_object_is_rate_limited_and_its_notes_combined() -> None:
    clock, kube = Clock(), Recorder()
    correlator = eventcache.Correlator(clock=clock)
    dropped, combined = counted("dropped"), metrics.EVENTS_COMBINED._value.get()
    results = []
    for i in range(40):  # a new note every second: a value count, a key name ...
        clock.now += 1
        results.append(await _post(kube, correlator, note=f"holds {i} keys"))
    notes = [kw["body"]["note"] for m, _, kw in kube.calls if m == "POST"]
    assert len(notes) == 10  # 9 of their own, then one combined Event
    assert notes[-1] == "(combined from similar events): holds 9 keys"
    # The combined Event counts the rest; a patch every 30 s at most.
    assert [m for m, _, _ in kube.calls].count("PATCH") == 1
    assert metrics.EVENTS_COMBINED._value.get() - combined == 31
    assert counted("dropped") == dropped and all(results)


async def test_over_the_rate_limit_nothing_is_sent_and_the_drop_is_counted() -> None:
    clock, kube = Clock(), Recorder()
    correlator = eventcache.Correlator(clock=clock, burst=2)
    dropped = counted("dropped")
    results = [await _post(kube, correlator, note=f"note {i}") for i in range(4)]
    assert results == [True, True, False, False]
    assert len(kube.calls) == 2
    assert counted("dropped") - dropped == 2

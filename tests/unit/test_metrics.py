"""The metrics registry: no ``*_created`` series, a queue depth read from the running scheduler,
and per-object series that exist only when asked for and only as long as their SecretSync.

Read back from prometheus_client's default registry, as ``/metrics`` would serve it.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, generate_latest

from secretferry import metrics
from secretferry.reconcile import scheduler


def test_no_created_series_even_for_counters_and_histograms_with_samples() -> None:
    metrics.SYNCS.labels(result="written").inc()
    metrics.SYNC_DURATION.observe(0.01)
    metrics.STREAM_RECONNECTS.inc()
    names = {s.name for family in REGISTRY.collect() for s in family.samples}
    assert "secretferry_syncs_total" in names and "secretferry_sync_duration_seconds_count" in names
    assert [n for n in names if n.endswith("_created")] == []
    assert b"_created" not in generate_latest(REGISTRY)


def _depth(queue: str) -> float | None:
    return REGISTRY.get_sample_value("secretferry_queue_depth", {"queue": queue})


async def test_the_queue_depth_is_what_the_running_scheduler_holds_at_the_scrape() -> None:
    async def never(key: str) -> None:
        raise AssertionError("no worker runs")

    queue: scheduler.Scheduler[str] = scheduler.Scheduler(never, workers=0)
    queue.enqueue("a", live=True)
    queue.start()
    try:
        queue.enqueue("b", live=True)
        for key in ("c", "d", "e"):
            queue.enqueue(key, live=False)
        queue.enqueue("f", live=False, first=True)
        assert (_depth("live"), _depth("backlog")) == (2.0, 4.0)

        queue.enqueue("c", live=True)  # promoted: counted once, as live
        queue.forget("d")
        assert (_depth("live"), _depth("backlog")) == (3.0, 2.0)
    finally:
        await queue.stop()
    assert (_depth("live"), _depth("backlog")) == (0.0, 0.0)  # stopped: nothing is read from it


def _ready(key: tuple[str, str], status: str) -> float | None:
    namespace, name = key
    labels = {"namespace": namespace, "name": name, "condition": "Ready", "status": status}
    return REGISTRY.get_sample_value("secretferry_secretsync_condition", labels)


def test_condition_series_follow_the_status_and_go_with_the_object(per_object: None) -> None:
    key = ("team-m", "app")
    metrics.set_sync_condition(key, "Ready", "False")
    assert (_ready(key, "True"), _ready(key, "False")) == (0.0, 1.0)
    metrics.set_sync_condition(key, "Ready", "True")
    assert (_ready(key, "True"), _ready(key, "False")) == (1.0, 0.0)

    metrics.forget_sync(key)
    assert (_ready(key, "True"), _ready(key, "False")) == (None, None)
    metrics.forget_sync(key)  # twice (the intake and a late report) is harmless


def test_condition_series_are_off_unless_asked_for() -> None:
    key = ("team-m", "off")
    metrics.set_sync_condition(key, "Ready", "True")
    assert _ready(key, "True") is None

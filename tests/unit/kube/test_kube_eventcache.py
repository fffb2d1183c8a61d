"""secretferry.kube.eventcache: client-go's Event correlation, on virtual time."""

from __future__ import annotations

from secretferry.kube import eventcache

SOURCE = ("secretferry.io/operator", "pod-1")


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def obj(name: str = "app") -> tuple[str, ...]:
    return ("secretferry.io/v1alpha1", "SecretSync", "ns", name, f"uid-{name}")


def decide(
    c: eventcache.Correlator, note: str = "login rejected", *, name: str = "app", reason: str = "AuthFailed"
) -> eventcache.Decision:
    decision = c.decide(
        source=SOURCE, regarding=obj(name), type="Warning", reason=reason, action="Sync", note=note
    )
    if decision.action == "post":
        assert decision.series is not None
        c.posted(decision.series, f"{name}.{id(decision)}")
    return decision


def test_a_repeat_is_counted_into_the_first_event_and_patched_at_most_every_30_s() -> None:
    clock = Clock()
    c = eventcache.Correlator(clock=clock)
    assert decide(c).action == "post"
    actions = []
    for _ in range(10):  # one a second
        clock.now += 1
        actions.append(decide(c).action)
    assert actions == ["count"] * 10  # no request: within 30 s of the post
    clock.now += 25
    patch = decide(c)
    assert patch.action == "patch" and patch.series is not None
    assert patch.series.count == 12  # every occurrence so far, the post included
    assert patch.series.last_observed == clock.now


def test_a_series_ends_6_minutes_after_its_last_occurrence() -> None:
    clock = Clock()
    c = eventcache.Correlator(clock=clock)
    assert decide(c).action == "post"
    clock.now += eventcache.SERIES_WINDOW_SECONDS + 1
    assert decide(c).action == "post"


def test_an_object_gets_25_requests_then_one_per_5_minutes() -> None:
    clock = Clock()
    c = eventcache.Correlator(clock=clock)
    # Flapping between different reasons: each a new Event (no series, no aggregation).
    first = [decide(c, reason=f"R{i}").action for i in range(30)]
    assert first == ["post"] * 25 + ["drop"] * 5
    clock.now += 299
    assert decide(c, reason="late").action == "drop"
    clock.now += 1
    assert decide(c, reason="later").action == "post"
    assert decide(c, reason="latest").action == "drop"
    # Another object has its own bucket.
    assert decide(c, name="other", reason="R0").action == "post"


def test_a_dropped_repeat_waits_in_memory_for_a_token() -> None:
    clock = Clock()
    c = eventcache.Correlator(clock=clock, burst=1)
    assert decide(c).action == "post"
    clock.now += 60
    repeat = decide(c)
    assert repeat.action == "count"  # due for a patch, but no token: sent later
    clock.now += 300
    later = decide(c)
    assert later.action == "patch" and later.series is not None and later.series.count == 3


def test_ten_different_notes_in_10_minutes_are_combined_into_one_event() -> None:
    clock = Clock()
    c = eventcache.Correlator(clock=clock)
    decisions = []
    for i in range(14):
        clock.now += 10
        decisions.append(decide(c, note=f"key K{i} changed"))
    assert [d.combined for d in decisions] == [False] * 9 + [True] * 5
    combined = decisions[9]
    assert combined.action == "post" and combined.note == "(combined from similar events): key K9 changed"
    # Into the combined Event: counted, patched 30 s after its post.
    assert [d.action for d in decisions[10:]] == ["count", "count", "patch", "count"]
    # Ten minutes of quiet: a fresh start.
    clock.now += eventcache.AGGREGATE_WINDOW_SECONDS + 1
    fresh = decide(c, note="key K99 changed")
    assert not fresh.combined and fresh.action == "post"


def test_a_repeat_while_the_first_post_is_on_its_way_is_counted_into_it() -> None:
    c = eventcache.Correlator(clock=Clock())
    first = c.decide(source=SOURCE, regarding=obj(), type="Warning", reason="R", action="Sync", note="n")
    second = c.decide(source=SOURCE, regarding=obj(), type="Warning", reason="R", action="Sync", note="n")
    assert (first.action, second.action) == ("post", "count")
    assert first.series is second.series and second.series is not None and second.series.count == 2


def test_a_failed_post_is_forgotten_and_an_expired_event_posted_anew() -> None:
    clock = Clock()
    c = eventcache.Correlator(clock=clock)
    failed = c.decide(source=SOURCE, regarding=obj(), type="Warning", reason="R", action="Sync", note="n")
    assert failed.series is not None
    c.forget(failed.series)
    assert decide(c, "n", reason="R").action == "post"
    clock.now += 60
    patch = decide(c, "n", reason="R")
    assert patch.action == "patch" and patch.series is not None
    fresh = c.renew(patch.series)
    assert fresh.count == 1 and fresh.name is None


def test_memory_is_bounded_like_client_go() -> None:
    clock = Clock()
    c = eventcache.Correlator(clock=clock, cache_entries=100)
    for i in range(1_000):
        decide(c, name=f"s{i}")
    assert c.sizes() == (100, 100, 100)
    # The least recently used went first: the oldest object is new again (a full bucket).
    assert decide(c, name="s0").action == "post"

from __future__ import annotations

import random

from secretferry.reconcile import reasons
from secretferry.reconcile.state import ScopeIndex
from secretferry.service.scopes import Scope


def scope(path: str = "/", env: str = "dev") -> Scope:
    return Scope(
        identity_key="MachineIdentity/ns/id",
        project_id="p1",
        environment=env,
        path=path,
        recursive=False,
        include_imports=True,
        expand_references=True,
        tag_slugs=(),
        metadata_filter=(),
    )


def test_bind_reports_membership_and_stream_changes() -> None:
    idx = ScopeIndex(jitter_fraction=0.0, rng=random.Random(1))
    a, b = scope("/a"), scope("/b")
    added, removed = idx.bind(("ns", "s1"), [a], instant=True, refresh_seconds=60, now=0)
    assert added == {a} and removed == set()
    added, removed = idx.bind(("ns", "s2"), [a], instant=True, refresh_seconds=60, now=0)
    assert added == set()  # a shared scope: nothing new to stream or fetch
    added, removed = idx.bind(("ns", "s1"), [b], instant=False, refresh_seconds=60, now=0)
    assert added == {b} and removed == set()  # s2 still reads a
    assert idx.keys_of(a) == {("ns", "s2")}
    assert set(idx.streamed_by_project()[("MachineIdentity/ns/id", "p1")]) == {a}
    assert idx.unbind(("ns", "s2")) == {a}
    assert idx.get(a) is None


def test_due_scopes_mark_fresh_after_and_relax_while_streaming() -> None:
    idx = ScopeIndex(jitter_fraction=0.0, rng=random.Random(1))
    a = scope("/a")
    idx.bind(("ns", "s1"), [a], instant=True, refresh_seconds=60, now=0)
    assert idx.due(30, streaming_seconds=3600) == []
    assert idx.due(60, streaming_seconds=3600) == [a]
    state = idx.get(a)
    assert state is not None and state.fresh_after == 60 and state.next_due == 120
    state.mode = reasons.STREAMING
    assert idx.due(120, streaming_seconds=3600) == [a]
    assert state.next_due == 120 + 3600


def test_one_list_per_scope_cycle_no_matter_how_many_syncs() -> None:
    idx = ScopeIndex(jitter_fraction=0.1, rng=random.Random(2))
    a = scope("/shared")
    for i in range(100):
        idx.bind(("ns", f"s{i}"), [a], instant=False, refresh_seconds=60, now=0)
    assert len(idx.all()) == 1
    assert len(idx.keys_of(a)) == 100


def test_target_ownership_index() -> None:
    from secretferry.reconcile.state import TargetCache

    cache = TargetCache()
    cache.own(("Secret", "ns", "a"), ("ns", "s1"))
    cache.own(("Secret", "ns", "b"), ("ns", "s1"))
    cache.own(("Secret", "ns", "b"), ("ns", "s2"))  # moved to another SecretSync
    cache.release(("ns", "s1"))
    assert cache.owner_of(("Secret", "ns", "a")) is None
    assert cache.owner_of(("Secret", "ns", "b")) == ("ns", "s2")
    cache.release(("ns", "s2"))
    assert cache.owner_of(("Secret", "ns", "b")) is None


def test_leaving_the_stream_or_a_shorter_interval_takes_effect_now() -> None:
    idx = ScopeIndex(jitter_fraction=0.0, rng=random.Random(3))
    a = scope("/a")
    idx.bind(("ns", "s1"), [a], instant=True, refresh_seconds=600, now=0)
    state = idx.get(a)
    assert state is not None
    state.mode = reasons.STREAMING
    assert idx.due(600, streaming_seconds=3600) == [a]
    assert state.next_due == 600 + 3600  # relaxed while streaming
    idx.bind(("ns", "s1"), [a], instant=False, refresh_seconds=600, now=700)
    assert state.next_due == 700 + 600  # off the stream: the polling interval, from now
    assert idx.interval(a, streaming_seconds=3600) == 600
    idx.bind(("ns", "s1"), [a], instant=False, refresh_seconds=5, now=710)
    assert state.next_due == 715
    idx.bind(("ns", "s1"), [a], instant=False, refresh_seconds=5, now=712)
    assert state.next_due == 715  # an unchanged interval does not move it

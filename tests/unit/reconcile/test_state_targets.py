"""TargetCache: what the watch saw, and telling our own writes' echoes from drift."""

from __future__ import annotations

from typing import Any

from secretferry.reconcile import state

SECRET_A: state.TargetKey = ("Secret", "ns", "a")


def _obj(data: dict[str, str], *, version: str = "1") -> dict[str, Any]:
    return {
        "kind": "Secret",
        "metadata": {"name": "a", "namespace": "ns", "resourceVersion": version},
        "data": data,
    }


def test_a_remembered_object_is_last_seen_until_forgotten() -> None:
    cache = state.TargetCache()
    assert cache.last_seen(SECRET_A) is None and cache.count() == 0
    cache.remember(SECRET_A, _obj({"k": "dg=="}))
    seen = cache.last_seen(SECRET_A)
    assert seen is not None and seen["data"] == {"k": "dg=="} and cache.count() == 1
    cache.forget(SECRET_A)
    assert cache.last_seen(SECRET_A) is None and cache.count() == 0


def test_a_relisting_forgets_only_the_unseen_objects_of_its_kind_and_namespace() -> None:
    cache = state.TargetCache()
    keys: list[state.TargetKey] = [
        ("Secret", "ns", "seen"),
        ("Secret", "ns", "gone"),
        ("Secret", "other", "elsewhere"),
        ("ConfigMap", "ns", "other-kind"),
    ]
    for key in keys:
        cache.remember(key, _obj({}))
    gone = cache.forget_unseen("Secret", namespace="ns", seen={("Secret", "ns", "seen")})
    assert gone == [("Secret", "ns", "gone")]
    assert [k for k in keys if cache.last_seen(k) is not None] == [keys[0], keys[2], keys[3]]
    # A cluster-wide listing covers every namespace.
    assert cache.forget_unseen("Secret", namespace=None, seen=set()) == [keys[0], keys[2]]
    assert cache.count() == 1


def test_a_write_in_flight_is_an_echo_until_it_fails() -> None:
    cache = state.TargetCache()
    cache.expect(SECRET_A, {"data": {"k": "dg=="}})
    assert cache.is_echo(SECRET_A, _obj({"k": "dg=="}))
    assert not cache.is_echo(SECRET_A, _obj({"k": "other"}))  # someone else's edit: drift
    cache.write_failed(SECRET_A)
    assert not cache.is_echo(SECRET_A, _obj({"k": "dg=="}))


def test_a_finished_write_is_recognised_by_its_resource_version() -> None:
    cache = state.TargetCache()
    cache.expect(SECRET_A, {"data": {"k": "dg=="}})
    cache.written(SECRET_A, _obj({"k": "dg=="}, version="7"), cache=True)
    assert cache.is_echo(SECRET_A, _obj({"k": "dg=="}, version="7"))
    # The expectation is over: the same data under a later version is someone else's write.
    assert not cache.is_echo(SECRET_A, _obj({"k": "dg=="}, version="8"))
    seen = cache.last_seen(SECRET_A)
    assert seen is not None and seen["metadata"]["resourceVersion"] == "7"


def test_a_merge_write_is_not_cached_as_the_object_last_seen() -> None:
    """A Merge target carries no managed-by label, so the label-selected watch would never
    refresh a cached copy of it."""
    cache = state.TargetCache()
    cache.written(SECRET_A, _obj({"k": "dg=="}, version="3"), cache=False)
    assert cache.last_seen(SECRET_A) is None
    assert cache.is_echo(SECRET_A, _obj({}, version="3"))

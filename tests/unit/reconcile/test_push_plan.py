"""PushSecret's write plan: one write per changed key, conflicts named, deletions only of ours."""

from __future__ import annotations

import pytest

from secretferry.reconcile.push import plan as plan_mod
from secretferry.reconcile.push import pushing


def digest(key: str, value: str) -> str:
    return pushing.digest_for(b"k" * 32, "ns", "push")(key, value)


def rec(key: str, source: str, remote: str | None = None) -> plan_mod.Record:
    return plan_mod.Record(
        source=digest(key, source), remote=digest(key, remote if remote is not None else source)
    )


def run(desired, remote, last, *, update="Replace", deletion="Retain"):  # type: ignore[no-untyped-def]
    return plan_mod.plan(desired, remote, last, digest=digest, update_policy=update, deletion_policy=deletion)


def test_a_missing_key_is_created() -> None:
    p = run({"A": "1"}, {}, {})
    assert p.creates == {"A": "1"} and not p.updates and not p.conflicts and p.writes == 1


def test_nothing_changed_means_no_write() -> None:
    p = run({"A": "1", "B": "2"}, {"A": "1", "B": "2"}, {"A": rec("A", "1"), "B": rec("B", "2")})
    assert p.writes == 0 and set(p.records) == {"A", "B"}


def test_one_changed_key_is_one_write() -> None:
    p = run({"A": "1", "B": "3"}, {"A": "1", "B": "2"}, {"A": rec("A", "1"), "B": rec("B", "2")})
    assert p.updates == {"B": "3"} and p.writes == 1 and not p.conflicts


def test_an_equal_value_already_there_is_adopted_without_a_write() -> None:
    p = run({"A": "1"}, {"A": "1"}, {})
    assert p.writes == 0 and p.records["A"] == rec("A", "1")


@pytest.mark.parametrize(
    ("update", "written"),
    [("Replace", {"A": "mine"}), ("IfNotExists", {})],
)
def test_a_value_changed_behind_our_back_is_a_conflict(update: str, written: dict[str, str]) -> None:
    p = run({"A": "mine"}, {"A": "theirs"}, {"A": rec("A", "mine")}, update=update)
    assert p.conflicts == ["A"]
    assert p.updates == written
    assert "A" not in p.records  # under IfNotExists no longer ours


def test_a_value_there_before_us_is_a_conflict_too() -> None:
    p = run({"A": "mine"}, {"A": "theirs"}, {}, update="IfNotExists")
    assert p.conflicts == ["A"] and p.writes == 0


@pytest.mark.parametrize(
    ("deletion", "update", "remote", "deleted"),
    [
        ("Delete", "IfNotExists", {"GONE": "old"}, ["GONE"]),  # still what we left
        ("Delete", "IfNotExists", {"GONE": "changed"}, []),  # someone else's now: kept
        ("Delete", "Replace", {"GONE": "changed"}, ["GONE"]),
        ("Retain", "Replace", {"GONE": "old"}, []),
        ("Delete", "Replace", {}, []),  # already gone
    ],
)
def test_a_key_that_left_the_source(
    deletion: str, update: str, remote: dict[str, str], deleted: list[str]
) -> None:
    p = run({}, remote, {"GONE": rec("GONE", "old")}, update=update, deletion=deletion)
    assert p.deletes == deleted
    assert "GONE" not in p.records


def test_removal_deletes_only_what_we_left_under_ifnotexists() -> None:
    last = {"A": rec("A", "1"), "B": rec("B", "2")}
    out = plan_mod.plan_removal(
        {"A": "1", "B": "changed"}, last, digest=digest, update_policy="IfNotExists", deletion_policy="Delete"
    )
    assert out == ["A"]


def test_hmacs_differ_per_pushsecret() -> None:
    other = pushing.digest_for(b"k" * 32, "ns", "other")
    assert digest("A", "v") != other("A", "v") and digest("A", "v") != digest("B", "v")

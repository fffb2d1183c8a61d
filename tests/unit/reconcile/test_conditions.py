"""Conditions: one set at a time, its transition time kept unless its status changes; find; flips."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import health_table
import pytest

from secretferry.models import base as models_base
from secretferry.reconcile import conditions, reasons

BEFORE = datetime(2024, 1, 1, tzinfo=UTC)
NOW = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)
BEFORE_TEXT = "2024-01-01T00:00:00Z"  # as the apiserver hands it back


def ready(status: str = "True", reason: str = "Synced", **extra: Any) -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason, "message": "m", **extra}


def set_ready(
    previous: Sequence[Mapping[str, Any]],
    status: conditions.Status,
    *,
    reason: str = "Other",
    message: str = "changed",
    generation: int | None = 2,
) -> list[dict[str, Any]]:
    """``set_condition`` for Ready, as the JSON a status patch carries."""
    result = conditions.set_condition(
        previous,
        type_="Ready",
        status=status,
        reason=reason,
        message=message,
        observed_generation=generation,
        now=NOW,
    )
    return [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result]


def transition_of(written: Sequence[Mapping[str, Any]]) -> datetime:
    found = conditions.find(written, "Ready")
    assert found is not None
    return datetime.fromisoformat(found["lastTransitionTime"])


@pytest.mark.parametrize(
    ("previous", "status", "transition"),
    [
        ([], "True", NOW),  # a first condition starts now
        ([ready("True", lastTransitionTime=BEFORE_TEXT)], "True", BEFORE),  # new reason, same status
        ([ready("True", lastTransitionTime=BEFORE_TEXT)], "False", NOW),
        ([ready("False", lastTransitionTime=BEFORE_TEXT)], "Unknown", NOW),
        ([ready("False", lastTransitionTime=BEFORE_TEXT)], "False", BEFORE),
        ([ready("True", lastTransitionTime="2024-01-01T02:00:00+02:00")], "True", BEFORE),  # same instant
        ([ready("True")], "True", NOW),  # nothing to keep
        ([ready("True", lastTransitionTime="yesterday")], "True", NOW),
        ([ready("True", lastTransitionTime="2024-01-01T00:00:00")], "True", NOW),  # no zone: not kept
        ([ready("True", lastTransitionTime=12345)], "True", NOW),
    ],
)
def test_the_transition_time_moves_only_when_the_status_changes(
    previous: list[dict[str, Any]], status: conditions.Status, transition: datetime
) -> None:
    assert transition_of(set_ready(previous, status)) == transition


def test_the_condition_written_carries_what_was_asked() -> None:
    (written, stalled) = set_ready([ready("True", lastTransitionTime=BEFORE_TEXT)], "False", reason="Broken")

    assert stalled == {**written, "type": "Stalled", "status": "True"}
    assert written == {
        "type": "Ready",
        "status": "False",
        "reason": "Broken",
        "message": "changed",
        "observedGeneration": 2,
        "lastTransitionTime": "2024-06-01T12:00:00Z",
    }


def test_no_generation_means_no_observed_generation() -> None:
    (written,) = set_ready([], "True", generation=None)
    assert "observedGeneration" not in written


def test_a_condition_read_back_and_set_again_unchanged_is_written_the_same() -> None:
    """What makes a repeated pass a no-op: the JSON written, read back, gives the same JSON."""
    first = set_ready([], "True", reason="Synced", message="ok")
    again = conditions.set_condition(
        first,
        type_="Ready",
        status="True",
        reason="Synced",
        message="ok",
        observed_generation=2,
        now=NOW + timedelta(hours=1),
    )
    assert [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in again] == first


def test_other_conditions_are_kept_and_all_are_sorted_by_type() -> None:
    zeta = {"type": "Zeta", "status": "True", "reason": "Z", "message": "", "lastTransitionTime": BEFORE_TEXT}
    alpha = {"type": "Alpha", "status": "False", "reason": "A", "message": "a"}
    previous = [zeta, ready("True", lastTransitionTime=BEFORE_TEXT), alpha]
    before = copy.deepcopy(previous)

    written = set_ready(previous, "True")

    assert [c["type"] for c in written] == ["Alpha", "Ready", "Zeta"]
    assert written[0] == alpha and written[2] == zeta
    assert previous == before  # the conditions as read are not changed in place


def test_another_condition_that_does_not_parse_is_dropped() -> None:
    broken = {"type": "Broken", "status": "Maybe"}

    written = set_ready([broken, ready()], "True")

    assert [c["type"] for c in written] == ["Ready"]


def test_a_message_too_long_for_a_condition_is_cut_not_refused() -> None:
    (written, stalled) = set_ready([], "False", message="x" * (models_base.CONDITION_MESSAGE_MAX + 10))
    assert len(written["message"]) == models_base.CONDITION_MESSAGE_MAX
    assert stalled["message"] == written["message"]


def test_now_has_the_precision_kubernetes_keeps() -> None:
    moment = conditions.now()
    assert moment.microsecond == 0
    assert moment.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    ("found", "type_", "expected"),
    [
        ([], "Ready", None),
        ([{"type": "Other"}], "Ready", None),
        (
            [{"type": "Other"}, {"type": "Ready", "status": "True"}],
            "Ready",
            {"type": "Ready", "status": "True"},
        ),
        ([{"type": "Ready", "status": "True"}], "ready", None),  # types are case-sensitive
    ],
)
def test_find(found: list[dict[str, Any]], type_: str, expected: dict[str, Any] | None) -> None:
    assert conditions.find(found, type_) == expected


@pytest.mark.parametrize(
    ("before", "after", "flipped"),
    [
        ([], [], False),
        ([ready()], [], False),  # nothing to report on
        ([], [ready()], True),  # a first condition
        ([ready("True")], [ready("False")], True),
        ([ready("False", "A")], [ready("False", "B")], True),  # another reason is another story
        ([ready("False", "A")], [ready("False", "A", message="other")], False),  # same story, new words
        ([ready(lastTransitionTime=BEFORE_TEXT)], [ready(lastTransitionTime="2025-01-01T00:00:00Z")], False),
        ([{"type": "Other", "status": "True"}], [ready()], True),
    ],
)
def test_transitioned(before: list[dict[str, Any]], after: list[dict[str, Any]], flipped: bool) -> None:
    assert conditions.transitioned(before, after, "Ready") is flipped


def test_a_transition_kept_from_another_zone_is_written_in_utc() -> None:
    (written,) = set_ready([ready("True", lastTransitionTime="2024-01-01T02:00:00+02:00")], "True")
    assert written["lastTransitionTime"] == BEFORE_TEXT


def test_a_message_shows_control_characters_escaped() -> None:
    # A source path or key name from the tenant or the service, quoted in the message.
    (written, stalled) = set_ready([], "False", message="source path /a\nReady: True\u202e")
    assert written["message"] == "source path /a\\nReady: True\\u202e"
    assert stalled["message"] == written["message"]


@pytest.mark.parametrize("name", sorted(health_table.READY_REASONS))
def test_ready_false_is_stalled_exactly_when_only_a_change_fixes_it(name: str) -> None:
    """kstatus' Stalled (Failed for Flux) for each reason, as tests/unit/health_table.py decides."""
    row = health_table.READY_REASONS[name]
    written = set_ready([], row.ready, reason=getattr(reasons, name), message="why")
    stalled = conditions.find(written, "Stalled")
    assert (stalled is not None) == row.stalled
    if stalled is not None:
        ready_ = conditions.find(written, "Ready")
        assert ready_ is not None
        assert stalled == {**ready_, "type": "Stalled", "status": "True"}


def test_stalled_goes_when_ready_recovers_and_keeps_its_time_while_it_stays() -> None:
    stalled = {**ready("True", reason="Forbidden", lastTransitionTime=BEFORE_TEXT), "type": "Stalled"}
    previous = [ready("False", reason="Forbidden", lastTransitionTime=BEFORE_TEXT), stalled]
    still = set_ready(previous, "False", reason="SourceNotFound")
    found = conditions.find(still, "Stalled")
    assert found is not None and found["reason"] == "SourceNotFound"
    assert found["lastTransitionTime"] == "2024-01-01T00:00:00Z"
    assert [c["type"] for c in set_ready(previous, "True", reason="Synced")] == ["Ready"]
    assert [c["type"] for c in set_ready(previous, "False", reason="ServiceUnavailable")] == ["Ready"]


def test_other_conditions_leave_stalled_alone() -> None:
    stalled = {**ready("True", reason="PushConflict", lastTransitionTime=BEFORE_TEXT), "type": "Stalled"}
    written = conditions.set_condition(
        [ready("False", reason="PushConflict"), stalled],
        type_="Conflict",
        status="True",
        reason="PushConflict",
        message="m",
        observed_generation=2,
        now=NOW,
    )
    assert [c.type for c in written] == ["Conflict", "Ready", "Stalled"]

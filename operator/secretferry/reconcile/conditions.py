"""Pure helpers for ``status.conditions``: set one condition, keep the transition time stable.

Why this matters: a status patch that only moves ``lastTransitionTime`` is a write that changes
nothing for the user but echoes back as a watch event for every one of 10,000 objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    conditions: Sequence[Mapping[str, Any]],
    *,
    type_: str,
    status: str,
    reason: str,
    message: str,
    observed_generation: int | None,
    now: str,
) -> list[dict[str, Any]]:
    """Return ``conditions`` with one condition replaced; its transition time moves only on a
    change of ``status``."""
    result: list[dict[str, Any]] = []
    previous: Mapping[str, Any] | None = None
    for cond in conditions:
        if cond.get("type") == type_:
            previous = cond
        else:
            result.append(dict(cond))
    transition = now
    if previous is not None and previous.get("status") == status and previous.get("lastTransitionTime"):
        transition = str(previous["lastTransitionTime"])
    entry: dict[str, Any] = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    }
    if observed_generation is not None:
        entry["observedGeneration"] = observed_generation
    result.append(entry)
    result.sort(key=lambda c: str(c.get("type")))
    return result


def find(conditions: Sequence[Mapping[str, Any]], type_: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def transitioned(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]], type_: str) -> bool:
    """Whether the condition's status or reason changed: the only moments an Event is posted."""
    old, new = find(before, type_), find(after, type_)
    if new is None:
        return False
    if old is None:
        return True
    return (old.get("status"), old.get("reason")) != (new.get("status"), new.get("reason"))

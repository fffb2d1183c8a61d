"""A TemporaryPrivilege's status from what the pass found (pure).

Two conditions: ``Ready`` says whether the service holds what the spec says (or why not), and
``Active`` whether the grant counts right now: the service itself ignores a temporary privilege
outside ``[temporaryAccessStartTime, temporaryAccessEndTime)``, so ``Active`` follows those two
times and needs no call when the window ends.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from secretferry.models import base as models_base
from secretferry.reconcile import conditions, problems, reasons

# The states the gauge counts (metrics.TEMPORARY_PRIVILEGES).
ACTIVE, PENDING, EXPIRED, FAILED = "active", "pending", "expired", "failed"


@dataclass(frozen=True)
class Grant:
    """The privilege as the service holds it (after the pass's create/update)."""

    privilege_id: str | None
    slug: str
    start: datetime.datetime | None  # None: permanent
    end: datetime.datetime | None  # None: permanent


def active(grant: Grant | None, now: datetime.datetime) -> tuple[conditions.Status, str, str]:
    """The Active condition: status, reason, message."""
    if grant is None:
        return "False", reasons.NOT_GRANTED, "no privilege at the service for this resource"
    if grant.start is None or grant.end is None:
        return "True", reasons.ACTIVE, "permanent privilege"
    if now < grant.start:
        return "False", reasons.PENDING, f"the grant starts at {_text(grant.start)}"
    if now >= grant.end:
        return "False", reasons.EXPIRED, f"the grant ended at {_text(grant.end)}"
    return "True", reasons.ACTIVE, f"granted until {_text(grant.end)}"


def state(grant: Grant | None, problem: problems.Problem | None, now: datetime.datetime) -> str:
    """The gauge's state for one resource."""
    if problem is not None and grant is None:
        return FAILED
    reason = active(grant, now)[1]
    return {reasons.ACTIVE: ACTIVE, reasons.PENDING: PENDING, reasons.EXPIRED: EXPIRED}.get(reason, FAILED)


def next_change(grant: Grant | None, now: datetime.datetime) -> float | None:
    """Seconds until Active changes by itself (the window starts or ends); None when it never does."""
    if grant is None or grant.start is None or grant.end is None:
        return None
    for moment in (grant.start, grant.end):
        if now < moment:
            return (moment - now).total_seconds()
    return None


def _text(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime(models_base.TIME_FORMAT)


def status(
    previous: Mapping[str, Any],
    *,
    grant: Grant | None,
    problem: problems.Problem | None,
    generation: int | None,
    start: datetime.datetime | None,
    checked_at: datetime.datetime | None,
    now: datetime.datetime,
) -> dict[str, Any]:
    """The whole status to write (JSON), keeping transition times of unchanged conditions.

    ``grant`` None with a ``problem``: the previous ids, window and Active stay as they were (a
    failed read says nothing about what the service holds)."""
    found: Sequence[Mapping[str, Any]] = previous.get("conditions") or []
    if problem is None:
        ready: tuple[conditions.Status, str, str] = ("True", reasons.GRANTED, _granted(grant))
    else:
        ready = ("False", problem.reason, problem.message)
    updated = conditions.set_condition(
        found,
        type_=reasons.READY,
        status=ready[0],
        reason=ready[1],
        message=ready[2],
        observed_generation=generation,
        now=now,
    )
    as_read = [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in updated]
    has_active = any(c.get("type") == reasons.ACTIVE for c in as_read)
    # A failed read leaves Active as it was; without one yet, it says that nothing is granted.
    if grant is not None or problem is None or not has_active:
        act = active(grant, now)
        updated = conditions.set_condition(
            as_read,
            type_=reasons.ACTIVE,
            status=act[0],
            reason=act[1],
            message=act[2],
            observed_generation=generation,
            now=now,
        )
    out: dict[str, Any] = {
        "conditions": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in updated],
        "observedGeneration": generation,
    }
    for key in ("privilegeId", "slug", "startTime", "expiresAt", "lastCheckedTime"):
        if key in previous:
            out[key] = previous[key]
    if grant is not None:
        out["privilegeId"] = grant.privilege_id
        out["slug"] = grant.slug
        out["expiresAt"] = _text(grant.end) if grant.end is not None else None
    if start is not None:
        out["startTime"] = _text(start)
    if checked_at is not None:
        out["lastCheckedTime"] = _text(checked_at)
    return {k: v for k, v in out.items() if v is not None}


def _granted(grant: Grant | None) -> str:
    if grant is None:
        return "the privilege matches the spec"
    return f"privilege {grant.slug} matches the spec"


def reasons_of(status_: Mapping[str, Any]) -> dict[str, str]:
    """Condition type → reason, to tell transitions (Events) apart."""
    return {str(c.get("type")): str(c.get("reason")) for c in status_.get("conditions") or []}

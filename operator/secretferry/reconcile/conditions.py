"""``status.conditions``: set one condition as a typed model, keep its transition time stable.

Why this matters: a status patch that only moves ``lastTransitionTime`` is a write that changes
nothing for the user but echoes back as a watch event for every one of 10,000 objects.

What is kept in memory (``SyncEntry.status``) is the status as plain JSON, to stay small; what is
written is built here as ``models.base.Condition``. So reading works on mappings, writing on models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import pydantic

from secretferry import controlchars
from secretferry.models import base as models_base
from secretferry.reconcile import reasons

Status = Literal["True", "False", "Unknown"]


def now() -> datetime:
    """The current time at the precision Kubernetes keeps (whole seconds)."""
    return datetime.now(UTC).replace(microsecond=0)


def set_condition(
    conditions: Sequence[Mapping[str, Any]],
    *,
    type_: str,
    status: Status,
    reason: str,
    message: str,
    observed_generation: int | None,
    now: datetime,
    stalled_override: bool | None = None,
) -> list[models_base.Condition]:
    """``conditions`` (as read) with one condition replaced, sorted by type; its transition time
    moves only on a change of ``status``.

    A message longer than a Condition may hold is cut, not refused: the status must still say
    what went wrong. Another condition that does not parse is dropped, not copied forward.

    Setting ``Ready`` also sets kstatus' ``Stalled`` (``stalled``): every kind gets it from the
    one place every kind's Ready goes through. ``stalled_override`` overrides what the reason says, for a
    reason that sums up others (a ClusterSecretSync's ``NamespacesFailed``).
    """
    result = _replace(
        conditions,
        type_=type_,
        status=status,
        reason=reason,
        message=message,
        observed_generation=observed_generation,
        now=now,
    )
    if type_ != reasons.READY:
        return result
    if stalled_override if stalled_override is not None else stalled(status, reason):
        return _replace(
            [c.model_dump(by_alias=True, mode="json", exclude_none=True) for c in result],
            type_=reasons.STALLED,
            status="True",
            reason=reason,
            message=message,
            observed_generation=observed_generation,
            now=now,
        )
    return [c for c in result if c.type != reasons.STALLED]


def stalled(status: Status, reason: str) -> bool:
    """Whether a Ready of this status and reason means kstatus' ``Stalled=True``: the resource
    fails and only a change (to it, the service, or another object's spec) can fix it.

    kstatus reads ``Stalled=True`` as Failed and ``Ready=False`` alone as InProgress; Flux's
    ``wait: true`` fails at once on the first and waits for its timeout on the second. So a reason
    that clears by itself (a reference on its way, a service that is retried) is not Stalled.
    """
    return (
        status == "False"
        and reason not in reasons.WAITING_FOR_REFERENCE
        and reason not in reasons.RETRIED_AT_SERVICE
    )


def _replace(
    conditions: Sequence[Mapping[str, Any]],
    *,
    type_: str,
    status: Status,
    reason: str,
    message: str,
    observed_generation: int | None,
    now: datetime,
) -> list[models_base.Condition]:
    result: list[models_base.Condition] = []
    previous: Mapping[str, Any] | None = None
    for cond in conditions:
        if cond.get("type") == type_:
            previous = cond
            continue
        try:
            result.append(models_base.Condition.model_validate(cond))
        except pydantic.ValidationError:
            continue
    transition = now
    if previous is not None and previous.get("status") == status:
        transition = _time(previous.get("lastTransitionTime")) or now
    result.append(
        models_base.Condition(
            type=type_,
            status=status,
            reason=reason,
            # Messages quote tenants' and the service's text: no line breaks or bidi controls
            # in ``kubectl describe`` (the same escaping as log lines and Event notes).
            message=controlchars.escape(message)[: models_base.CONDITION_MESSAGE_MAX],
            observed_generation=observed_generation,
            last_transition_time=transition,
        )
    )
    result.sort(key=lambda c: c.type)
    return result


def _time(value: Any) -> datetime | None:
    """A timestamp as read back from the apiserver, or None when there is none to keep."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


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

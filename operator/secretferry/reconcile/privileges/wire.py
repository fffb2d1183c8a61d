"""The spec as the service's privilege bodies, and what differs from what the service holds (pure).

Two generations of routes (docs/service-api.md): v1 creates (there is no v2 create) and
updates by identity + project slug + privilege slug; v2 updates and deletes by privilege id and
takes the richer rule shape (lists of actions, ``inverted``, ``secretName``, ``secretTags``). Rules
that fit v1's shape (one basic action per item, no deny, only ``environment`` and a path glob) go
in the v1 create itself; any other rule set is created empty (an empty rule list grants nothing)
and given its rules by the v2 update right after, so no moment grants more than the spec says.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from secretferry.models import temporaryprivilege as tp
from secretferry.service import models as service_models
from secretferry.service import validation

# The basic actions v1 items take (``ProjectPermissionActions``).
_V1_ACTIONS = frozenset(validation.V1_ACTIONS)

Rule = tuple[str, str, str, bool]  # (action, subject, canonical conditions JSON, inverted)


def _conditions(permission: tp.Permission) -> service_models.PermissionConditions | None:
    cond = permission.conditions
    if cond is None:
        return None
    return service_models.PermissionConditions(
        environment=cond.environment,
        secret_path=service_models.GlobPattern(glob=cond.secret_path) if cond.secret_path else None,
        secret_name=cond.secret_name,
        secret_tags=service_models.SecretTagsCondition(in_=list(cond.secret_tags))
        if cond.secret_tags
        else None,
    )


def fits_v1(permissions: Sequence[tp.Permission]) -> bool:
    """Whether the v1 create can carry these rules as they are."""
    for p in permissions:
        if p.inverted or not set(p.actions) <= _V1_ACTIONS:
            return False
        if p.conditions is not None and (p.conditions.secret_name or p.conditions.secret_tags):
            return False
    return True


def v1_items(permissions: Sequence[tp.Permission]) -> list[service_models.PermissionSent]:
    """One item per action (v1 items take one action each: the same grant, spelt out)."""
    return [
        service_models.PermissionSent(action=action, subject=p.subject, conditions=_conditions(p))
        for p in permissions
        for action in p.actions
    ]


def v2_items(permissions: Sequence[tp.Permission]) -> list[service_models.PermissionSent]:
    return [
        service_models.PermissionSent(
            action=list(p.actions),
            subject=p.subject,
            inverted=True if p.inverted else None,
            conditions=_conditions(p),
        )
        for p in permissions
    ]


def v2_type(spec: tp.TemporaryPrivilegeSpec, start: datetime.datetime) -> dict[str, Any]:
    if spec.permanent:
        return {"isTemporary": False}
    assert spec.temporary_range is not None  # the spec's own rule: a range unless permanent
    return {
        "isTemporary": True,
        "temporaryMode": "relative",
        "temporaryRange": spec.temporary_range,
        "temporaryAccessStartTime": start,
    }


# --- comparing with what the service holds -----------------------------------------------------


def _canonical_condition(value: object) -> object:
    """``{$eq: x}`` and ``x`` say the same; everything else is compared as it is."""
    if isinstance(value, Mapping) and set(value) == {"$eq"}:
        return value["$eq"]
    return value


def _canonical_conditions(conditions: object) -> str:
    if not isinstance(conditions, Mapping):
        return "{}"
    cleaned = {k: _canonical_condition(v) for k, v in conditions.items() if v is not None}
    return json.dumps(cleaned, sort_keys=True, separators=(",", ":"))


def _as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def rules_of(items: Iterable[service_models.PermissionSent | service_models.PermissionReturned]) -> set[Rule]:
    """Rules as a set of (action, subject, conditions, inverted), one per action and subject."""
    rules: set[Rule] = set()
    for item in items:
        raw = item.conditions
        if isinstance(raw, service_models.PermissionConditions):
            conditions: object = raw.model_dump(mode="json", by_alias=True, exclude_none=True)
        else:
            conditions = raw
        for action in _as_list(item.action):
            for subject in _as_list(item.subject):
                rules.add((action, subject, _canonical_conditions(conditions), bool(item.inverted)))
    return rules


def _same_instant(a: datetime.datetime | None, b: datetime.datetime | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs((a - b).total_seconds()) < 1  # the service keeps milliseconds; we write seconds


def difference(
    observed: service_models.IdentityPrivilege,
    spec: tp.TemporaryPrivilegeSpec,
    *,
    start: datetime.datetime,
) -> str | None:
    """What differs between the service's privilege and the spec, in words; None when nothing."""
    if rules_of(observed.permissions) != rules_of(v2_items(spec.permissions)):
        return "permissions"
    if spec.permanent:
        return "window (permanent)" if observed.is_temporary else None
    if not observed.is_temporary:
        return "window (temporary)"
    if observed.temporary_range != spec.temporary_range:
        return "temporaryRange"
    if not _same_instant(observed.temporary_access_start_time, start):
        return "temporaryAccessStartTime"
    return None

"""Identity additional privileges as documents: building, temporary windows, wire forms."""

from __future__ import annotations

from typing import Any

from secretferry.devserver.errors import BadRequest
from secretferry.devserver.schemas import PermissionIn, PrivilegePermission
from secretferry.devserver.store import new_id
from secretferry.devserver.timeutil import iso, parse_iso, parse_range


def permissions_from(
    permissions: list[PermissionIn] | None, packed: PrivilegePermission | None
) -> list[dict[str, Any]]:
    """One ``{action, subject, conditions, inverted}`` per action; ``privilegePermission`` wins."""
    if packed is not None:
        return [
            {
                "action": action,
                "subject": packed.subject,
                "conditions": packed.conditions or {},
                "inverted": False,
            }
            for action in packed.actions
        ]
    out: list[dict[str, Any]] = []
    for item in permissions or []:
        actions = [item.action] if isinstance(item.action, str) else list(item.action or [])
        if not item.subject or not actions:
            raise BadRequest("Each permission needs an action and a subject")
        out.extend(
            {
                "action": a,
                "subject": item.subject,
                "conditions": item.conditions or {},
                "inverted": item.inverted,
            }
            for a in actions
        )
    return out


def temporary_fields(
    is_temporary: bool, mode: str | None, range_: str | None, start: str | None
) -> dict[str, Any]:
    """``temporaryAccessEndTime = start + range`` (range like 30s, 1m, 1h, 1d)."""
    if not is_temporary:
        return {
            "isTemporary": False,
            "temporaryMode": None,
            "temporaryRange": None,
            "temporaryAccessStartTime": None,
            "temporaryAccessEndTime": None,
        }
    if not range_ or not start:
        raise BadRequest("A temporary privilege needs temporaryRange and temporaryAccessStartTime")
    try:
        start_epoch = parse_iso(start)
        seconds = parse_range(range_)
    except ValueError as exc:
        raise BadRequest(f"Invalid temporary access window: {exc}") from exc
    return {
        "isTemporary": True,
        "temporaryMode": mode or "relative",
        "temporaryRange": range_,
        "temporaryAccessStartTime": iso(start_epoch),
        "temporaryAccessEndTime": iso(start_epoch + seconds),
    }


def new_doc(
    membership_id: str,
    slug: str | None,
    permissions: list[dict[str, Any]],
    temporary: dict[str, Any],
    now: float,
    privilege_id: str | None = None,
) -> dict[str, Any]:
    return {
        "id": privilege_id or new_id(),
        "slug": slug or f"privilege-{new_id()[:8]}",
        "projectMembershipId": membership_id,
        "permissions": permissions,
        "createdAt": iso(now),
        "updatedAt": iso(now),
        **temporary,
    }


def v2_wire(doc: dict[str, Any]) -> dict[str, Any]:
    """The newer endpoints do not return ``projectMembershipId``."""
    return {k: v for k, v in doc.items() if k != "projectMembershipId"}

"""Identity additional privileges as documents: building, temporary windows, wire forms."""

from __future__ import annotations

from typing import Any

from secretferry.devserver import permission_schema, zodrules
from secretferry.devserver.errors import BadRequest, Unauthorized
from secretferry.devserver.store import new_id
from secretferry.devserver.timeutil import iso


def permissions_from(permissions: list[Any] | None, packed: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The v1 rules, ``privilegePermission`` winning over the deprecated ``permissions``.

    Neither given is the real v1 handlers' ``UnauthorizedError`` (401, before any lookup); an empty
    ``permissions`` list is given (JavaScript's ``![]`` is false) and grants nothing.
    """
    if packed is None and permissions is None:
        raise Unauthorized("Permission or privilegePermission must be provided")
    if packed is not None:
        return permission_schema.privilege_permission(packed)
    assert permissions is not None
    return permission_schema.v1_permissions(permissions)


def temporary_fields(
    is_temporary: bool, mode: str | None, range_: str | None, start: str | None
) -> dict[str, Any]:
    """``temporaryAccessEndTime = start + range`` (an ``ms`` duration such as 30s, 1h, 1d)."""
    if not is_temporary:
        return {
            "isTemporary": False,
            "temporaryMode": None,
            "temporaryRange": None,
            "temporaryAccessStartTime": None,
            "temporaryAccessEndTime": None,
        }
    # The request schemas check each field that is given; what the real server does with a
    # temporary privilege missing one (a v1 update turning a permanent one temporary) is not
    # known, so it is refused rather than filled in.
    if mode is None or not range_ or not start:
        raise BadRequest(
            "A temporary privilege needs temporaryMode, temporaryRange and temporaryAccessStartTime"
        )
    start_epoch = zodrules.datetime_epoch(start)
    millis = zodrules.duration_ms(range_)
    if start_epoch is None or millis is None or millis <= 0:
        raise BadRequest("Invalid temporary access window")
    return {
        "isTemporary": True,
        "temporaryMode": mode,
        "temporaryRange": range_,
        "temporaryAccessStartTime": iso(start_epoch),
        "temporaryAccessEndTime": iso(start_epoch + millis / 1000),
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
        # The real routers name an unnamed privilege with a random slug too.
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

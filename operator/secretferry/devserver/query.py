"""Query-string parsing with the real server's zod rules, for routes that read ``request.query_params``.

The real secrets routes declare their booleans as ``z.enum(["true", "false"])``: ``1``, ``True`` or
an empty value is a 422 there, so it is one here (a lenient dev server would hide requests the real
one refuses). A parameter given twice arrives as an array in Fastify and fails a string schema.
Every issue of one request is reported together, as zod does, in the 422 ``message`` array.
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import QueryParams

from secretferry.devserver.errors import ApiError

BOOLEAN_OPTIONS = ("true", "false")  # z.enum(["true", "false"]), in zod's order


class Issues:
    """Collects validation issues; ``raise_if_any`` answers them as one 422."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, name: str, code: str, message: str, **detail: Any) -> None:
        """One issue; ``detail`` carries zod's extra fields (``options``, ``expected``, ``received``)."""
        self.items.append({"code": code, **detail, "path": [name], "message": message})

    def raise_if_any(self) -> None:
        if self.items:
            raise ApiError(list(self.items), name="ValidationFailure", status=422)


def text(params: QueryParams, name: str, issues: Issues) -> str | None:
    """One string parameter, trimmed like ``z.string().trim()``; None when absent."""
    values = params.getlist(name)
    if not values:
        return None
    if len(values) > 1:
        issues.add(
            name, "invalid_type", "Expected string, received array", expected="string", received="array"
        )
        return None
    return values[0].strip()


def flag(params: QueryParams, name: str, issues: Issues, *, default: bool) -> bool:
    """A ``true``/``false`` parameter (exactly those strings); ``default`` when absent."""
    values = params.getlist(name)
    if not values:
        return default
    if len(values) == 1 and values[0] in BOOLEAN_OPTIONS:
        return values[0] == "true"
    if len(values) > 1:
        issues.add(name, "invalid_type", "Expected 'true' | 'false', received array", received="array")
        return default
    issues.add(
        name,
        "invalid_enum_value",
        f"Invalid enum value. Expected 'true' | 'false', received '{values[0]}'",
        received=values[0],
        options=list(BOOLEAN_OPTIONS),
    )
    return default


def lenient_flag(params: QueryParams, name: str, *, default: bool) -> bool:
    """The real server's ``booleanSchema`` (folder listing): any string but empty, ``0`` and
    ``false`` (any case) is true, so Python's ``True``/``False`` work there."""
    raw = params.get(name)
    if raw is None:
        return default
    value = raw.strip()
    if not value or value.lower() == "false":
        return False
    try:
        return float(value) != 0
    except ValueError:
        return True

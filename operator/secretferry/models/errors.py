"""Turning a pydantic ValidationError into one short line for a status condition.

The line names fields and says what is wrong with them; it never repeats an input value, since a
misplaced secret (a token pasted into the wrong field) would otherwise end up in status and Events.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

# Enough to fix the first problems without turning a condition message into a wall of text.
MAX_REPORTED_ERRORS = 3

_PREFIXES = ("Value error, ", "Assertion failed, ")


def field_path(loc: Sequence[int | str]) -> str:
    """``("spec", "sources", 0, "projectId")`` -> ``spec.sources[0].projectId``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "(root)"


def _message(error_type: str, msg: str) -> str:
    if error_type == "missing":
        return "is required"
    for prefix in _PREFIXES:
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg[:1].lower() + msg[1:]


def describe_validation_error(error: ValidationError) -> str:
    """``spec.sources[0]: set exactly one of projectId and projectSlug; spec.target.kind: ...``.

    pydantic's own messages describe the expectation (pattern, allowed literals, bounds) and keep
    the offending input in a separate field, which is dropped here.
    """
    errors = error.errors(include_input=False, include_url=False, include_context=False)
    parts = [f"{field_path(e['loc'])}: {_message(e['type'], e['msg'])}" for e in errors[:MAX_REPORTED_ERRORS]]
    extra = len(errors) - MAX_REPORTED_ERRORS
    if extra > 0:
        parts.append(f"and {extra} more")
    return "; ".join(parts)

"""Value rules of the real server's request schemas that pydantic's built-in checks do not express.

The real service validates bodies with zod and answers a failure 422 ``ValidationFailure`` with
zod's issues; the dev server must refuse exactly what it refuses (docs/service-contract.md,
"Strictness ..."). Each rule names its source in the real server (Infisical ``backend/src``):

- ``slug``: ``slugSchema({min: 1, max: 60})`` in ``server/lib/schemas.ts`` and the older inline
  form of the privilege routers (``.min(1).max(60).trim()``, "Must be lowercase", slugify). Where the
  two differ the stricter wins: a request one deployed version refuses must fail here.
- ``temporary_range``: ``z.string().refine((val) => ms(val) > 0, ...)`` — the ``ms`` package.
- ``zod_datetime``: ``z.string().datetime()`` — UTC with ``Z`` only, seconds required.
- ``metadata_filter_pairs``: the ``metadataFilter`` transform of ``server/routes/v4/secret-router.ts``.

Used as ``AfterValidator``s, they raise ``PydanticCustomError`` so the issue keeps zod's code and
message through ``errors.install``'s 422 reshaping.
"""

from __future__ import annotations

import calendar
import re

from pydantic_core import PydanticCustomError

SLUG_MAX_LENGTH = 60  # docs/service-api.md, Limits: privilege slugs are 1 to 60 characters
# What ``@sindresorhus/slugify`` leaves unchanged for lowercase input: words of [a-z0-9] joined by
# single hyphens (it replaces every other character and trims and collapses the separators).
_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*", re.ASCII)

# The ``ms`` package's grammar (v2; v3 adds months, which older servers refuse): a number, optional
# spaces, an optional unit; case-insensitive; a bare number is milliseconds.
_MS = re.compile(
    r"(-?\d*\.?\d+) *(milliseconds?|msecs?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|"
    r"days?|d|weeks?|w|years?|yrs?|y)?",
    re.IGNORECASE | re.ASCII,
)
_MS_MAX_LENGTH = 100  # ms answers nothing for longer strings (no number, so not "> 0")
_SECOND_MS = 1000.0
_MS_PER_UNIT = {
    "ms": 1.0,
    "s": _SECOND_MS,
    "m": 60 * _SECOND_MS,
    "h": 3600 * _SECOND_MS,
    "d": 86400 * _SECOND_MS,
    "w": 7 * 86400 * _SECOND_MS,
    "y": 365.25 * 86400 * _SECOND_MS,  # ms counts a year as 365.25 days
}

# zod's ``datetime()`` without options: date, "T", hh:mm:ss, optional fraction, "Z". Newer zod also
# checks the calendar (no 2026-02-30), which ``zod_datetime`` adds.
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T([01]\d|2[0-3]):([0-5]\d):([0-5]\d)(\.\d+)?Z", re.ASCII)

METADATA_FILTER_MAX_PAIRS = 10  # "You can only filter by up to 10 metadata fields"


def slug(value: str) -> str:
    """A privilege slug, trimmed; 1-60 characters, lowercase words joined by hyphens."""
    if len(value) > SLUG_MAX_LENGTH:  # the older router measures before trimming
        raise PydanticCustomError("too_big", f"Slug field must be at most {SLUG_MAX_LENGTH} characters")
    trimmed = value.strip()
    if not trimmed:  # the newer one measures after it
        raise PydanticCustomError("too_small", "Slug field must be at least 1 character")
    if trimmed != trimmed.lower():  # the newer one lowercases, the older one refuses
        raise PydanticCustomError("custom", "Must be lowercase")
    if not _SLUG.fullmatch(trimmed):
        raise PydanticCustomError("custom", "Slug field can only contain letters, numbers, and hyphens")
    return trimmed


def duration_ms(value: str) -> float | None:
    """Milliseconds of an ``ms``-style duration ("30m", "1 hour", "1500"); None where ``ms`` finds none."""
    if not 0 < len(value) <= _MS_MAX_LENGTH:
        return None
    match = _MS.fullmatch(value)
    if match is None:
        return None
    unit = (match.group(2) or "ms").lower()
    key = "ms" if unit.startswith(("ms", "milli")) else unit[0]
    return float(match.group(1)) * _MS_PER_UNIT[key]


def temporary_range(value: str) -> str:
    """``temporaryRange``: a positive ``ms`` duration, else zod's custom issue (422)."""
    millis = duration_ms(value)
    if millis is None or not millis > 0:
        # The newest server's ms wrapper throws (400) for "" and >100 characters; older ones and
        # docs/service-contract.md say 422, which every other bad range gets everywhere.
        raise PydanticCustomError("custom", "Temporary range must be a positive number")
    return value


def datetime_epoch(value: str) -> float | None:
    """Epoch seconds of a zod ``datetime()`` string, or None when zod would refuse it."""
    match = _DATETIME.fullmatch(value)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    if not 1 <= month <= 12 or not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    fraction = float(match.group(7)) if match.group(7) else 0.0
    return calendar.timegm((year, month, day, hour, minute, second)) + fraction


def zod_datetime(value: str) -> str:
    """``temporaryAccessStartTime``: ISO 8601 in UTC with ``Z``, else zod's "Invalid datetime" (422)."""
    if datetime_epoch(value) is None:
        raise PydanticCustomError("invalid_string", "Invalid datetime")
    return value


def metadata_filter_pairs(text: str | None) -> list[tuple[str, str]]:
    """``key=a,value=b|key=c,value=d`` → ``[(a, b), (c, d)]``, exactly as the real v4 route reads it.

    Each ``|``-separated pair is split on ``,`` and ``=`` alike and read as identifier/value
    alternately (identifiers trimmed and case-insensitive, values trimmed); a pair without a
    non-empty key AND value is dropped: it filters nothing, it never means "any value".
    """
    pairs: list[tuple[str, str]] = []
    for chunk in (text or "").split("|"):
        key = value = ""
        parts = re.split(r"[,=]", chunk)
        for index in range(0, len(parts), 2):
            identifier = parts[index].strip().lower()
            given = parts[index + 1].strip() if index + 1 < len(parts) else ""
            if identifier == "key" and given:
                key = given
            elif identifier == "value" and given:
                value = given
        if key and value:
            pairs.append((key, value))
    return pairs

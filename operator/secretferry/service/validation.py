"""Input checks run before a request is sent (limits from service-api.md).

A call that the service would refuse anyway fails here, without a round trip, as
``errors.ValidationError`` whose ``field`` is the field's wire name (``identityId``, ``slug``, …).
Messages name the field and the rule, never the value.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sized

from secretferry.service import errors

# service-api.md, Limits: privilege slugs are 1 to 60 characters long.
SLUG_MAX_LENGTH = 60

# service-api.md, event subscription: ``register`` carries 1 to 10 items.
MAX_EVENT_REGISTRATIONS = 10
MAX_METADATA_FILTERS = 10

# "a number followed by a unit letter, examples 1m, 1h, 1d"; the full grammar is not shown, so we
# accept the units the real service's duration parser (``ms``) understands in that short form.
_TEMPORARY_RANGE = re.compile(r"^[1-9][0-9]*(ms|s|m|h|d|w|y)$")

# Characters that separate pairs and members in ``metadataFilter`` (``key=a,value=b|key=c,value=d``).
_METADATA_FILTER_SEPARATORS = ("|", ",", "=")


def non_empty(value: str, *, field: str) -> str:
    """Require a string of at least one character (the API's ``minimum length 1``)."""
    if not isinstance(value, str) or not value:
        raise errors.ValidationError(f"{field} must be a non-empty string", field=field)
    return value


def slug(value: str, *, field: str = "slug") -> str:
    """Require a slug of 1 to ``SLUG_MAX_LENGTH`` characters."""
    non_empty(value, field=field)
    if len(value) > SLUG_MAX_LENGTH:
        raise errors.ValidationError(
            f"{field} must be at most {SLUG_MAX_LENGTH} characters long", field=field
        )
    return value


def count(items: Sized, *, field: str, minimum: int, maximum: int | None = None) -> None:
    """Require ``minimum <= len(items) <= maximum``."""
    n = len(items)
    if n < minimum:
        raise errors.ValidationError(f"{field} needs at least {minimum} item(s), got {n}", field=field)
    if maximum is not None and n > maximum:
        raise errors.ValidationError(f"{field} takes at most {maximum} items, got {n}", field=field)


def temporary_range(value: str, *, field: str = "temporaryRange") -> str:
    """Require a duration such as ``30m``, ``1h`` or ``7d``."""
    if not isinstance(value, str) or not _TEMPORARY_RANGE.fullmatch(value):
        raise errors.ValidationError(
            f"{field} must be a positive number followed by a unit (s, m, h, d, w, y), e.g. 1h",
            field=field,
        )
    return value


def timestamp(value: datetime.datetime, *, field: str) -> str:
    """Format an aware datetime as ISO 8601 in UTC; naive datetimes are ambiguous and refused."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise errors.ValidationError(f"{field} must be timezone-aware", field=field)
    text = value.astimezone(datetime.UTC).isoformat()
    return text.removesuffix("+00:00") + "Z"


def metadata_filter_pair(key: str, value: str, *, field: str = "metadataFilter") -> None:
    """Refuse pairs that the ``key=..,value=..|..`` format cannot carry unambiguously: the service
    splits on the separators and trims, and silently DROPS a pair with an empty key or value, which
    would widen the listing to every secret."""
    non_empty(key, field=field)
    non_empty(value, field=field)
    for part in (key, value):
        if any(sep in part for sep in _METADATA_FILTER_SEPARATORS):
            raise errors.ValidationError(
                f"{field} keys and values must not contain '|', ',' or '='", field=field
            )
        if part != part.strip():
            raise errors.ValidationError(
                f"{field} keys and values must not start or end with whitespace (the service trims them)",
                field=field,
            )

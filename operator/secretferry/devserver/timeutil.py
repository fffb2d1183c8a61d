"""Timestamps and durations in the service's wire formats."""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime

_RANGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w|y)?\s*$")
# Seconds per unit of a temporaryRange such as "30s", "1m", "1h", "1d" (ms-style grammar).
_UNIT_SECONDS = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 7 * 86400.0,
    "y": 365.25 * 86400.0,
}


@functools.lru_cache(maxsize=8192)  # list responses repeat the same few timestamps
def iso(epoch: float) -> str:
    """ISO 8601 with milliseconds and ``Z``, like the real service."""
    return (
        datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(epoch * 1000) % 1000:03d}Z"
    )


def parse_iso(value: str) -> float:
    """Epoch seconds of an ISO 8601 timestamp (``Z`` or an offset; naive means UTC)."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def parse_range(value: str) -> float:
    """Seconds of a range like ``30s``, ``1m``, ``1h``, ``1d``; a bare number is milliseconds (ms lib)."""
    match = _RANGE.match(value)
    if match is None:
        raise ValueError(f"invalid time range {value!r}")
    number, unit = float(match.group(1)), match.group(2) or "ms"
    return number * _UNIT_SECONDS[unit]

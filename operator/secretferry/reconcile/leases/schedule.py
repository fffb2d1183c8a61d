"""When to renew a lease, and when renewing is pointless: pure, table-tested (no clock of its own).

A lease of term ``T`` (spec.ttl, else the first lease's own duration) is renewed when
``renewAtFraction`` of ``T`` has passed since the current expiry was set, i.e. at
``expiresAt - (1 - fraction) * T``: the real service renews by adding ``T`` to the current
expiry, so renewals then fall every ``T`` and always leave ``(1 - fraction) * T`` for retries.

A renewal that would carry the expiry past ``createdAt + maxTTL`` is refused by the service
("TTL cannot be larger than max ttl"), so it is not even asked for: at that renewal point a new
lease is taken instead (``REPLACE``), while the old one still has ``(1 - fraction) * T`` to live —
time for consumers to be restarted onto the new credentials. A lease already past its expiry is
replaced at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Action = Literal["acquire", "renew", "replace", "wait"]


@dataclass(frozen=True)
class Held:
    """The lease held now, in epoch seconds. ``term_seconds``: the TTL each renewal adds."""

    lease_id: str
    created_at: float
    expires_at: float
    term_seconds: float
    max_ttl_seconds: float | None = None


@dataclass(frozen=True)
class Step:
    action: Action
    at: float
    """When to do it (epoch seconds); for ``wait``, when to look again."""


def renew_at(held: Held, fraction: float) -> float:
    return held.expires_at - (1.0 - fraction) * held.term_seconds


def renewal_fits(held: Held) -> bool:
    """Whether one more renewal by the term stays within createdAt + maxTTL."""
    if held.max_ttl_seconds is None:
        return True
    return held.expires_at + held.term_seconds <= held.created_at + held.max_ttl_seconds


def next_step(held: Held | None, *, now: float, fraction: float) -> Step:
    if held is None:
        return Step("acquire", now)
    if now >= held.expires_at:
        return Step("replace", now)
    due = renew_at(held, fraction)
    if now < due:
        return Step("wait", due)
    return Step("renew" if renewal_fits(held) else "replace", now)

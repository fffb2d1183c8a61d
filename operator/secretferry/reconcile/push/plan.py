"""What one pass writes at the service: pure, from the source, the destination and the last push.

Per key (``D`` the source's value, ``R`` the destination's, ``last`` the HMACs of our last push)::

    no R                              create D (whatever the policy: there is nothing to overwrite)
    R is what we left (HMAC = last)   D unchanged: nothing; D changed: update
    R == D                            nothing to write; adopted as ours
    else (changed behind our back,    a conflict, named in status: Replace overwrites it,
          or there before us)         IfNotExists leaves it and stops calling it ours

A key that left the source (or every key, when the PushSecret goes) is deleted under
deletionPolicy Delete only if the service still holds what we left — or anything, under Replace;
under Retain it is only forgotten. So one changed key costs one write, and no pass ever writes a
value equal to what is there.

Only HMACs are kept between passes (``Record``): a status holds nothing that reveals a value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

Digest = Callable[[str, str], str]
"""``(key, value) -> HMAC`` keyed per install and PushSecret (pushing.digest)."""


@dataclass(frozen=True)
class Record:
    """What we left at the service for one key: HMACs of the value pushed and of the value held."""

    source: str
    remote: str


@dataclass
class Plan:
    creates: dict[str, str] = field(default_factory=dict)
    updates: dict[str, str] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    """Keys whose value at the service is neither ours nor the source's (sorted)."""
    records: dict[str, Record] = field(default_factory=dict)
    """Records of keys that need no write; written keys get theirs from the write (pushing)."""

    @property
    def writes(self) -> int:
        return len(self.creates) + len(self.updates) + len(self.deletes)


def plan(
    desired: Mapping[str, str],
    remote: Mapping[str, str],
    last: Mapping[str, Record],
    *,
    digest: Digest,
    update_policy: Literal["Replace", "IfNotExists"],
    deletion_policy: Literal["Delete", "Retain"],
) -> Plan:
    out = Plan()
    for key in sorted(desired):
        value = desired[key]
        held = remote.get(key)
        if held is None:
            out.creates[key] = value
            continue
        rec = last.get(key)
        held_digest = digest(key, held)
        if rec is not None and held_digest == rec.remote:
            if digest(key, value) == rec.source:
                out.records[key] = rec
            else:
                out.updates[key] = value
        elif held == value:
            out.records[key] = Record(source=digest(key, value), remote=held_digest)
        else:
            out.conflicts.append(key)
            if update_policy == "Replace":
                out.updates[key] = value
    for key in sorted(set(last) - set(desired)):
        out.deletes.extend(_deletable(key, remote, last, digest, update_policy, deletion_policy))
    return out


def plan_removal(
    remote: Mapping[str, str],
    last: Mapping[str, Record],
    *,
    digest: Digest,
    update_policy: Literal["Replace", "IfNotExists"],
    deletion_policy: Literal["Delete", "Retain"],
) -> list[str]:
    """The keys to delete at the service now that the PushSecret goes."""
    out: list[str] = []
    for key in sorted(last):
        out.extend(_deletable(key, remote, last, digest, update_policy, deletion_policy))
    return out


def _deletable(
    key: str,
    remote: Mapping[str, str],
    last: Mapping[str, Record],
    digest: Digest,
    update_policy: str,
    deletion_policy: str,
) -> list[str]:
    held = remote.get(key)
    if deletion_policy != "Delete" or held is None:
        return []
    if update_policy == "Replace" or digest(key, held) == last[key].remote:
        return [key]
    return []

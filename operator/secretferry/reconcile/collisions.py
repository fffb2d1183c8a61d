"""One key listed from several folders of a recursive source: which one is synced, and saying so.

A recursive listing (``recursive: true``) answers every secret below the source's path, each with
its ``secretPath``; the same key can live in several of those folders (``/app/DB_URL`` and
``/app/prod/DB_URL``). The real service answers them in no documented order, and the operator
used to keep whichever came last, silently (issue 21).

The precedence, documented in README ("Source"): **the deepest folder wins**; between folders at
the same depth, the one whose path sorts first. Why deepest rather than refusing: a folder tree is
how users lay out defaults and their overrides (``/app`` shared, ``/app/prod`` specific), exactly
as imports are overridden by the folder's own secrets; refusing would stop a working SecretSync the
moment someone adds an override below it, while one fixed rule, independent of the order of the
answer, keeps the Secret stable. Whatever is chosen is shown: ``describe`` names each colliding key
and its folders (never a value) for the SecretSync's status message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from secretferry.service import models as service_models

# Status messages stay readable: this many keys are named, the rest counted.
_SHOWN = 5


@dataclasses.dataclass(frozen=True)
class Collision:
    """``key`` is listed from every folder in ``folders``; the one at ``folders[0]`` is synced."""

    key: str
    folders: tuple[str, ...]


def _depth(path: str) -> int:
    return len([part for part in path.split("/") if part])


def _rank(folder: str) -> tuple[int, str]:
    """Sort order of the folders of one key: deepest first, then by path."""
    return (-_depth(folder), folder)


def direct(secrets: Sequence[service_models.Secret], *, root: str) -> tuple[dict[str, str], list[Collision]]:
    """The key → value map of a listing's own secrets, one folder per key by the precedence
    above, and the keys that had to be decided. ``root`` stands for a secret without ``secretPath``."""
    by_key: dict[str, dict[str, str]] = {}
    for secret in secrets:
        by_key.setdefault(secret.secret_key, {})[secret.secret_path or root] = secret.secret_value
    values: dict[str, str] = {}
    collisions: list[Collision] = []
    for key, folders in by_key.items():
        ordered = tuple(sorted(folders, key=_rank))
        values[key] = folders[ordered[0]]
        if len(ordered) > 1:
            collisions.append(Collision(key, ordered))
    return values, collisions


def describe(collisions: Sequence[Collision]) -> str:
    """``key A in /app/prod and /app (the deepest, /app/prod, synced); …`` — names, never values."""
    shown = [
        f"{c.key} in {', '.join(c.folders)} ({c.folders[0]} synced)"
        for c in sorted(collisions, key=lambda c: c.key)[:_SHOWN]
    ]
    more = len(collisions) - _SHOWN
    tail = f" and {more} more" if more > 0 else ""
    return f"keys listed from several folders, the deepest synced: {'; '.join(shown)}{tail}"

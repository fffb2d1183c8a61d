"""Secret-path helpers and the glob dialect used by privileges and event registrations.

Globs follow picomatch (what the real service uses): ``*`` stays inside one path segment, ``**``
crosses segments, and ``/x/**`` also matches ``/x`` itself so that "a subtree" includes its root.
"""

from __future__ import annotations

import functools
import re


def normalize_path(path: str | None) -> str:
    """``"a/b/"`` → ``"/a/b"``; empty → ``"/"``."""
    parts = [part for part in (path or "/").split("/") if part]
    return "/" + "/".join(parts)


def depth(path: str) -> int:
    """Number of folders below the root: ``/`` is 0, ``/a/b`` is 2."""
    return len([part for part in path.split("/") if part])


def is_within(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it."""
    return root == "/" or path == root or path.startswith(root + "/")


@functools.lru_cache(maxsize=1024)
def _compile(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("(?:/.*)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def glob_match(pattern: str, value: str) -> bool:
    """Whether ``value`` matches the glob ``pattern`` (a pattern without wildcards is exact)."""
    if pattern in ("**", "/**", "*"):
        return True
    return _compile(pattern).fullmatch(value) is not None


def subscription_path_matches(pattern: str, path: str) -> bool:
    """Event registration filter: exact path, ``/x/**`` subtree, ``/**`` everything."""
    pattern = pattern.strip() or "/"
    if pattern.endswith("/**"):
        return is_within(path, normalize_path(pattern[:-3]))
    if "*" in pattern or "?" in pattern:
        return glob_match(pattern, path)
    return normalize_path(pattern) == path

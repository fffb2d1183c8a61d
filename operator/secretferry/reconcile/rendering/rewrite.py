"""Key rewriting: one source's keys renamed by its ``rewrite`` rules. Pure, no I/O.

Where it sits (desired.py's docstring has the whole order): per source, after the source's
imports and own secrets are merged and includeKeys/excludeKeys have filtered them, and before
the sources are merged with each other and before templates. So globs match the names at the
service, templates see the new names, and a later source still overrides an earlier one by the
new name.

Two keys of one source that end up with the same name are an error (KeyCollision) naming both,
never a silent overwrite: which value won would depend on listing order. Values are never read
here, only carried along, and no message holds one.

Why no rule list can be slow: see models/keyrewrite.py (RE2, linear in the key's length; keys of
at most 253 characters at every step; at most 32 rules).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from secretferry.models import keyrewrite
from secretferry.reconcile import problems, reasons

# Regexp matches replaced over one source's keys in one pass. RE2 finds each match in linear time,
# but google-re2's Python wrapper costs ~5 µs per match (a search call each): a rule matching every
# character of 253-character keys would cost ~1.3 ms a key per rule, 32 rules x thousands of keys
# minutes. 20,000 matches is ~0.1 s, and 20 per key for 1,000 keys (``-`` -> ``_`` needs a few).
MAX_MATCHES_PER_SOURCE = 20_000

# Compiled patterns, shared by every SecretSync and pass; 1,024 distinct patterns is far more than
# any cluster's SecretSyncs hold at once, and an evicted one only costs a recompile.
_PATTERN_CACHE_SIZE = 1024


@lru_cache(maxsize=_PATTERN_CACHE_SIZE)
def _compiled(pattern: str) -> Any:
    return keyrewrite.compile_pattern(pattern)


class _Budget:
    """Regexp matches left for one source's pass (MAX_MATCHES_PER_SOURCE)."""

    def __init__(self, matches: int) -> None:
        self.left = matches


def rewrite_key(
    key: str,
    rules: Sequence[keyrewrite.RewriteRule],
    *,
    source_index: int = 0,
    budget: _Budget | None = None,
) -> str:
    """``key`` after every rule in order. A key longer than 253 characters is left as it is (it is
    never a valid data key: desired.py refuses it as InvalidKey, and excludeKeys can drop it).

    Raises ``problems.Problem``: InvalidKey when a rule empties the key or makes it longer than
    253 characters, naming the key and the rule; InvalidSpec when the regexps' matches spend
    ``budget`` (MAX_MATCHES_PER_SOURCE over a source's keys; a fresh one when not given).
    """
    if len(key) > keyrewrite.MAX_KEY:
        return key
    name = key
    budget = budget or _Budget(MAX_MATCHES_PER_SOURCE)
    for position, rule in enumerate(rules):
        name = _apply(rule, name, budget)
        if budget.left < 0:
            raise problems.Problem(
                reasons.INVALID_SPEC,
                f"spec.sources[{source_index}].rewrite[{position}] matches more than"
                f" {MAX_MATCHES_PER_SOURCE} times over this source's keys; anchor or narrow the regexp",
            )
        if not name or len(name) > keyrewrite.MAX_KEY:
            what = "an empty name" if not name else f"a name longer than {keyrewrite.MAX_KEY} characters"
            raise problems.Problem(
                reasons.INVALID_KEY,
                f"spec.sources[{source_index}].rewrite[{position}] turns key {key} into {what}",
            )
    return name


def _apply(rule: keyrewrite.RewriteRule, name: str, budget: _Budget) -> str:
    if rule.regexp is not None:
        return _substitute(_compiled(rule.regexp.source), rule.regexp.target, name, budget)
    if rule.add_prefix is not None:
        return rule.add_prefix + name
    if rule.strip_prefix is not None:
        return name.removeprefix(rule.strip_prefix)
    if rule.transform == "Upper":
        return name.upper()
    if rule.transform == "Lower":
        return name.lower()
    if rule.from_ is not None and rule.to is not None:
        return rule.to if name == rule.from_ else name
    raise ValueError("a rewrite rule of no known kind")  # the model refuses such a rule


def _substitute(compiled: Any, target: str, name: str, budget: _Budget) -> str:
    """``compiled.sub(target, name)``, counting the matches against ``budget`` as it goes (and
    stopping once it is spent); a target without a backslash is inserted as it is."""
    pieces: list[str] = []
    end = 0
    for match in compiled.finditer(name):
        budget.left -= 1
        if budget.left < 0:
            return name
        start, stop = match.span()
        pieces.append(name[end:start])
        pieces.append(str(match.expand(target)) if "\\" in target else target)
        end = stop
    pieces.append(name[end:])
    return "".join(pieces)


def rewrite_keys(
    secrets: Mapping[str, str], rules: Sequence[keyrewrite.RewriteRule], *, source_index: int = 0
) -> dict[str, str]:
    """``secrets`` with every key rewritten by ``rules`` (no rules: a copy, unchanged).

    Raises ``problems.Problem``: KeyCollision when two keys get one name (naming both and the
    name, the first collision in key order), InvalidKey and InvalidSpec as ``rewrite_key`` does
    (one match budget for all the source's keys).
    """
    if not rules:
        return dict(secrets)
    out: dict[str, str] = {}
    origin: dict[str, str] = {}
    budget = _Budget(MAX_MATCHES_PER_SOURCE)
    for key in sorted(secrets):
        name = rewrite_key(key, rules, source_index=source_index, budget=budget)
        if name in origin:
            raise problems.Problem(
                reasons.KEY_COLLISION,
                f"spec.sources[{source_index}].rewrite renames both {origin[name]} and {key} to {name};"
                " change the rules or drop one key with excludeKeys (nothing was written)",
            )
        origin[name] = key
        out[name] = secrets[key]
    return out

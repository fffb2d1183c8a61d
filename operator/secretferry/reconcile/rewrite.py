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

# Compiled patterns, shared by every SecretSync and pass; 1,024 distinct patterns is far more than
# any cluster's SecretSyncs hold at once, and an evicted one only costs a recompile.
_PATTERN_CACHE_SIZE = 1024


@lru_cache(maxsize=_PATTERN_CACHE_SIZE)
def _compiled(pattern: str) -> Any:
    return keyrewrite.compile_pattern(pattern)


def rewrite_key(key: str, rules: Sequence[keyrewrite.RewriteRule], *, source_index: int = 0) -> str:
    """``key`` after every rule in order. A key longer than 253 characters is left as it is (it is
    never a valid data key: desired.py refuses it as InvalidKey, and excludeKeys can drop it).

    Raises ``problems.Problem`` (InvalidKey) when a rule empties the key or makes it longer than
    253 characters, naming the key and the rule.
    """
    if len(key) > keyrewrite.MAX_KEY:
        return key
    name = key
    for position, rule in enumerate(rules):
        name = _apply(rule, name)
        if not name or len(name) > keyrewrite.MAX_KEY:
            what = "an empty name" if not name else f"a name longer than {keyrewrite.MAX_KEY} characters"
            raise problems.Problem(
                reasons.INVALID_KEY,
                f"spec.sources[{source_index}].rewrite[{position}] turns key {key} into {what}",
            )
    return name


def _apply(rule: keyrewrite.RewriteRule, name: str) -> str:
    if rule.regexp is not None:
        return str(_compiled(rule.regexp.source).sub(rule.regexp.target, name))
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


def rewrite_keys(
    secrets: Mapping[str, str], rules: Sequence[keyrewrite.RewriteRule], *, source_index: int = 0
) -> dict[str, str]:
    """``secrets`` with every key rewritten by ``rules`` (no rules: a copy, unchanged).

    Raises ``problems.Problem``: KeyCollision when two keys get one name (naming both and the
    name, the first collision in key order), InvalidKey as ``rewrite_key`` does.
    """
    if not rules:
        return dict(secrets)
    out: dict[str, str] = {}
    origin: dict[str, str] = {}
    for key in sorted(secrets):
        name = rewrite_key(key, rules, source_index=source_index)
        if name in origin:
            raise problems.Problem(
                reasons.KEY_COLLISION,
                f"spec.sources[{source_index}].rewrite renames both {origin[name]} and {key} to {name};"
                " change the rules or drop one key with excludeKeys (nothing was written)",
            )
        origin[name] = key
        out[name] = secrets[key]
    return out

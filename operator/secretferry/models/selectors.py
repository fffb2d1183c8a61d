"""Label selectors written as text (``team=payments,env in (prod,staging),!legacy``), as kubectl's
``-l`` and the API's ``labelSelector`` take them, parsed into a ``LabelSelector``.

Why text: the operator's namespace selection (settings ``watch_namespace_selector``) is one
environment variable, and this is the form every Kubernetes user already writes. Why our own
parser, matched by ``LabelSelector.matches``: the selection is evaluated here, against the labels
of the namespace watch (a custom resource cannot be listed by its namespace's labels), so the
apiserver never parses it; what it would refuse must still be refused, at start-up.

The grammar is apimachinery's ``labels.Parse``, requirements joined by ``,`` (all must hold)::

    key            the label exists            !key           it does not
    key=value      the label has this value    key==value     the same
    key!=value     absent, or another value    key in (a,b)   one of these values
                                               key notin (a,b) absent, or none of them

Keys are qualified names (an optional DNS-subdomain prefix and ``/``, then at most 63 of
``[A-Za-z0-9._-]`` starting and ending alphanumeric), values at most 63 such characters or empty.
Not supported: the numeric ``key>1``/``key<1`` (node-selector comparisons, refused by name).
Errors name the requirement that does not parse; the text is an installer's setting, not a secret.
"""

from __future__ import annotations

import re
from typing import Final, Literal

from secretferry.models.base import LabelSelector, LabelSelectorRequirement

# apimachinery validation.IsQualifiedName / IsValidLabelValue
_NAME: Final = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_KEY_RE: Final = re.compile(rf"(?:(?P<prefix>{_PREFIX})/)?{_NAME}")
_VALUE_RE: Final = re.compile(rf"(?:{_NAME})?")
_PREFIX_MAX: Final = 253  # DNS subdomain

_TOKEN: Final = r"[^\s,()!=<>]+"
_EXISTS: Final = re.compile(rf"\s*(?P<neg>!)?\s*(?P<key>{_TOKEN})\s*")
_EQUALITY: Final = re.compile(rf"\s*(?P<key>{_TOKEN})\s*(?P<op>==|=|!=)\s*(?P<value>{_TOKEN})?\s*")
_SET: Final = re.compile(rf"\s*(?P<key>{_TOKEN})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)\s*")
_COMPARISON: Final = re.compile(rf"\s*{_TOKEN}\s*[<>]")

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
_OPERATORS: Final[dict[str, Operator]] = {"=": "In", "==": "In", "!=": "NotIn", "in": "In", "notin": "NotIn"}


class SelectorError(ValueError):
    """The text is not a label selector; the message says which requirement and why."""


def parse(text: str) -> LabelSelector | None:
    """The selector ``text`` means; None for an empty text (no selection: everything)."""
    if not text.strip():
        return None
    requirements = [_requirement(part) for part in _split(text)]
    return LabelSelector(match_expressions=requirements)


def _split(text: str) -> list[str]:
    """Requirements at the commas outside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced ')' in label selector {text!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise SelectorError(f"unbalanced '(' in label selector {text!r}")
    parts.append("".join(current))
    return parts


def _requirement(part: str) -> LabelSelectorRequirement:
    if not part.strip():
        raise SelectorError("empty requirement (two commas, or one at either end) in label selector")
    if match := _SET.fullmatch(part):
        values = [v.strip() for v in match["values"].split(",")]
        if values == [""]:
            raise SelectorError(f"{part.strip()!r}: {match['op']} needs at least one value")
        return _make(part, match["key"], _OPERATORS[match["op"]], values)
    if match := _EQUALITY.fullmatch(part):
        return _make(part, match["key"], _OPERATORS[match["op"]], [match["value"] or ""])
    if match := _EXISTS.fullmatch(part):
        return _make(part, match["key"], "DoesNotExist" if match["neg"] else "Exists", [])
    if _COMPARISON.match(part):
        raise SelectorError(f"{part.strip()!r}: numeric comparisons (< and >) are not supported here")
    raise SelectorError(
        f"{part.strip()!r} is not a label requirement (key, !key, key=value, key!=value,"
        " key in (a,b), key notin (a,b))"
    )


def _make(part: str, key: str, operator: Operator, values: list[str]) -> LabelSelectorRequirement:
    key_match = _KEY_RE.fullmatch(key)
    prefix = key_match["prefix"] if key_match else None
    if key_match is None or (prefix is not None and len(prefix) > _PREFIX_MAX):
        raise SelectorError(f"{part.strip()!r}: {key!r} is not a label key")
    for value in values:
        if not _VALUE_RE.fullmatch(value):
            raise SelectorError(f"{part.strip()!r}: {value!r} is not a label value")
    return LabelSelectorRequirement(key=key, operator=operator, values=values)

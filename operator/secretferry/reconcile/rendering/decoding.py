"""Value decoding: one source's values decoded by its ``decodingStrategy`` and ``decoding`` rules.

Where it sits (desired.py's docstring has the whole order): per source, after key rewriting and
before the sources are merged and templates render. So a ``decoding`` glob matches the key as
the rewrite rules left it (the name in the target), and a template sees decoded values.

Which strategy a key gets: the first ``decoding`` rule whose glob matches it, else the source's
``decodingStrategy`` (default None: the value as it is). How each strategy decides: binary.py.
A value that is not valid under an explicit Base64 or Base64URL is an error (DecodingFailed)
naming the source and the key, never the value; nothing is written, the target keeps what it has.

Why no rule list can be slow: models/keydecoding.py (fnmatch's atomic-group translation, bounded
glob length, rule count and key length).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from secretferry.models import keydecoding, secretsync
from secretferry.reconcile import problems, reasons
from secretferry.reconcile.rendering import binary

# Compiled globs, shared by every SecretSync and pass (an evicted one only costs a recompile).
_GLOB_CACHE_SIZE = 1024


@lru_cache(maxsize=_GLOB_CACHE_SIZE)
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern))


def strategy_for(
    key: str, rules: Sequence[keydecoding.DecodingRule], default: binary.Strategy
) -> binary.Strategy:
    """The first rule's strategy whose glob matches ``key``, else ``default``. Keys longer than a
    data key match no rule (they are refused later as InvalidKey whatever their value)."""
    if len(key) <= secretsync.DATA_KEY_MAX:
        for rule in rules:
            if _glob(rule.keys).match(key) is not None:
                return rule.strategy
    return default


def decode_values(
    secrets: Mapping[str, str], source: secretsync.Source, *, source_index: int = 0
) -> dict[str, binary.Value]:
    """``secrets`` with every value decoded as the source says (values stay text unless decoded
    bytes are not UTF-8). Raises ``problems.Problem`` (DecodingFailed) for the first key, in key
    order, whose value an explicit strategy cannot decode."""
    if source.decoding_strategy == "None" and not source.decoding:
        return dict(secrets)
    out: dict[str, binary.Value] = {}
    for key in sorted(secrets):
        strategy = strategy_for(key, source.decoding, source.decoding_strategy)
        value = binary.decode(secrets[key], strategy)
        if value is None:
            raise problems.Problem(
                reasons.DECODING_FAILED,
                f"spec.sources[{source_index}]: the value of key {key} is not valid {strategy}"
                f" (decodingStrategy or a decoding rule says {strategy}); fix the value at the"
                " service or the rules (nothing was written, the target keeps what it has)",
            )
        out[key] = value
    return out

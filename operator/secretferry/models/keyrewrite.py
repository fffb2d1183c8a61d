"""Key rewriting rules of a SecretSync source: data the tenant writes, never code we run blindly.

Why these bounds make a rule list cheap whatever it says (reconcile/rendering/rewrite.py applies them):

- regexps are compiled by RE2 (google-re2), whose matching time is linear in the key's length
  for every pattern: no backtracking, so ``(a+)+$`` or ``(a|aa)*x`` cost what ``a`` costs.
  RE2 refuses what would need backtracking (backreferences, lookaround) at compile time, and
  its program size is capped (``max_mem``), so a huge counted repeat is refused too;
- a pattern is at most ``MAX_PATTERN`` characters and compiles to at most ``MAX_PROGRAM_SIZE``
  RE2 instructions (the constant factor of RE2's linear time); a source has at most
  ``MAX_RULES`` rules;
- only keys of at most 253 characters are rewritten, and a rule that makes one longer stops
  the sync (InvalidKey): every step works on at most 253 characters.

So the cost per key is at most MAX_RULES linear passes over 253 characters with a program of
at most 512 instructions (tests/unit/
reconcile/test_rewrite.py replays hostile patterns).
"""

from __future__ import annotations

from typing import Final, Literal, Self

import re2
from pydantic import Field, field_validator, model_validator

from secretferry.models import base

# A regexp long enough for any sensible key rewrite, short enough to keep RE2's compile trivial.
MAX_PATTERN: Final = 256
# Rules per source: each is one linear pass per key; 32 covers any real mapping list.
MAX_RULES: Final = 32
# The same limit as a data key (DATA_KEY_MAX in secretsync.py; a key never needs more).
MAX_KEY: Final = 253
# RE2's memory budget for one compiled program and its DFA cache (its default is 8 MiB).
_MAX_PROGRAM_BYTES: Final = 1 << 20
# RE2 instructions in one compiled pattern. Linear time is O(key length x program size), and a
# counted repeat multiplies the program (``[^a]{1000}`` x3 compiles to 24,004 instructions and
# costs ~8 ms a key over 32 rules); 512 takes any sensible key pattern (``^APP_(.*)$`` is 14,
# ``[a-z0-9_.-]+`` with 200 literals 214) and keeps a rule at tens of µs (bench/bench_rewrite.py).
MAX_PROGRAM_SIZE: Final = 512

_RULE_FIELDS: Final = ("regexp", "addPrefix", "stripPrefix", "transform", "from")
_ONE_RULE = base.cel(
    "[" + ", ".join(f"has(self.{f})" for f in _RULE_FIELDS) + "].filter(x, x).size() == 1"
    " && has(self.from) == has(self.to)",
    "set exactly one of regexp, addPrefix, stripPrefix, transform, or from together with to",
)


def re2_options() -> re2.Options:
    """The options every rewrite regexp is compiled with (also by reconcile/rendering/rewrite.py)."""
    options = re2.Options()
    options.log_errors = False  # RE2 would print the pattern to stderr; the error names it anyway
    options.max_mem = _MAX_PROGRAM_BYTES
    return options


def compile_pattern(pattern: str) -> re2._Regexp:
    """Compile ``pattern`` with RE2; ValueError (saying why) if RE2 refuses it or it is too big."""
    try:
        compiled = re2.compile(pattern, options=re2_options())
    except re2.error as exc:
        why = exc.args[0] if exc.args else "invalid"
        text = why.decode(errors="replace") if isinstance(why, bytes) else str(why)
        raise ValueError(f"not a valid RE2 regexp: {text}") from None
    size = int(compiled.programsize)
    if size > MAX_PROGRAM_SIZE:
        raise ValueError(
            f"compiles to {size} RE2 instructions, over {MAX_PROGRAM_SIZE} (a large counted repeat"
            " such as {200}, or a Unicode class such as \\pL, makes it big)"
        )
    return compiled


class RegexpRewrite(base.CRModel):
    """Replace every match of ``source`` in a key by ``target``, as ESO's rewrite.regexp does."""

    source: str = Field(min_length=1, max_length=MAX_PATTERN)
    """An RE2 regexp (Go's syntax, the apiserver's and ESO's too), e.g. ``-`` or ``^APP_(.*)$``;
    matched anywhere in the key unless anchored; every match is replaced. No backreferences or
    lookaround (RE2 has none): matching time is linear in the key's length, whatever the pattern."""
    target: str = Field(default="", max_length=MAX_KEY)
    """The replacement, e.g. ``_``; ``\\1`` or ``\\g<name>`` insert a group of source (Python's
    syntax, not Go's ``$1``). Empty: delete the matches."""

    @field_validator("source")
    @classmethod
    def _compiles(cls, source: str) -> str:
        compile_pattern(source)
        return source


class RewriteRule(base.CRModel, json_schema_extra=base.validations(_ONE_RULE)):
    """One step applied to every key of a source, in list order; set exactly one kind of step."""

    regexp: RegexpRewrite | None = None
    """Replace the matches of an RE2 regexp, e.g. ``{source: "-", target: "_"}``."""
    add_prefix: str | None = Field(default=None, min_length=1, max_length=MAX_KEY)
    """Prepend this text to every key, e.g. ``APP_``."""
    strip_prefix: str | None = Field(default=None, min_length=1, max_length=MAX_KEY)
    """Remove this text from the start of every key that starts with it, e.g. ``APP_``; other keys
    stay as they are."""
    transform: Literal["Upper", "Lower"] | None = None
    """``Upper`` or ``Lower``: change the case of every key."""
    from_: str | None = Field(default=None, alias="from", min_length=1, max_length=MAX_KEY)
    """Rename exactly this key (as the earlier rules left it), e.g. ``DB_PASSWORD``; set with ``to``.
    A key that is not there is not an error."""
    to: str | None = Field(default=None, min_length=1, max_length=MAX_KEY)
    """The new name of the key named by ``from``, e.g. ``password``."""

    @model_validator(mode="after")
    def _one(self) -> Self:
        kinds = [self.regexp, self.add_prefix, self.strip_prefix, self.transform, self.from_]
        if sum(k is not None for k in kinds) != 1 or (self.from_ is None) != (self.to is None):
            raise ValueError(
                "set exactly one of regexp, addPrefix, stripPrefix, transform, or from together with to"
            )
        return self

"""Generated passwords honour the spec exactly; UUIDs are version 4. No flaky thresholds: the
randomness checks are ones a correct generator passes with certainty or with a probability of
failure below 2^-100."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from secretferry.models import generators
from secretferry.reconcile.generators import values

DIGITS = set(generators.DIGIT_CHARACTERS)
LOWER = set(generators.LOWER_CHARACTERS)
UPPER = set(generators.UPPER_CHARACTERS)


def spec(**fields: Any) -> generators.PasswordGeneratorSpec:
    return generators.PasswordGeneratorSpec.model_validate(fields)


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"length": 8, "digits": 0, "symbols": 0},
        {"length": 8, "digits": 8, "symbols": 0, "allowRepeat": True},
        {"length": 8, "digits": 0, "symbols": 8, "allowRepeat": True},
        {"length": 32, "digits": 10, "symbols": 5, "symbolCharacters": "-_.!@"},
        {"length": 40, "digits": 3, "symbols": 2, "noUpper": True, "allowRepeat": True},
        {"length": 256, "digits": 100, "symbols": 100, "allowRepeat": True},
        {"length": 62, "digits": 10, "symbols": 0},  # every letter and digit exactly once
    ],
)
@pytest.mark.parametrize("seed", range(20))
def test_counts_charset_and_repeats_are_exact(fields: dict[str, Any], seed: int) -> None:
    s = spec(**fields)
    pw = values.password(s, rng=random.Random(seed))
    symbols = set(s.symbol_characters)
    letters = LOWER if s.no_upper else LOWER | UPPER
    assert len(pw) == s.length
    assert sum(c in DIGITS for c in pw) == s.digits
    assert sum(c in symbols for c in pw) == s.symbols
    assert all(c in DIGITS | symbols | letters for c in pw)
    assert sum(c in letters for c in pw) == s.length - s.digits - s.symbols
    if not s.allow_repeat:
        assert len(set(pw)) == len(pw)


def test_positions_are_shuffled() -> None:
    # Without the shuffle the digits would always come first. 8 digits among 24 positions: the
    # chance that a shuffled password starts with them all is 1/C(24,8) ≈ 1.4e-6 per draw; over 20
    # draws, at least one not starting with 8 digits is certain in practice (and seeded here).
    s = spec(length=24, digits=8, symbols=0)
    rng = random.Random(7)
    starts = [values.password(s, rng=rng)[:8] for _ in range(20)]
    assert any(not set(start) <= DIGITS for start in starts)


def test_passwords_differ_with_the_system_generator() -> None:
    # 24 characters from ~80: two equal passwords out of 50 would have a chance below 2^-100.
    drawn = {values.password(spec()) for _ in range(50)}
    assert len(drawn) == 50


def test_every_symbol_and_letter_can_appear() -> None:
    # 400 draws of 4 symbols from 27 without repeat: a symbol never drawn has chance (23/27)^400 ≈ 1e-28.
    s = spec()
    seen: set[str] = set()
    rng = random.Random(1)
    for _ in range(400):
        seen.update(values.password(s, rng=rng))
    assert set(s.symbol_characters) | DIGITS | LOWER | UPPER == seen


def test_uuid_is_version_4_and_unique() -> None:
    drawn = {values.uuid4() for _ in range(100)}
    assert len(drawn) == 100
    assert all(uuid.UUID(u).version == 4 and str(uuid.UUID(u)) == u for u in drawn)


def test_the_kind_decides_what_is_generated() -> None:
    meta = {"name": "x", "namespace": "ns", "uid": "u"}
    assert uuid.UUID(values.generate(generators.parse("UUIDGenerator", {"metadata": meta}))).version == 4
    assert len(values.generate(generators.parse("PasswordGenerator", {"metadata": meta}))) == 24

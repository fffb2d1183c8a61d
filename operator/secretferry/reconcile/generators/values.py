"""The generated values: passwords by the spec's rules, and UUIDv4. Pure, and only ``secrets``.

Why counts are exact and positions shuffled: the spec says how many digits and symbols, and a
password policy checking "at least N" should never be met by luck; the characters of each class
are drawn independently with the system's CSPRNG (``secrets.SystemRandom``), then the whole
sequence is shuffled by the same generator so no class sits at a predictable position. Without
``allowRepeat`` each class is drawn without replacement (the classes are disjoint, so no character
repeats in the password).
"""

from __future__ import annotations

import random
import secrets
import uuid

from secretferry.models import generators

_SYSTEM = secrets.SystemRandom()


def password(spec: generators.PasswordGeneratorSpec, *, rng: random.Random = _SYSTEM) -> str:
    """A password honouring ``spec`` exactly. ``rng``: only tests pass another (seeded) one."""
    letters = generators.LOWER_CHARACTERS + ("" if spec.no_upper else generators.UPPER_CHARACTERS)
    counts = (
        (generators.DIGIT_CHARACTERS, spec.digits),
        (spec.symbol_characters, spec.symbols),
        (letters, spec.length - spec.digits - spec.symbols),
    )
    chosen: list[str] = []
    for pool, count in counts:
        if spec.allow_repeat:
            chosen.extend(rng.choice(pool) for _ in range(count))
        else:
            chosen.extend(rng.sample(pool, count))  # the model bounds count by len(pool)
    rng.shuffle(chosen)
    return "".join(chosen)


def uuid4() -> str:
    """A random UUID (version 4, from ``os.urandom``), in its canonical text form."""
    return str(uuid.uuid4())


def generate(generator: generators.Generator) -> str:
    """The value for ``generator`` (its kind decides)."""
    if isinstance(generator, generators.PasswordGenerator):
        return password(generator.spec)
    return uuid4()

"""Injected time and jitter for unit tests: a clock the test moves by hand, a draw at the top of a range.

Imported by name (``from clock_fakes import Clock, Top``): ``tests/unit`` is on ``sys.path`` through
its ``conftest.py``, as ``tests`` is for ``waiting``.
"""

from __future__ import annotations

import random


class Clock:
    """A monotonic clock that stands still until the test sets ``now``."""

    def __init__(self, now: float = 1000.0) -> None:
        # Any start works; well above zero, so that "now minus a delay" is never negative.
        self.now = now

    def __call__(self) -> float:
        return self.now


class Top(random.Random):
    """Always draws the top of the range, so a jittered delay equals the backoff ceiling."""

    def uniform(self, a: float, b: float) -> float:
        return b

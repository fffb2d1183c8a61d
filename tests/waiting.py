"""Waiting for a real system (control plane, operator process) to reach a state: the one polling helper.

Integration tests only: they watch processes and an apiserver that run on real time. Unit tests never
poll on real time; they run on the loop's virtual time (``pytest.mark.looptime``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    check: Callable[[], T | None], *, timeout: float = 30.0, what: str, interval: float = 0.2
) -> T:
    """Call ``check`` every ``interval`` seconds until it returns something truthy, and return that.

    Raises ``AssertionError`` naming ``what`` (and the last answer) after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")

"""handlers/leases.py: the keeper loop's wait ends at a spec edit (virtual time)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from secretferry.handlers import leases as lease_handlers

pytestmark = pytest.mark.looptime


class Stopped:
    """kopf's DaemonStopped as the loop uses it: ``await stopped.wait(seconds)``."""

    def wait(self, seconds: float) -> Any:
        return asyncio.sleep(seconds)


async def test_the_pause_ends_at_a_spec_edit_not_after_the_delay() -> None:
    woken = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.call_later(1.0, woken.set)  # the on.event handler saw a new generation
    started = loop.time()
    await lease_handlers._pause(cast(Any, Stopped()), woken, 300.0)
    assert loop.time() - started == pytest.approx(1.0)

    woken.clear()
    started = loop.time()
    await lease_handlers._pause(cast(Any, Stopped()), woken, 5.0)  # no edit: the whole delay
    assert loop.time() - started == pytest.approx(5.0)

"""The controller's background tasks, in one place so that stopping cancels every one of them.

Two kinds: the lifetime tasks (start-up, watches, loops), kept until stop; and short side tasks
(an identity's login check, a stream refresh), let go once done so they do not pile up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any


class Tasks:
    def __init__(self) -> None:
        self._lifetime: list[asyncio.Task[None]] = []
        self._side: set[asyncio.Task[None]] = set()
        self._closed = False

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """A task that runs until stop (or ends by itself); kept, so stop sees how it ended."""
        task = asyncio.create_task(coro, name=name)
        self._lifetime.append(task)
        if self._closed:
            task.cancel()  # see cancel_all
        return task

    def spawn_side(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """A short task, forgotten once done."""
        task = asyncio.create_task(coro)
        self._side.add(task)
        task.add_done_callback(self._side.discard)
        if self._closed:
            task.cancel()  # see cancel_all
        return task

    async def cancel_all(self) -> None:
        """Cancel every task, and every one spawned from now on before it runs a step: a replica
        that stopped leading may still receive kopf's events while it shuts down, and none of them
        may start a login or a status write the new leader would then race."""
        self._closed = True
        tasks = self._lifetime + list(self._side)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

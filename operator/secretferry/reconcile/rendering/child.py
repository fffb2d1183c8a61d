"""The parent's handle on one template worker process (``worker`` is the child's side).

``Child.start`` runs the worker and waits for its READY frame; ``Child.render`` writes one request
and reads the frames of its answer under the wall-clock deadline. How a render ended becomes a
``TemplateRenderError`` naming the key and the limit: an ERROR frame from the child, its exit
status (``EXIT_CPU``, ``EXIT_MEMORY``, a signal), or the deadline, after which the child is
killed. A child that was killed, died or broke the wire is never used again (``alive``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from secretferry.reconcile.rendering import templating, worker

log = logging.getLogger(__name__)

Deadline = Callable[[float], contextlib.AbstractAsyncContextManager[object]]
"""``asyncio.timeout``, or a test's stand-in: deadlines are the only use of time here."""

# A child starts in ~0.3 s on an idle machine; on 2 busy cores it has taken seconds.
_STARTUP_SECONDS: Final = 30.0
# Frames other than values (key names, error messages) are small; anything bigger is a broken child.
_SMALL_FRAME_BYTES: Final = 64 * 1024
# The environment a child gets: enough to run the interpreter, none of the operator's settings.
_PASSED_ENV: Final = ("PATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL")


@dataclass(frozen=True)
class Limits:
    cpu_seconds: float
    """CPU time one render (all template keys of a SecretSync) may use."""
    timeout_seconds: float
    """Wall-clock time a worker may take for one render before it is killed."""
    memory_bytes: int
    """Memory a worker may allocate beyond its size at start-up."""
    max_output_bytes: int
    """UTF-8 bytes the rendered values of one SecretSync may add up to."""

    def worker_config(self) -> str:
        """The child's last argument: its limits (never a secret: those go through the pipe)."""
        return json.dumps(
            {
                "cpu_seconds": self.cpu_seconds,
                "memory_bytes": self.memory_bytes,
                "max_output_bytes": self.max_output_bytes,
                "parent_pid": os.getpid(),
            }
        )


def command() -> list[str]:
    """The child's command line, minus its JSON limits. ``-I``: no environment variables, user
    site or working directory decide what the child imports; the package's own directory is
    put on its path explicitly, so that an install from source works as well as a wheel."""
    root = str(Path(__file__).resolve().parents[3])
    bootstrap = (
        f"import sys; sys.path.insert(0, {root!r}); "
        "from secretferry.reconcile.rendering import worker; worker.main(sys.argv[1:])"
    )
    return [sys.executable, "-I", "-B", "-c", bootstrap]


class Unavailable(Exception):
    """The child did not start (``why``: its exit status)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class Child:
    """One ``worker`` process; ``render`` is one request and its answer, under the deadline."""

    def __init__(self, proc: asyncio.subprocess.Process, limits: Limits) -> None:
        self.proc = proc
        self.limits = limits
        self._broken = False

    @classmethod
    async def start(cls, command: Sequence[str], *, limits: Limits, deadline: Deadline) -> Child:
        env = {name: os.environ[name] for name in _PASSED_ENV if name in os.environ}
        proc = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env
        )
        started = cls(proc, limits)
        try:
            async with deadline(_STARTUP_SECONDS):
                kind, _ = await started._frame()
        except (asyncio.IncompleteReadError, TimeoutError, _ProtocolError):
            kind = b""
        except BaseException:  # cancelled while it started: it must not outlive the request
            started.kill()
            raise
        if kind != worker.READY:
            started.kill()
            code = await proc.wait()
            raise Unavailable(_describe_exit(code))
        log.debug("template worker %d started", proc.pid)
        return started

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return not self._broken and self.proc.returncode is None

    async def render(self, body: bytes, *, first_key: str, deadline: Deadline) -> dict[str, str | bytes]:
        progress = [first_key]  # the key being rendered, as the child last reported it
        try:
            async with deadline(self.limits.timeout_seconds):
                outcome = await self._exchange(body, progress)
        except TimeoutError:
            self.kill()
            await self.proc.wait()
            outcome = templating.TemplateRenderError(
                progress[-1],
                f"took longer than the time limit of {self.limits.timeout_seconds:g} s (wall clock)",
                limit="timeout",
            )
        except BaseException:  # cancelled: the child is mid-answer, so it cannot be reused
            self.kill()
            raise
        if isinstance(outcome, templating.TemplateRenderError):
            raise outcome
        return outcome

    async def _exchange(
        self, body: bytes, progress: list[str]
    ) -> dict[str, str | bytes] | templating.TemplateRenderError:
        assert self.proc.stdin is not None
        rendered: dict[str, str | bytes] = {}
        received = 0  # bytes of values: the child bounds them, and so does the parent
        try:
            self.proc.stdin.write(worker.REQUEST.pack(len(body)) + body)
            await self.proc.stdin.drain()
            while True:
                kind, payload = await self._frame()
                if kind == worker.KEY:
                    progress.append(payload.decode())
                elif kind in (worker.VALUE, worker.BYTES):
                    received += len(payload)
                    if received > self.limits.max_output_bytes + _SMALL_FRAME_BYTES:
                        raise _ProtocolError
                    (length,) = worker.KEY_LENGTH.unpack_from(payload)
                    key = payload[2 : 2 + length].decode()
                    value = payload[2 + length :]
                    rendered[key] = value.decode() if kind == worker.VALUE else bytes(value)
                elif kind == worker.DONE:
                    return rendered
                elif kind == worker.ERROR:
                    error = json.loads(payload)
                    return templating.TemplateRenderError(
                        error["key"], error["message"], limit=error["limit"]
                    )
                else:
                    raise _ProtocolError
        except (asyncio.IncompleteReadError, BrokenPipeError, ConnectionResetError):
            pass  # the child is gone: its exit status says why
        except (_ProtocolError, ValueError):
            self.kill()
        self._broken = True
        code = await self.proc.wait()
        return self._exit_error(progress[-1], code)

    def _exit_error(self, key: str, code: int) -> templating.TemplateRenderError:
        if code == worker.EXIT_CPU:
            message = worker.cpu_message(self.limits.cpu_seconds)
            return templating.TemplateRenderError(key, message, limit="cpu")
        if code == worker.EXIT_MEMORY:
            message = worker.memory_message(self.limits.memory_bytes)
            return templating.TemplateRenderError(key, message, limit="memory")
        log.warning("template worker %d stopped unexpectedly (%s)", self.pid, _describe_exit(code))
        message = f"the template worker stopped unexpectedly ({_describe_exit(code)})"
        return templating.TemplateRenderError(key, message)

    async def _frame(self) -> tuple[bytes, bytes]:
        assert self.proc.stdout is not None
        header = await self.proc.stdout.readexactly(worker.FRAME.size)
        kind, length = worker.FRAME.unpack(header)
        if length > self.limits.max_output_bytes + _SMALL_FRAME_BYTES:
            raise _ProtocolError
        return kind, await self.proc.stdout.readexactly(length)

    def kill(self) -> None:
        self._broken = True
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    async def stop(self) -> None:
        """EOF on stdin ends an idle child; one that does not end within a second is killed."""
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            async with asyncio.timeout(1.0):
                await self.proc.wait()
        except TimeoutError:
            self.kill()
            await self.proc.wait()


class _ProtocolError(Exception):
    """The child wrote something the wire does not allow."""


def _describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit code {code}"

"""The template worker: a child process that renders templates for ``pool`` under hard limits.

Why a process of its own: a template is code written by a namespace user. On the event loop, one
with two nested loops stalled every SecretSync in the cluster for a minute and failed the
liveness probe; nothing inside Python can stop a thread that does not yield, or cap the memory it
allocates. A child process can be given limits by the kernel and, failing all else, be killed.

Limits, set here in the child (lowering one's own limits needs no capability):

- **CPU time**: ``ITIMER_PROF`` counts this process's CPU time and raises ``_CpuLimit`` in the
  render when the budget is spent; it unwinds like any exception and is answered as ``ERROR``.
- **memory**: ``RLIMIT_AS`` = the size after start-up plus the budget; an allocation beyond it is
  a MemoryError, answered as ``ERROR`` — or, when the heap does not shrink back, by exiting with
  ``EXIT_MEMORY`` (the parent starts a new worker).
- **output**: counted while each template streams (``templating.render``).
- **wall clock**: the parent's deadline, the backstop for everything else (a C call that never
  returns to the interpreter): it kills this process and starts another.

A worker outlives the limits it enforces where it safely can, because the next render may be
another namespace's, and a fresh process costs it ~0.15 s of CPU first. (``EXIT_CPU`` and
``EXIT_MEMORY`` remain for a heap that stayed big, and for a limit hit outside a render.)
Also: nice 10 once started (the operator's own loop wins the CPU), no core dumps, not dumpable
(no ptrace of, and no /proc/<pid>/environ or mem for, a heap holding secrets), no file writes,
SIGKILL when the parent dies.

Wire (stdin/stdout, after a ``READY`` frame): the parent writes one request (a 4-byte big-endian
length and a JSON object ``{"templates": {...}, "secrets": {...}, "binary": {...}}``, ``binary``
holding the values that are bytes, base64-encoded: ``encode_request``); the child answers with
frames (``FRAME``: a type byte and a 4-byte length, then the payload): ``KEY`` before each key
but the first is rendered (what the parent names if it has to kill), ``VALUE`` per rendered key
(2-byte key length, key, value; UTF-8) or ``BYTES`` for a key whose value is bytes (the same
layout, the raw bytes), then ``DONE``; or ``ERROR`` (JSON ``{"key", "message", "limit"}``) for
a failure that leaves the process usable. The output limit counts both kinds alike. Nothing else
is written: stderr goes to /dev/null as soon as start-up is done, because a traceback may quote a
value.
"""

from __future__ import annotations

import base64
import contextlib
import gc
import json
import os
import resource
import signal
import struct
import sys
from collections.abc import Mapping, Sequence
from typing import Any, BinaryIO, Final

FRAME: Final = struct.Struct(">cI")
REQUEST: Final = struct.Struct(">I")
KEY_LENGTH: Final = struct.Struct(">H")
READY: Final = b"R"
KEY: Final = b"K"
VALUE: Final = b"V"
BYTES: Final = b"B"
ERROR: Final = b"E"
DONE: Final = b"D"
EXIT_MEMORY: Final = 3
EXIT_CPU: Final = 4
EXIT_PROTOCOL: Final = 5
# Below the operator (nice 0): under contention the event loop and /healthz get the CPU first.
NICENESS: Final = 10
_PR_SET_PDEATHSIG: Final = 1
_PR_SET_DUMPABLE: Final = 4


class _CpuLimit(BaseException):
    """Raised from the SIGPROF handler. A BaseException, so no ``except Exception`` on the way
    (ours or Jinja's) can swallow it."""


def _on_sigprof(signum: int, frame: object) -> None:
    raise _CpuLimit


def main(argv: Sequence[str]) -> None:
    """``argv[0]``: JSON limits ``{"cpu_seconds", "memory_bytes", "max_output_bytes", "parent_pid"}``."""
    config = json.loads(argv[0])
    _harden(parent_pid=int(config["parent_pid"]))
    # Imported before the memory limit: the limit is on top of what Jinja needs.
    from secretferry.reconcile.rendering import templating

    config["baseline_bytes"] = _limit_memory(int(config["memory_bytes"]))
    signal.signal(signal.SIGPROF, _on_sigprof)
    out = sys.stdout.buffer
    _send(out, READY, flush=True)
    _silence_stderr()
    # Only now, with stderr on /dev/null: the operator's stderr may be a file, and a warning at
    # start-up would have been SIGXFSZ.
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # no file writes (pipes are not files)
    # Only now: a replacement for a worker that a bomb killed is wanted soon, at full speed.
    os.nice(NICENESS)
    stdin = sys.stdin.buffer
    while True:
        request = _read_request(stdin)
        if request is None:
            return
        try:
            _serve(out, templating, request, config)
        except MemoryError:  # outside the render (reading or answering): start afresh
            os._exit(EXIT_MEMORY)
        except _CpuLimit:
            os._exit(EXIT_CPU)


def encode_request(templates: Mapping[str, str], secrets: Mapping[str, str | bytes]) -> bytes:
    """The request body for ``templates`` over ``secrets`` (bytes values base64 in ``binary``)."""
    text = {k: v for k, v in secrets.items() if isinstance(v, str)}
    raw = {k: base64.b64encode(v).decode() for k, v in secrets.items() if isinstance(v, bytes)}
    return json.dumps({"templates": dict(templates), "secrets": text, "binary": raw}).encode()


def decode_request(body: bytes) -> tuple[dict[str, str], dict[str, str | bytes]]:
    """(templates, secrets) from ``encode_request``'s body."""
    payload = json.loads(body)
    secrets: dict[str, str | bytes] = dict(payload["secrets"])
    secrets.update({k: base64.b64decode(v) for k, v in (payload.get("binary") or {}).items()})
    return payload["templates"], secrets


def cpu_message(seconds: float) -> str:
    return f"exceeded the CPU time limit of {seconds:g} s"


def memory_message(budget_bytes: int) -> str:
    return f"exceeded the memory limit of {budget_bytes // (1024 * 1024)} MiB"


def _serve(out: BinaryIO, templating: Any, request: bytes, config: dict[str, Any]) -> None:
    templates, secrets = decode_request(request)
    current = [next(iter(templates), "")]  # the parent names the first key until told otherwise

    def on_key(key: str) -> None:
        if key != current[0]:
            current[0] = key
            _send_now(KEY, key.encode())

    failure: dict[str, Any] | None = None
    out_of_memory = False
    try:
        signal.setitimer(signal.ITIMER_PROF, float(config["cpu_seconds"]))
        try:
            rendered = templating.render(
                templates, secrets, max_output_bytes=int(config["max_output_bytes"]), on_key=on_key
            )
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
    except _CpuLimit:
        # Unwound like any exception, through code that keeps no state across renders.
        failure = {"key": current[0], "message": cpu_message(config["cpu_seconds"]), "limit": "cpu"}
    except MemoryError:
        out_of_memory = True  # judged below, once the traceback (and what it holds) is gone
    except templating.TemplateRenderError as exc:
        failure = {"key": exc.key, "message": exc.message, "limit": exc.limit}
    if out_of_memory:
        failure = {"key": current[0], "message": memory_message(config["memory_bytes"]), "limit": "memory"}
    # A bomb may leave the heap grown towards the limit: the next render would start short.
    bombed = failure is not None and failure["limit"] in ("cpu", "memory")
    if bombed and not _heap_recovered(int(config["baseline_bytes"]), int(config["memory_bytes"])):
        os._exit(EXIT_MEMORY if out_of_memory else EXIT_CPU)
    if failure is not None:
        _send(out, ERROR, json.dumps(failure).encode(), flush=True)
        return
    for key, value in rendered.items():
        encoded = key.encode()
        kind, data = (BYTES, value) if isinstance(value, bytes) else (VALUE, value.encode())
        _send(out, kind, KEY_LENGTH.pack(len(encoded)) + encoded + data)
    _send(out, DONE, flush=True)


def _send_now(kind: bytes, payload: bytes) -> None:
    """One ``write(2)`` while the CPU timer may fire: a signal either comes before it (nothing
    written) or after it (all of a frame below PIPE_BUF written), never halfway through a frame.
    Nothing is buffered in ``sys.stdout`` while a render runs, so the order holds."""
    frame = FRAME.pack(kind, len(payload)) + payload
    while frame:
        frame = frame[os.write(1, frame) :]


def _send(out: BinaryIO, kind: bytes, payload: bytes = b"", *, flush: bool = False) -> None:
    out.write(FRAME.pack(kind, len(payload)))
    out.write(payload)
    if flush:
        out.flush()


def _read_request(stdin: BinaryIO) -> bytes | None:
    header = stdin.read(REQUEST.size)
    if not header:
        return None  # the parent closed the pipe: done
    if len(header) != REQUEST.size:
        os._exit(EXIT_PROTOCOL)
    (length,) = REQUEST.unpack(header)
    body = stdin.read(length)
    if len(body) != length:
        os._exit(EXIT_PROTOCOL)
    return body


def _harden(*, parent_pid: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; EOF ends us
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: EOF on stdin still ends us
        pass
    if os.getppid() != parent_pid:  # the parent died before PDEATHSIG was armed
        os._exit(0)


def _limit_memory(budget_bytes: int) -> int:
    """RLIMIT_AS = the size now + the budget; returns the size now."""
    size = _vm_size_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    wanted = size + budget_bytes
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if soft == resource.RLIM_INFINITY or wanted < soft:
        resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))
    return size


def _heap_recovered(baseline_bytes: int, budget_bytes: int) -> bool:
    """Whether a memory limit hit left the process small again: big blocks are mmap'd and given
    back when freed, but many small objects can leave a heap that stays near the limit, and a
    worker that starts every render nearly out of memory fails templates that are fine."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)  # glibc: hand the heap's free top back
    return _vm_size_bytes() <= baseline_bytes + budget_bytes // 4


def _vm_size_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def _silence_stderr() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)

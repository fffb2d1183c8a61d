"""The readiness endpoint: ready only when this process serves, or stands by ready to take over.

Why a probe of its own: kopf's liveness endpoint (/healthz) answers as soon as the event loop runs,
long before the caches are filled, so it says nothing about whether the operator serves; and a
liveness probe must not fail while a large cluster is still being listed, or the kubelet would
restart the pod in a loop. The readiness probe (/readyz, on ``readiness_port``) is what a rolling
upgrade (``helm upgrade --wait``, ``kubectl rollout status``, Argo CD's health) waits for:

- **starting** (503): kopf's start-up handler has not finished (no connection to the API server yet,
  the HMAC key not read, the controller not built);
- **standby** (200): under leader election, a replica that does not hold the Lease once started. It
  serves nothing and cannot: only the Lease holder may write. Holding readiness back until it leads
  would keep every standby NotReady forever and stall every rollout of more than one replica;
  ready means "a warm candidate that takes over when the holder goes";
- **listing** (503): this replica leads (or runs without leader election) but its caches are not
  complete yet: the identities listed, every SecretSync watch listed once, and the cache of the
  Secrets it manages complete (the point where existing SecretSyncs are worked through);
- **serving** (200): all of that holds;
- **stopping** (503): shutting down (SIGTERM), so nothing counts on this pod meanwhile.

The decision is a pure function (``verdict``), table-tested; the server is a few lines of asyncio
(the operator's only HTTP server library, aiohttp, is the Kubernetes client's, kept in ``kube``),
enough for a kubelet's GET: it reads the request line, answers, and closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

PATH = "/readyz"
# How long a client may take to send its request line and headers: a kubelet sends them at once;
# anything slower is not a probe and must not hold a connection open.
_REQUEST_TIMEOUT_SECONDS = 5.0
# A probe's request line and headers are a few hundred bytes; more is not a probe.
_MAX_REQUEST_BYTES = 8192

STARTING = "starting"
STANDBY = "standby"
LISTING = "listing"
SERVING = "serving"
STOPPING = "stopping"


@dataclass(frozen=True)
class Verdict:
    ready: bool
    state: str


def verdict(
    *, started: bool, stopping: bool, leader_election: bool, leading: bool, caches_complete: bool
) -> Verdict:
    """What the probe answers (module docstring: the five states and why standby is ready)."""
    if stopping:
        return Verdict(False, STOPPING)
    if not started:
        return Verdict(False, STARTING)
    if leader_election and not leading:
        return Verdict(True, STANDBY)
    if not caches_complete:
        return Verdict(False, LISTING)
    return Verdict(True, SERVING)


class Readiness:
    """The process's state as the probe sees it; the kopf handlers move it along."""

    def __init__(self) -> None:
        self.started = False
        self.stopping = False
        self.leader_election = False
        self.leading: Callable[[], bool] = lambda: False
        self.caches_complete: Callable[[], bool] = lambda: False

    def verdict(self) -> Verdict:
        return verdict(
            started=self.started,
            stopping=self.stopping,
            leader_election=self.leader_election,
            leading=self.leading(),
            caches_complete=self.caches_complete(),
        )


def response(readiness: Readiness, request_line: bytes) -> bytes:
    """The whole HTTP/1.1 answer to one request line: 200 or 503 with the state as text for GET and
    HEAD of /readyz, 404 elsewhere, 405 for other methods."""
    parts = request_line.decode("latin-1").split()
    method, target = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
    if target.split("?", 1)[0] != PATH:
        status, body = "404 Not Found", "not found\n"
    elif method not in ("GET", "HEAD"):
        status, body = "405 Method Not Allowed", "GET or HEAD\n"
    else:
        found = readiness.verdict()
        status = "200 OK" if found.ready else "503 Service Unavailable"
        body = found.state + "\n"
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return (head + ("" if method == "HEAD" else body)).encode()


async def _answer(readiness: Readiness, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        async with asyncio.timeout(_REQUEST_TIMEOUT_SECONDS):
            head = await reader.readuntil(b"\r\n\r\n")
        if len(head) <= _MAX_REQUEST_BYTES:
            writer.write(response(readiness, head.split(b"\r\n", 1)[0]))
            await writer.drain()
    except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        pass  # not a probe, or gone: nothing to answer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def serve(readiness: Readiness, *, host: str, port: int) -> asyncio.Server:
    """Listen on ``host``:``port`` (``::`` is IPv6, as for the liveness endpoint) until closed."""
    server = await asyncio.start_server(
        lambda r, w: _answer(readiness, r, w), host=host, port=port, limit=_MAX_REQUEST_BYTES
    )
    log.info("readiness endpoint on %s:%d%s", host, port, PATH)
    return server

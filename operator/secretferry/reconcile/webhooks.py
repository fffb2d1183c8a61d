"""The signed-webhook receiver: the service's ``secrets.modified`` webhooks nudge the scopes they name.

Why: on plans without event streams (and on older self-hosted servers) scopes poll; the service
sends signed webhooks on every plan, so a change can reach its Secret in milliseconds instead of a
polling interval. Off unless ``webhook_port`` is set. Every replica listens (the chart's Service
routes to all of them): the leader nudges, a standby verifies and relays the request to the leader
(``webhook_relay``), so a webhook that lands on a standby is not lost.

What a request can do, and what it cannot (the endpoint is reachable by whoever can reach the
port, so the body is untrusted input):

- nothing unless its ``x-infisical-signature`` verifies with a key read from the mounted Secret
  (constant-time compare, ``service.webhook_signature``) and its timestamp is inside the replay
  window; a body over ``webhook_max_body_bytes`` is refused before it is read whole; each source
  address has a token bucket (``webhook_rate_per_second``/``webhook_burst``), and past it a small
  request is still verified from one shared budget, so a flood from the service's own address cannot
  starve its webhooks (``webhook_admission``); the source is the TCP peer, or the client a trusted
  proxy names (``webhook_sources``);
- a verified body only chooses *which* served scopes to re-list: (workspaceId, environment,
  secretPath) is matched against the scopes our SecretSyncs bind (exact path, or below a recursive
  scope's path); no field of it is written, logged as a value, or used to reach anything;
- the nudge is the stream's: ``Streaming.on_resync(scopes, "event")`` (scopes stale, SecretSyncs
  queued as live work); leading edge, then at most one more nudge per scope per
  ``event_debounce_seconds`` however many requests arrive, so a storm costs at most one list per
  scope per window.

Every request is counted in ``secretferry_webhook_requests_total{result}``.
The HTTP is a deliberately tiny HTTP/1.1 subset on asyncio streams (one POST, Content-Length
required, connection closed after the answer): aiohttp stays in ``kube`` (import-linter), and a
receiver that accepts one request shape has less to get wrong.
"""

from __future__ import annotations

import asyncio
import logging
import pathlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from secretferry import metrics
from secretferry import settings as settings_mod
from secretferry.reconcile import state, tasks, webhook_admission, webhook_relay, webhook_sources
from secretferry.service import scopes as scope_mod
from secretferry.service import streams as streams_mod
from secretferry.service import webhook_signature as sig

log = logging.getLogger(__name__)

# A request line and its headers fit in this (a webhook sends a handful of short headers).
_MAX_HEAD_BYTES = 8192
# A client that does not finish its request in this time is dropped (slowloris).
_READ_TIMEOUT_SECONDS = 5.0


def matching(scopes: Iterable[scope_mod.Scope], change: sig.Change) -> set[scope_mod.Scope]:
    """The served scopes a change at (workspaceId, environment, secretPath) can alter."""
    return {
        scope
        for scope in scopes
        if scope.project_id == change.workspace_id and scope.covers(change.environment, change.secret_path)
    }


class KeyFile:
    """The signing keys, from the mounted Secret (one key per line: a rotation overlaps).

    Re-read when the file changes (the kubelet updates a mounted Secret in place), so a rotated
    key needs no restart. An unreadable or empty file means no key: every request is refused."""

    def __init__(self, path: str) -> None:
        self._path = pathlib.Path(path)
        self._stamp: tuple[int, int, int] | None = None
        self._keys: tuple[str, ...] = ()

    def keys(self) -> tuple[str, ...]:
        try:
            st = self._path.stat()
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)  # the kubelet swaps a symlink: new inode
            if stamp != self._stamp:
                text = self._path.read_text()
                self._keys = tuple(line.strip() for line in text.splitlines() if line.strip())
                self._stamp = stamp
        except OSError:
            self._keys, self._stamp = (), None
        return self._keys


class Nudger:
    """Debounced nudges: at once for a scope not nudged lately, then one more per window."""

    def __init__(
        self,
        *,
        on_resync: Callable[[set[scope_mod.Scope], str], None],
        debounce_seconds: float,
        background: tasks.Tasks,
    ) -> None:
        self._on_resync = on_resync
        self._debounce = debounce_seconds
        self._background = background
        self._pending: set[scope_mod.Scope] = set()
        self._flushing = False

    def nudge(self, scopes: set[scope_mod.Scope]) -> None:
        self._pending |= scopes
        if not self._flushing and self._pending:
            self._flushing = True
            self._background.spawn_side(self._flush())

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, set()
                self._on_resync(batch, streams_mod.RESYNC_EVENT)
                metrics.WEBHOOK_NUDGES.inc(len(batch))
                await asyncio.sleep(self._debounce)
        finally:
            self._flushing = False


class Receiver:
    def __init__(
        self,
        *,
        settings: settings_mod.Settings,
        scopes: state.ScopeIndex,
        on_resync: Callable[[set[scope_mod.Scope], str], None],
        background: tasks.Tasks,
        wall_clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        clock: Callable[[], float] = time.monotonic,
        leading: Callable[[], bool] = lambda: True,
        leader: Callable[[], webhook_relay.Address | None] = lambda: None,
    ) -> None:
        """``leading``: whether this replica runs the controller now (it nudges); else the request
        is relayed to ``leader()``, the address the leader advertises in the Lease."""
        self._settings = settings
        self._leading = leading
        self._leader = leader
        self._scopes = scopes
        self._keys = KeyFile(settings.webhook_signing_key_file)
        self._admission = webhook_admission.Admission(
            rate=settings.webhook_rate_per_second,
            burst=settings.webhook_burst,
            over_rate_per_second=settings.webhook_over_rate_verify_per_second,
            clock=clock,
        )
        self._trusted = webhook_sources.parse_networks(settings.webhook_trusted_proxies)
        self._client_header = settings.webhook_client_address_header.lower()
        self._nudger = Nudger(
            on_resync=on_resync, debounce_seconds=settings.event_debounce_seconds, background=background
        )
        self._now_ms = wall_clock_ms

    def handle(self, source: str, header: str | None, body: bytes | None) -> tuple[int, str]:
        """One request at the leader, already read (``body`` None: over the cap) → (HTTP status,
        result)."""
        verdict = self._verify(source, header, body)
        if not isinstance(verdict, sig.Change):
            return verdict
        hit = matching(self._scopes.all(), verdict)
        if hit:
            self._nudger.nudge(hit)
        return self._count(202, sig.OK)

    async def answer(
        self, source: str, header: str | None, body: bytes | None, *, relayed: bool
    ) -> tuple[int, str]:
        """One request, already read: handled here while leading, else verified and relayed once."""
        if self._leading():
            return self.handle(source, header, body)
        verdict = self._verify(source, header, body)
        if not isinstance(verdict, sig.Change):
            return verdict  # refused here: a forgery never reaches the leader
        leader = None if relayed else self._leader()  # one hop: never relay a relayed request
        if leader is None or body is None:
            return self._count(503, webhook_relay.NO_LEADER)
        try:
            status = await webhook_relay.send(leader, header=header, body=body)
        except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError) as exc:
            log.warning("could not relay a webhook to the leader at %s: %s", leader, type(exc).__name__)
            return self._count(502, webhook_relay.RELAY_FAILED)
        if 200 <= status < 300:
            return self._count(status, webhook_relay.RELAYED)
        # the leader refused what we accepted (its rate limit, a key rotated in between): say so
        return self._count(status if status in _REASONS else 502, webhook_relay.RELAY_FAILED)

    def _verify(self, source: str, header: str | None, body: bytes | None) -> tuple[int, str] | sig.Change:
        """The change a request proves, or its refusal (already counted)."""
        admit = self._admission.admit(source, None if body is None else len(body))
        if admit is webhook_admission.Admit.REFUSE:
            return self._count(429, sig.RATE_LIMITED)
        if body is None:
            return self._count(413, sig.TOO_LARGE)
        if admit is webhook_admission.Admit.VERIFY_OVER_RATE:
            metrics.WEBHOOK_OVER_RATE_VERIFIED.inc()
        result, change = sig.verify(
            header,
            body,
            keys=self._keys.keys(),
            now_ms=self._now_ms(),
            window_seconds=self._settings.webhook_replay_window_seconds,
        )
        if result != sig.OK or change is None:
            status = 202 if result == sig.IGNORED else (503 if result == sig.NO_KEY else 401)
            return self._count(status, result)
        return change

    @staticmethod
    def _count(status: int, result: str) -> tuple[int, str]:
        metrics.WEBHOOK_REQUESTS.labels(result=result).inc()
        return status, result

    async def serve(self) -> None:
        """Listen until cancelled (from start-up to shutdown, leading or not)."""
        server = await asyncio.start_server(
            self._connection, host=self._settings.listen_address, port=self._settings.webhook_port
        )
        log.info("webhook receiver listening", extra={"port": self._settings.webhook_port})
        async with server:
            await server.serve_forever()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        peer_address = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        try:
            request = await asyncio.wait_for(self._request(peer_address, reader), _READ_TIMEOUT_SECONDS)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, OSError):
            request = self._count(400, sig.MALFORMED)
        if isinstance(request, _Read):  # answered outside the read timeout: a relay has its own
            status, result = await self.answer(
                request.source, request.header, request.body, relayed=request.relayed
            )
        else:
            status, result = request
        text = f'{{"result":"{result}"}}'
        writer.write(
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(text)}\r\nConnection: close\r\n\r\n{text}".encode()
        )
        try:
            await writer.drain()
            writer.close()
            await writer.wait_closed()
        except OSError:
            pass

    async def _request(self, peer: str, reader: asyncio.StreamReader) -> _Read | tuple[int, str]:
        """The request read, or the answer to a request that cannot be one of ours (counted).

        Its source is the TCP ``peer``, or the client a trusted proxy names (``webhook_sources``)."""
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > _MAX_HEAD_BYTES:
            raise ValueError("head too large")
        lines = head.decode("latin-1").split("\r\n")
        method = lines[0].split(" ", 1)[0]
        headers: dict[str, str] = {}
        forwarded: list[str] = []  # every line of the forwarding header, in order: one list
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
                if name.strip().lower() == self._client_header:
                    forwarded.append(value.strip())
        if method != "POST":
            return self._count(405, sig.MALFORMED)
        length = int(headers.get("content-length", "-1"))
        if length < 0:
            return self._count(411, sig.MALFORMED)
        relayed = webhook_relay.RELAYED_HEADER in headers
        source = webhook_sources.client_address(
            peer, forwarded, trusted=self._trusted, header=self._settings.webhook_client_address_header
        )
        if length > self._settings.webhook_max_body_bytes:
            return _Read(source=source, header=headers.get(sig.HEADER), body=None, relayed=relayed)
        body = await reader.readexactly(length)
        return _Read(source=source, header=headers.get(sig.HEADER), body=body, relayed=relayed)


@dataclass(frozen=True)
class _Read:
    source: str  # the bucket's key: the peer, or the client a trusted proxy names
    header: str | None
    body: bytes | None  # None: over the cap, not read
    relayed: bool


_REASONS = {
    202: "Accepted",
    400: "Bad Request",
    401: "Unauthorized",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Content Too Large",
    429: "Too Many Requests",
    502: "Bad Gateway",
    503: "Service Unavailable",
}

"""A standby's receiver hands a verified webhook to the leader, so no replica loses one.

Why: with ``replicaCount`` > 1 the chart's webhook Service routes to every replica, and only the
leader has scopes to nudge. The service does not retry a failed webhook, so a request that lands on
a standby must still reach the leader. Two designs were possible:

- the Service selects only the leader, through a label the leader sets on its own Pod: that needs
  ``pods patch`` in the release namespace (the Role cannot be limited to the operator's own Pod, whose
  name is not known at install time), so a compromised operator could relabel any Pod there and
  steer other Services' traffic; and a crashed leader keeps the label until someone removes it.
- **every replica listens; a standby verifies the request itself and relays it to the leader**
  (this module). No new permission: the leader advertises ``<pod IP>:<webhook port>`` in an
  annotation on the Lease it already writes (``kube.leases.Elector(annotations=...)``), and the
  standbys already read that Lease every retry period.

What a relay can and cannot do:

- only a request that verified at the standby (signature, replay window, rate limit, size) is
  relayed, so a forged flood that lands on a standby never reaches the leader and costs it nothing;
  the leader verifies the same bytes again (same key file) and answers as for any request;
- the destination comes only from the Lease, which only the operator's ServiceAccount (and cluster
  admins) can write; whoever can write it can already take the lead, so it grants nothing new. The
  body relayed is the service's signed body, which holds no secret value;
- one hop: a relayed request carries ``RELAYED_HEADER`` and is never relayed again (a replica that
  still sees itself or a stale holder as the leader answers 503 instead of looping). Setting that
  header from outside only stops a relay, it opens nothing;
- at the leader, relayed requests share the relaying standby's rate-limit bucket (its pod address is
  their source): only verified webhooks, so far fewer than a bucket holds in normal use.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from dataclasses import dataclass

from secretferry.service import webhook_signature as sig

RELAYED_HEADER = "x-secretferry-relayed"
# Results of ``secretferry_webhook_requests_total`` at a standby (the leader counts its own).
RELAYED = "relayed"
RELAY_FAILED = "relay_failed"
NO_LEADER = "no_leader"
# How long a relay may take: a leader on the same cluster network answers in milliseconds; the
# real server waits 15 s for a webhook (its WEBHOOK_TRIGGER_TIMEOUT), so 5 s leaves it room.
RELAY_TIMEOUT_SECONDS = 5.0
# The leader's answer head; ours is under 200 bytes.
_MAX_ANSWER_HEAD_BYTES = 4096


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def advertised(pod_ip: str, port: int) -> str | None:
    """The annotation value a leader writes, or None when it has no address to give."""
    if not pod_ip or not port:
        return None
    return str(Address(str(ipaddress.ip_address(pod_ip)), port))


def parse(value: str | None) -> Address | None:
    """An advertised address, or None if absent or not ``<IP>:<port>`` (never a host name: the
    value is read from the Lease, and an IP literal cannot be made to resolve elsewhere)."""
    if not value:
        return None
    host, sep, port_text = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    try:
        port = int(port_text)
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    if not sep or not 0 < port < 65536:
        return None
    return Address(str(ip), port)


async def send(address: Address, *, header: str | None, body: bytes) -> int:
    """POST the verified request, unchanged, to the leader; its HTTP status.

    Raises OSError, TimeoutError, ValueError or asyncio.IncompleteReadError when the leader cannot be
    reached or answers nonsense."""
    async with asyncio.timeout(RELAY_TIMEOUT_SECONDS):
        reader, writer = await asyncio.open_connection(address.host, address.port)
        try:
            signature = f"{sig.HEADER}: {header}\r\n" if header is not None else ""
            writer.write(
                f"POST /webhook HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n"
                f"{signature}{RELAYED_HEADER}: 1\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode("latin-1")
                + body
            )
            await writer.drain()
            status_line = await reader.readuntil(b"\r\n")
            if len(status_line) > _MAX_ANSWER_HEAD_BYTES:
                raise ValueError("answer too long")
            parts = status_line.decode("latin-1").split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/"):
                raise ValueError("not an HTTP answer")
            return int(parts[1])
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

"""The service's signed webhooks: the signature rule and the payload, parsed without trusting it.

The real server (``triggerWebhookRequest`` in its webhook service) sends, for a project webhook
with a secret key::

    payload = {...data, "timestamp": Date.now()}            # milliseconds since the epoch
    body    = JSON.stringify(payload)                       # what goes on the wire
    x-infisical-signature: t=<payload.timestamp>;<hex(HMAC-SHA256(key=secretKey, msg=body))>

So the signed message is the raw body itself (the timestamp is inside it as well as in the
header), keyed with the webhook's secret key as UTF-8 text, hex-encoded. We verify over the raw
bytes received, never over a re-serialization. The data of a ``secrets.modified`` webhook is
``{"event", "project": {"workspaceId", "projectId", "projectName", "environment", "secretPath"}}``.

Why the header's timestamp and not the body's: both are signed (the header's only by the replay
check below, which refuses a header whose ``t`` differs from the body's), and the header's is read
before the body is parsed. A verified body is still only a hint of *where* something changed: the
receiver re-lists from the service; nothing in the body is written anywhere.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json

HEADER = "x-infisical-signature"
EVENT_SECRETS_MODIFIED = "secrets.modified"

# Results, as the metric's ``result`` label (bounded).
OK = "accepted"
MISSING = "unsigned"
MALFORMED = "malformed"
FORGED = "forged"
STALE = "replayed"
TOO_LARGE = "too_large"
RATE_LIMITED = "rate_limited"
IGNORED = "ignored"
NO_KEY = "no_key"


@dataclasses.dataclass(frozen=True, slots=True)
class Change:
    """Where a verified webhook says something changed (the only thing we take from it)."""

    workspace_id: str
    environment: str
    secret_path: str


def sign(body: bytes, key: str) -> str:
    """hex(HMAC-SHA256(key, body)): the real server's rule (also used by the dev server)."""
    return hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def header_value(body: bytes, key: str, timestamp_ms: int) -> str:
    return f"t={timestamp_ms};{sign(body, key)}"


def parse_header(value: str | None) -> tuple[int, str] | None:
    """``t=<ms>;<hex>`` → (ms, hex); anything else → None."""
    if not value:
        return None
    stamp, sep, digest = value.strip().partition(";")
    if not sep or not stamp.startswith("t=") or len(digest) != 64:  # sha256: 64 hex digits
        return None
    try:
        int(digest, 16)
        return int(stamp[2:]), digest.lower()
    except ValueError:
        return None


def verify(
    header: str | None,
    body: bytes,
    *,
    keys: tuple[str, ...],
    now_ms: int,
    window_seconds: float,
) -> tuple[str, Change | None]:
    """(result, change): ``OK`` with the change only when signed by one of ``keys`` and fresh.

    Several keys so that a rotation can overlap (old and new both accepted until the old is
    removed). The comparison is constant-time (``hmac.compare_digest``) against every key, so the
    time taken does not tell an attacker how many leading digits matched."""
    if not keys:
        return NO_KEY, None
    parsed = parse_header(header)
    if header is None or not header.strip():
        return MISSING, None
    if parsed is None:
        return MALFORMED, None
    stamp, digest = parsed
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(sign(body, key), digest)
    if not matched:
        return FORGED, None
    if abs(now_ms - stamp) > window_seconds * 1000:
        return STALE, None
    try:
        doc = json.loads(body)
    except ValueError:
        return MALFORMED, None
    change = _change(doc, stamp)
    if change is None:
        return (
            IGNORED if isinstance(doc, dict) and doc.get("event") != EVENT_SECRETS_MODIFIED else MALFORMED
        ), None
    return OK, change


def _change(doc: object, stamp: int) -> Change | None:
    if not isinstance(doc, dict) or doc.get("event") != EVENT_SECRETS_MODIFIED:
        return None
    # The body's timestamp is signed; the header's must be the same, or the header was replaced.
    if doc.get("timestamp") != stamp:
        return None
    project = doc.get("project")
    if not isinstance(project, dict):
        return None
    fields = (project.get("workspaceId"), project.get("environment"), project.get("secretPath"))
    if not all(isinstance(f, str) and f and len(f) <= 1024 for f in fields):  # a path, not a novel
        return None
    workspace, environment, path = (str(f) for f in fields)
    return Change(workspace_id=workspace, environment=environment, secret_path=path)

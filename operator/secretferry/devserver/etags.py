"""JSON answers with an ETag and conditional GET, as the real server's global ``@fastify/etag``.

The plugin is registered for the whole real app, so every read (v3 as well as v4) carries an ETag
and answers ``If-None-Match`` with 304 and no body. (``routes_secrets`` has its own copy for the
v4 list; this one serves the routes added beside it.)
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from fastapi import Request, Response

ETAG_HEX_CHARS = 32  # 128 bits of SHA-256: unique enough for a cache validator, short on the wire


def etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:ETAG_HEX_CHARS] + '"'


def matches(header: str | None, tag: str) -> bool:
    """Whether ``If-None-Match`` names ``tag`` (weak validators compare equal, ``*`` matches all)."""
    if not header:
        return False
    candidates = [c.strip().removeprefix("W/") for c in header.split(",")]
    return "*" in candidates or tag in candidates


def json_response(request: Request, payload: dict[str, Any]) -> Response:
    body = json.dumps(payload, separators=(",", ":")).encode()
    tag = etag(body)
    if matches(request.headers.get("if-none-match"), tag):
        return Response(status_code=304, headers={"ETag": tag})
    return Response(body, media_type="application/json", headers={"ETag": tag})

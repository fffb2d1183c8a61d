"""Fault injection as pure ASGI middleware (streaming responses pass through untouched).

Document (YAML or JSON, at start with ``--faults`` or at runtime with ``POST /_admin/faults``)::

    routes:
      - match: "GET /api/v4/secrets"   # "[METHOD ]path-glob"; "*" = every API route
        latencyMs: 250                  # added before the request is handled
        status: 503                     # answer this error instead ...
        rate: 0.5                       # ... with this probability (default 1)
        retryAfter: 30                  # with status 429: the retry-after header (seconds)
        malformed: json                 # or "content-type": 200 with a broken body
        times: 3                        # only the next N matching requests (default: forever)
    streams:
      dropAfterSeconds: 5               # close every event stream after N seconds
      silent: true                      # stop heartbeats but keep streams open
    jwtClockSkewSeconds: 3600           # OIDC/JWT logins judge exp/nbf this much later (a real
                                        # ServiceAccount token lives 10 minutes at least)

``/_admin`` is never faulted so tests can always repair what they broke.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import random
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from secretferry.devserver.errors import error_body

_MESSAGES = {429: "Rate limit exceeded", 500: "Something went wrong", 503: "Service unavailable"}


@dataclass
class RouteFault:
    method: str | None
    path_glob: str
    latency_ms: float = 0.0
    status: int | None = None
    rate: float = 1.0
    retry_after: int | None = None
    malformed: str | None = None
    times: int | None = None

    @classmethod
    def parse(cls, doc: dict[str, Any]) -> RouteFault:
        match = str(doc.get("match", "*")).strip()
        method, _, path = match.partition(" ") if " " in match else ("", "", match)
        return cls(
            method=method.upper() or None,
            path_glob=path.strip() or "*",
            latency_ms=float(doc.get("latencyMs", 0)),
            status=int(doc["status"]) if doc.get("status") is not None else None,
            rate=float(doc.get("rate", 1.0)),
            retry_after=int(doc["retryAfter"]) if doc.get("retryAfter") is not None else None,
            malformed=doc.get("malformed"),
            times=int(doc["times"]) if doc.get("times") is not None else None,
        )

    def matches(self, method: str, path: str) -> bool:
        if self.times is not None and self.times <= 0:
            return False
        if self.method is not None and self.method != method:
            return False
        return fnmatch.fnmatchcase(path, self.path_glob)


@dataclass
class FaultSet:
    routes: list[RouteFault] = field(default_factory=list)
    drop_streams_after_seconds: float | None = None
    silent_streams: bool = False
    jwt_clock_skew_seconds: float = 0.0
    document: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, doc: dict[str, Any] | None) -> FaultSet:
        doc = doc or {}
        streams = doc.get("streams") or {}
        drop = streams.get("dropAfterSeconds")
        return cls(
            routes=[RouteFault.parse(item) for item in doc.get("routes") or []],
            drop_streams_after_seconds=float(drop) if drop is not None else None,
            silent_streams=bool(streams.get("silent", False)),
            jwt_clock_skew_seconds=float(doc.get("jwtClockSkewSeconds") or 0.0),
            document=doc,
        )


class Faults:
    """The current fault set, replaceable at runtime."""

    def __init__(self, doc: dict[str, Any] | None = None, *, rng: random.Random | None = None) -> None:
        self.current = FaultSet.parse(doc)
        self.rng = rng or random.Random()

    def set(self, doc: dict[str, Any] | None) -> None:
        self.current = FaultSet.parse(doc)

    def clear(self) -> None:
        self.current = FaultSet()


class FaultMiddleware:
    def __init__(self, app: ASGIApp, faults: Faults) -> None:
        self.app = app
        self.faults = faults

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path.startswith("/_admin"):
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        for fault in self.faults.current.routes:
            if not fault.matches(method, path):
                continue
            if fault.times is not None:
                fault.times -= 1
            if fault.latency_ms > 0:
                await asyncio.sleep(fault.latency_ms / 1000)
            if fault.malformed is not None:
                await _malformed(send, fault.malformed)
                return
            if fault.status is not None and self.faults.rng.random() < fault.rate:
                await _error(send, fault)
                return
        await self.app(scope, receive, send)


async def _error(send: Send, fault: RouteFault) -> None:
    status = fault.status or 500
    headers = [(b"content-type", b"application/json")]
    if status == 429:
        headers.append(
            (b"retry-after", str(fault.retry_after if fault.retry_after is not None else 60).encode())
        )
    name = {429: "RateLimitExceeded", 500: "InternalServerError"}.get(status, "InjectedFault")
    body = json.dumps(error_body(status, name, _MESSAGES.get(status, "Injected fault"))).encode()
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _malformed(send: Send, kind: str) -> None:
    if kind == "content-type":
        headers, body = [(b"content-type", b"text/html")], b"<html><body>gateway says hello</body></html>"
    else:
        headers, body = [(b"content-type", b"application/json")], b'{"secrets": [{"secretKey": '
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})

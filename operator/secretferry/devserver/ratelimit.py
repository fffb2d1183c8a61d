"""Rate limits as a self-hosted server of 2024-10 enforces them in production mode.

Why: a real self-hosted backend (Fastify with ``@fastify/rate-limit``, Redis store) answered the
operator 429 at 40 list calls a minute; a dev server without limits hid that (issue 21). This
module reproduces what that server does, so tests and ``bench/bench_ratelimit.py`` meet the same
wall:

- **per route and client IP**: ``@fastify/rate-limit`` gives every route with its own rate-limit
  config a child store whose key is ``<method><route url>-<ip>``, so ``GET /api/v3/secrets/raw``
  and ``GET /api/v3/secrets/raw/{secretName}`` each count 40 a minute for one IP;
- **the real numbers** (the backend's ``rateLimiter.ts`` and its community-edition defaults):
  secret routes (``secretsLimit``, every method of the v3/v4 secret routes, folder and import
  writes) 40; other reads (``readLimit``) 60; other writes (``writeLimit``) 200; logins, renew
  and revoke 200 (that generation's auth routes use ``writeLimit``; newer servers moved logins
  to ``authRateLimit``, 60); any other route the plugin's global 600;
- **fixed window per key**: the window (60 s) starts at the first request of a key and every
  request in it counts, refused ones too (``continueExceeding`` off): a client that keeps
  hammering does not extend its own wait, and one that waits for ``x-ratelimit-reset`` is served;
- **headers**: every answer of a limited route carries ``x-ratelimit-limit``,
  ``x-ratelimit-remaining`` and ``x-ratelimit-reset`` (whole seconds until the window ends,
  rounded up); a 429 adds ``retry-after`` (the same seconds) and answers that generation's body,
  without ``reqId``.

Not limited: ``/_admin`` (tests must always be able to repair), ``/api/status`` and
``/healthz`` (the server's allow list). An unknown route is Fastify's 404 before any limit.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# @fastify/rate-limit's ``timeWindow`` on every limit of that backend: one minute.
WINDOW_SECONDS: Final = 60.0

SECRETS: Final = "secrets"
READ: Final = "read"
WRITE: Final = "write"
AUTH: Final = "auth"
GLOBAL: Final = "global"

# The community-edition defaults of the 2024-10 backend (requests per window per route and IP).
LIMITS: Final[dict[str, int]] = {SECRETS: 40, READ: 60, WRITE: 200, AUTH: 200, GLOBAL: 600}

# The body that generation answers (no ``reqId``; the message names a minute whatever is left).
BODY: Final = json.dumps(
    {
        "statusCode": 429,
        "message": "Rate limit exceeded. Please try again in 1 minute",
        "error": "RateLimitExceeded",
    }
).encode()

_EXEMPT_PREFIXES: Final = ("/_admin", "/api/status", "/healthz")
_SECRET_ROUTES: Final = ("/api/v3/secrets", "/api/v4/secrets")
# Folder and import writes share the secrets limit on that backend ("secrets, folders, imports").
_SECRET_WRITE_ROUTES: Final = ("/api/v2/folders", "/api/v2/secret-imports", "/api/v1/folders")


def route_class(method: str, template: str) -> str:
    """Which limit a route has: ``secrets``, ``read``, ``write``, ``auth`` or ``global``."""
    if template.startswith(_SECRET_ROUTES):
        return SECRETS
    if template.startswith("/api/v1/auth/") and method == "POST":
        return AUTH
    if method in ("GET", "HEAD"):
        return READ if template.startswith("/api/") else GLOBAL
    if template.startswith(_SECRET_WRITE_ROUTES):
        return SECRETS
    return WRITE if template.startswith("/api/") else GLOBAL


@dataclass
class _Window:
    started_at: float
    count: int


@dataclass(frozen=True)
class Decision:
    """One counted request: allowed or not, and the header values to send."""

    allowed: bool
    limit: int
    remaining: int
    reset_seconds: int

    def headers(self) -> list[tuple[bytes, bytes]]:
        out = [
            (b"x-ratelimit-limit", str(self.limit).encode()),
            (b"x-ratelimit-remaining", str(self.remaining).encode()),
            (b"x-ratelimit-reset", str(self.reset_seconds).encode()),
        ]
        if not self.allowed:
            out.append((b"retry-after", str(self.reset_seconds).encode()))
        return out


class RateLimiter:
    """Fixed-window counters per (client IP, method, route template); ``clock`` in seconds."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        limits: dict[str, int] | None = None,
        window_seconds: float = WINDOW_SECONDS,
    ) -> None:
        self._clock = clock
        self.limits = dict(LIMITS if limits is None else limits)
        self.window_seconds = window_seconds
        self._windows: dict[tuple[str, str, str], _Window] = {}
        self.refused = 0
        """429s answered so far (benchmarks read it through ``/_admin/stats``)."""

    def hit(self, client_ip: str, method: str, template: str) -> Decision:
        """Count one request and decide it (``@fastify/rate-limit``'s local/Redis store semantics)."""
        now = self._clock()
        limit = self.limits[route_class(method, template)]
        key = (client_ip, method, template)
        window = self._windows.get(key)
        if window is None or window.started_at + self.window_seconds <= now:
            if len(self._windows) > 10_000:  # a long-running server: drop windows that are over
                self._prune(now)
            window = self._windows[key] = _Window(started_at=now, count=0)
        window.count += 1
        ttl = window.started_at + self.window_seconds - now
        allowed = window.count <= limit
        if not allowed:
            self.refused += 1
        # Whole seconds, rounded up, as the plugin's ``Math.ceil(ttl / 1000)``.
        return Decision(allowed, limit, max(0, limit - window.count), max(0, math.ceil(ttl - 1e-9)))

    def _prune(self, now: float) -> None:
        over = [key for key, w in self._windows.items() if w.started_at + self.window_seconds <= now]
        for key in over:
            del self._windows[key]


def _leaves(routes: Sequence[BaseRoute]) -> list[BaseRoute]:
    """Every route with a path template, looking through included routers (FastAPI wraps each
    ``include_router`` in a router of its own, whose match tells no template)."""
    out: list[BaseRoute] = []
    for route in routes:
        inner = getattr(getattr(route, "original_router", None), "routes", None)
        if inner is None and not hasattr(route, "path"):
            inner = getattr(route, "routes", None)
        if inner is not None:
            out.extend(_leaves(inner))
        elif hasattr(route, "path"):
            out.append(route)
    return out


def _route(routes: Sequence[BaseRoute], scope: Scope) -> BaseRoute | None:
    for route in routes:
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return route
    return None


class RateLimitMiddleware:
    """Pure ASGI (streams pass through): count, refuse with 429, or add the headers to the answer."""

    def __init__(self, app: ASGIApp, limiter: RateLimiter, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.limiter = limiter
        self._routes = routes
        self._leaves: list[BaseRoute] | None = None  # flattened at the first request: all included

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path.startswith(_EXEMPT_PREFIXES):
            await self.app(scope, receive, send)
            return
        if self._leaves is None:
            self._leaves = _leaves(self._routes)
        route = _route(self._leaves, scope)
        template = getattr(route, "path", None)
        if route is None or template is None:  # Fastify's 404 for an unknown route: no limit
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        decision = self.limiter.hit(client[0] if client else "unknown", scope["method"], template)
        headers = decision.headers()
        if not decision.allowed:
            scope["route"] = route  # so that ``stats`` counts the 429 under the route's template
            start = [(b"content-type", b"application/json; charset=utf-8"), *headers]
            await send({"type": "http.response.start", "status": 429, "headers": start})
            await send({"type": "http.response.body", "body": BODY})
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *headers]}
            await send(message)

        await self.app(scope, receive, with_headers)

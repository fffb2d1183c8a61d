"""Request counters for tests and benchmarks (``GET /_admin/stats``).

Counted at response start from the matched route template, so ``GET /api/v4/secrets`` is one key
however the query varies, and streams count when they open, not when they end.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

LIST_SECRETS = "GET /api/v4/secrets"
LOGIN_ROUTES = (
    "POST /api/v1/auth/universal-auth/login",
    "POST /api/v1/auth/kubernetes-auth/login",
    "POST /api/v1/auth/oidc-auth/login",
    "POST /api/v1/auth/jwt-auth/login",
)
SUBSCRIBE = "POST /api/v1/events/subscribe/project-events"


class Stats:
    def __init__(self) -> None:
        self.routes: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.counters: Counter[str] = Counter()
        self.scopes: Counter[str] = Counter()  # list calls by "environment:secretPath"

    def reset(self) -> None:
        self.routes.clear()
        self.statuses.clear()
        self.counters.clear()
        self.scopes.clear()

    def snapshot(self, *, open_streams: int, events_delivered: int) -> dict[str, Any]:
        return {
            "routes": dict(self.routes),
            "statuses": dict(self.statuses),
            "listSecrets": self.routes[LIST_SECRETS],
            "listSecretsByScope": dict(self.scopes),
            "logins": sum(self.routes[r] for r in LOGIN_ROUTES),
            "loginFailures": self.counters["loginFailures"],
            "reusedJwts": self.counters["reusedJwts"],
            "streamsOpened": self.counters["streamsOpened"],
            "openStreams": open_streams,
            "eventsDelivered": events_delivered,
        }


class StatsMiddleware:
    def __init__(self, app: ASGIApp, stats: Stats) -> None:
        self.app = app
        self.stats = stats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path", "").startswith("/_admin"):
            await self.app(scope, receive, send)
            return

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                route = scope.get("route")
                template = getattr(route, "path", None) or scope.get("path", "?")
                key = f"{scope['method']} {template}"
                self.stats.routes[key] += 1
                self.stats.statuses[f"{key} {message['status']}"] += 1
            await send(message)

        await self.app(scope, receive, counting_send)

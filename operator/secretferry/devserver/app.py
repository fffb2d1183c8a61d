"""``create_app(config)``: wire state, middleware, error handlers and routers."""

from __future__ import annotations

import logging

from fastapi import FastAPI

from secretferry import __version__
from secretferry.devserver import (
    errors,
    notfound,
    ratelimit,
    routes_admin,
    routes_auth,
    routes_events,
    routes_folder_list,
    routes_folders,
    routes_identities,
    routes_leases,
    routes_oidc_jwt,
    routes_privileges,
    routes_secrets,
    routes_status,
    routes_v3,
    routes_webhooks,
    seed,
)
from secretferry.devserver.config import DevServerConfig
from secretferry.devserver.faults import FaultMiddleware
from secretferry.devserver.state import DevState
from secretferry.devserver.stats import StatsMiddleware

log = logging.getLogger(__name__)
V4_SECRETS = "/api/v4/secrets"  # everything below it goes with --no-v4
EVENTS = "/api/v1/events"  # the subscribe route, absent before the event stream existed
PRIVILEGES_V2 = "/api/v2/identity-project-additional-privilege"  # absent before the v2 routes
SLUG_ROUTES = {"v1": "/api/v1/projects/slug", "v2": "/api/v2/workspace"}  # one of them is absent


def absent_prefixes(config: DevServerConfig) -> tuple[str, ...]:
    """Route prefixes this server generation does not have (they answer Fastify's 404)."""
    absent = [prefix for slug_route, prefix in SLUG_ROUTES.items() if slug_route != config.slug_route]
    if not config.v4_secrets:
        absent.append(V4_SECRETS)
    if not config.events_route:
        absent.append(EVENTS)
    if not config.privileges_v2:
        absent.append(PRIVILEGES_V2)
    return tuple(absent)


def create_app(config: DevServerConfig | None = None) -> FastAPI:
    """A ready app; the seed is applied here (not at startup) so in-process tests need no lifespan."""
    config = config or DevServerConfig()
    state = DevState.build(config)
    if state.db.fresh:
        seed.apply(state, config.seed or {})
        state.db.mark_seeded()
        log.info("seeded a fresh database at %s", config.data_path)
    # FastAPI's own docs and OpenAPI routes would be public; ``routes_admin`` serves both, locked.
    app = FastAPI(
        title="secretferry dev server",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.dev = state
    errors.install(app)
    absent = absent_prefixes(config)
    for module in (
        routes_secrets,
        routes_v3,
        routes_folders,
        routes_folder_list,
        routes_privileges,
        routes_identities,
        routes_leases,
        routes_auth,
        routes_oidc_jwt,
        routes_events,
        routes_status,
        routes_webhooks,
        routes_admin,
    ):
        app.include_router(notfound.without(module.router, *absent))
    app.include_router(routes_admin.health_router)
    # Order matters: stats sees faulted and rate-limited requests too (added last = outermost).
    if state.limiter is not None:
        app.add_middleware(ratelimit.RateLimitMiddleware, limiter=state.limiter, routes=app.router.routes)
    app.add_middleware(FaultMiddleware, faults=state.faults)
    app.add_middleware(StatsMiddleware, stats=state.stats)
    return app

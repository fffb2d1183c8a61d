"""Settings of one dev-server instance.

Kept as a plain dataclass so that ``create_app`` can be used in-process by tests (with an injected
clock) and from the command line alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# Where a project is found by its slug: ``v1`` = ``GET /api/v1/projects/slug/{slug}`` (newest);
# ``v2`` = ``GET /api/v2/workspace/{slug}``, the project unwrapped (self-hosted 2024-10).
SlugRoute = Literal["v1", "v2"]
# Shapes of the event stream: the three the real service shipped, and docs/service-api.md's own.
EventGeneration = Literal["documented", "old", "middle", "newest"]


@dataclass
class DevServerConfig:
    """Everything that changes how the server behaves; every field has a working default."""

    data_path: Path = Path(":memory:")
    """SQLite file; ``:memory:`` keeps nothing across restarts (unit tests)."""
    seed: dict[str, Any] | None = None
    """Seed document applied only when the database is fresh."""
    event_generation: EventGeneration = "newest"
    """Which generation of the event stream to speak byte for byte (``generations``): ``newest``
    (today's real server), ``middle``, ``old``, or ``documented`` (docs/service-api.md)."""
    token_error_status: int = 401
    """Status for an expired/invalid token: 401, or 403 with ``error: TokenError`` (newer servers)."""
    heartbeat_seconds: float = 15.0
    """Interval of the heartbeat on open streams (the real server's 15 s)."""
    recheck_seconds: float = 60.0
    """Interval of the token/permission re-check on open streams (the real server's 60 s)."""
    events_plan: bool = True
    """False: the plan lacks event subscriptions, subscribing answers 400."""
    stream_cap: int = 5
    """Open streams allowed per (project, identity); the next one gets 429."""
    v4_secrets: bool = True
    """False (``--no-v4``): every ``/api/v4/secrets`` route is absent and answers like any unknown
    route of the real server (Fastify's 404), as on self-hosted servers older than the v4 API."""
    events_route: bool = True
    """False: ``/api/v1/events/...`` is absent (Fastify's 404), as on servers older than the stream."""
    privileges_v2: bool = True
    """False: ``/api/v2/identity-project-additional-privilege/...`` is absent (Fastify's 404), as on
    servers from before the v2 privilege routes; privileges are then changed through v1 only. No
    profile sets it (when the v2 routes shipped is not known here); tests do."""
    slug_route: SlugRoute = "v1"
    """Which route finds a project by slug (``SlugRoute``); the other one is absent."""
    unknown_environment_empty: bool = False
    """True: listing an unknown environment answers 200 with empty lists (self-hosted 2024-10)
    instead of the service's 404."""
    v3_metadata: bool = True
    """False: the v3 list neither carries ``secretMetadata`` nor knows ``metadataFilter`` (zod strips
    the unknown field: it is neither validated nor applied), as on self-hosted 2024-10."""
    admin_token: str | None = None
    """Header ``X-Admin-Token`` value ``/_admin`` requires; None: generate one at start (see
    ``admin_token``), since the admin API is never open."""
    admin_token_file: Path | None = None
    """Where a generated admin token is written (mode 0600); None: ``<data_path>.admin-token``."""
    faults: dict[str, Any] | None = None
    """Initial fault-injection document (see ``faults.FaultSet``)."""
    clock: Callable[[], float] = field(default=time.time)
    """Wall clock in epoch seconds; injected by tests to expire tokens and lockouts."""
    # The auth side of the 2024-10 self-hosted release (profiles.py; docs/service-contract.md).
    tokenreview_audiences: bool = True
    """False: the TokenReview goes without ``spec.audiences`` even when an allowed audience is set,
    so the apiserver checks the token against its own audiences (the 2024-10 release)."""
    tokenreview_verify_without_ca: bool = True
    """False: without a configured CA the apiserver's certificate is not verified at all."""
    require_token_reviewer_jwt: bool = False
    """True: attaching Kubernetes auth (the seed) needs ``tokenReviewerJwt``."""
    unknown_client_id_status: int = 401
    """Status of a universal-auth login with an unknown client id: 401, or 404 ``NotFound``."""
    validation_status: int = 422
    """Status of a request that fails validation (``ValidationFailure``): 422, or 401 on old servers."""
    error_req_id: bool = True
    """False: error bodies carry no ``reqId`` (the 2024-10 release)."""
    rate_limits: bool = False
    """True: limit requests per client IP and route as a self-hosted server in production mode
    (``ratelimit``: 40 secret reads, 60 other reads, 200 writes and logins a minute, 429 with
    ``retry-after``); on in the ``selfhosted-2024-10`` profile, ``--rate-limits off`` for
    benchmarks that say so."""

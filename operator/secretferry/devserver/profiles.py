"""Server profiles: named bundles of behaviour that match one real server generation.

A profile is a set of ``DevServerConfig`` field values. ``newest`` is today's hosted service (every
field at its default). ``selfhosted-2024-10`` is the self-hosted backend as released in 2024-10
(docs/service-contract.md, "Server generations"): the last generation before the v4 list and the
event stream. Whoever tests against "that server" picks the profile, not a flag per difference, so
that no difference is forgotten; explicit flags given beside a profile still win.
"""

from __future__ import annotations

from typing import Any, Final, Literal

Profile = Literal["newest", "selfhosted-2024-10"]

PROFILES: Final[dict[str, dict[str, Any]]] = {
    "newest": {},
    "selfhosted-2024-10": {
        # No /api/v4/secrets routes: they came after this release.
        "v4_secrets": False,
        # Auth: TokenReview without audiences (nor verification without a CA), a reviewer jwt
        # required, 404 for an unknown client id, validation as 401, no reqId in error bodies.
        "tokenreview_audiences": False,
        "tokenreview_verify_without_ca": False,
        "require_token_reviewer_jwt": True,
        "unknown_client_id_status": 404,
        "validation_status": 401,
        "error_req_id": False,
        # Listing/route differences seen on that server (issue 21, items 2, 3, 7).
        "events_route": False,  # the stream came later: subscribe is an unknown route
        "slug_route": "v2",  # /api/v1/projects/slug/... absent; /api/v2/workspace/{slug} bare
        "unknown_environment_empty": True,  # 200 {"secrets":[],"imports":[]}, not 404
        "v3_metadata": False,  # no secretMetadata on v3; metadataFilter stripped (fail-open)
        # Production mode limits per client IP and route (devserver/ratelimit.py).
        "rate_limits": True,
    },
}


def overrides(profile: str) -> dict[str, Any]:
    """The config fields ``profile`` sets (a copy); KeyError names an unknown profile."""
    return dict(PROFILES[profile])

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
        # Production mode limits per client IP and route (devserver/ratelimit.py).
        "rate_limits": True,
    },
}


def overrides(profile: str) -> dict[str, Any]:
    """The config fields ``profile`` sets (a copy); KeyError names an unknown profile."""
    return dict(PROFILES[profile])

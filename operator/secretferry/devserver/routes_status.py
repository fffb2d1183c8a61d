"""``GET /api/status``: the real server's public liveness route.

Infisical's own Kubernetes operator probes it (expecting 200) before it trusts a host, and so does
ours while a host is not answering. On the real server it is registered outside the versioned
routers with no auth hook, so it needs no token; the route-guard test lists it as public.
The fields are the real response's; the flags describe this dev server (no SMTP, no secret
scanning, audit logs not stored) rather than echoing a real deployment.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from secretferry.devserver.auth import StateDep
from secretferry.devserver.timeutil import iso

router = APIRouter()


@router.get("/api/status")
async def status(state: StateDep) -> dict[str, Any]:
    # samlDefaultOrgSlug is left out, as the real server does when none is configured.
    return {
        "date": iso(state.now()),
        "message": "Ok",
        "emailConfigured": False,
        "inviteOnlySignup": False,
        "redisConfigured": True,
        "secretScanningConfigured": False,
        "auditLogStorageDisabled": True,
    }

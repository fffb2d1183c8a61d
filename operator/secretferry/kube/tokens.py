"""ServiceAccount tokens minted with the TokenRequest API, one per login.

The operator never stores or replays a token: each login asks for a fresh, audience-bound,
short-lived one for the identity's ServiceAccount, exactly what the service then verifies with a
TokenReview.
"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import quote

from secretferry.kube import errors
from secretferry.kube.client import Kube

# The apiserver's floor for expirationSeconds (TokenRequest validation); shorter is rejected.
MIN_EXPIRATION_SECONDS = 600


async def request_token(
    kube: Kube,
    *,
    namespace: str,
    service_account: str,
    audiences: list[str],
    expiration_seconds: int,
) -> tuple[str, datetime]:
    """A fresh token for ``namespace/service_account`` and its expiry (timezone-aware UTC).

    The expiry is the apiserver's, which may differ from the one asked for.
    """
    ns, sa = quote(namespace, safe=""), quote(service_account, safe="")
    path = f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token"
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "audiences": list(audiences),
            "expirationSeconds": max(expiration_seconds, MIN_EXPIRATION_SECONDS),
        },
    }
    answer = await kube.request("POST", path, body=body)
    status = answer.get("status") or {}
    token, expires = status.get("token"), status.get("expirationTimestamp")
    if not isinstance(token, str) or not token or not isinstance(expires, str):
        raise errors.KubeError(
            200, "BadResponse", f"TokenRequest for {namespace}/{service_account} returned no token"
        )
    return token, datetime.fromisoformat(expires.replace("Z", "+00:00"))

"""The apiserver's own token audiences (``--api-audiences``), learnt from the cluster, never guessed.

Why: a ServiceAccount token is valid against the Kubernetes API whenever one of its audiences is
one of these. A namespaced identity whose ``audiences`` names one (e.g.
``https://kubernetes.default.svc.cluster.local``, the apiserver's default) would have the operator
mint an apiserver token and hand it to the service. ``reconcile.tenancy`` refuses that before any
token is minted for the identity; it needs these audiences to compare with.

How, without minting anything for a tenant:

1. In a pod, the operator's own ServiceAccount token (mounted by the kubelet, requested without
   an audience) carries exactly the apiserver's audiences in its ``aud`` claim: read, no call.
   The same holds outside a pod when the operator authenticates with a ServiceAccount token
   (a kubeconfig with the chart ServiceAccount's token): such a token is read only when it is a
   Kubernetes ServiceAccount JWT (its ``kubernetes.io`` claim), since an OIDC user's token carries
   its client id in ``aud``, not the apiserver's audiences.
2. Otherwise (a client certificate, or a legacy token without ``aud``), one TokenRequest without
   audiences for the ``default`` ServiceAccount of the operator's own namespace: the apiserver
   fills in its audiences in the answer's ``spec.audiences``. The token is dropped unused (it is
   the operator's own namespace's, never a tenant's, and never leaves this function).

Either way the result is the apiserver's view at that moment; callers cache it (``--api-audiences``
changes only with an apiserver restart).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

from secretferry.kube import errors, incluster
from secretferry.kube.client import Kube

PROBE_SERVICE_ACCOUNT = "default"  # the serviceaccount controller creates it in every namespace
# The TokenRequest floor (10 minutes); the probe token is dropped at once anyway.
_PROBE_EXPIRATION_SECONDS = 600


def from_jwt(token: str) -> frozenset[str]:
    """The ``aud`` claim of a JWT (its signature unchecked: only our own mounted token is read)."""
    parts = token.strip().split(".")
    if len(parts) != 3:
        return frozenset()
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except ValueError:
        return frozenset()
    aud = claims.get("aud") if isinstance(claims, dict) else None
    if isinstance(aud, str):
        aud = [aud]
    return frozenset(a for a in aud or () if isinstance(a, str) and a)


def from_service_account_jwt(token: str | None) -> frozenset[str]:
    """``from_jwt`` for a bound ServiceAccount token only (it carries a ``kubernetes.io`` claim);
    empty for anything else, e.g. an OIDC id token, whose ``aud`` is its client id."""
    if not token:
        return frozenset()
    parts = token.strip().split(".")
    if len(parts) != 3:
        return frozenset()
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return frozenset()
    if not isinstance(claims, dict) or not isinstance(claims.get("kubernetes.io"), dict):
        return frozenset()
    return from_jwt(token)


def from_own_token(path: Path | None = None) -> frozenset[str]:
    """The audiences of the pod's mounted ServiceAccount token; empty outside a pod."""
    path = path or incluster.SERVICE_ACCOUNT_DIR / incluster.TOKEN_FILE
    try:
        return from_jwt(path.read_text())
    except OSError:
        return frozenset()


async def from_token_request(kube: Kube, *, namespace: str) -> frozenset[str]:
    """The audiences the apiserver gives a TokenRequest that names none (its ``--api-audiences``)."""
    ns, sa = quote(namespace, safe=""), quote(PROBE_SERVICE_ACCOUNT, safe="")
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": _PROBE_EXPIRATION_SECONDS},
    }
    answer = await kube.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token", body=body)
    audiences = (answer.get("spec") or {}).get("audiences")
    found = frozenset(a for a in audiences or () if isinstance(a, str) and a)
    if not found:
        raise errors.KubeError(200, "BadResponse", "a TokenRequest without audiences was given none")
    return found


async def learn(kube: Kube, *, namespace: str, own_token: Path | None = None) -> frozenset[str]:
    """The apiserver's audiences (see the module docstring); raises ``errors.KubeError``."""
    return (
        from_own_token(own_token)
        or from_service_account_jwt(kube.bearer_token())
        or await from_token_request(kube, namespace=namespace)
    )

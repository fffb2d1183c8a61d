"""The Kubernetes TokenReview call and the checks the real service makes on its result.

A plain HTTPS POST with httpx (no Kubernetes client: import-linter forbids it here), verified against
the configured CA, authenticated with the reviewer token or, when none is configured, the client's
own jwt (which then needs ``system:auth-delegator``).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

import httpx

from secretferry.devserver import globs
from secretferry.devserver.errors import BadRequest, Unauthorized

REVIEW_TIMEOUT_SECONDS = 10.0  # an apiserver that takes longer is treated as a failed review
_SA_PREFIX = "system:serviceaccount:"
TOKEN_REVIEW_ERROR = "KubernetesTokenReviewError"  # the real service's error name for a failed review


@dataclass(frozen=True)
class ReviewedAccount:
    namespace: str
    name: str
    audiences: list[str]


async def review(
    config: dict[str, Any], jwt: str, *, send_audiences: bool = True, verify_without_ca: bool = True
) -> dict[str, Any]:
    """POST a TokenReview; returns its ``status``. Any transport or HTTP failure → 401.

    ``config`` is the stored Kubernetes-auth document; its private ``_caCert`` and
    ``_tokenReviewerJwt`` fields are never returned by the API. ``send_audiences=False`` leaves
    ``spec.audiences`` out whatever the allowed audience (the 2024-10 release): the apiserver then
    checks the token against its own audiences. ``verify_without_ca=False``: no CA, no verification
    (that release's ``rejectUnauthorized: !!caCert``).
    """
    host = str(config.get("kubernetesHost") or "").rstrip("/")
    if not host:
        raise Unauthorized("Kubernetes auth is not configured with a host")
    ca_cert = config.get("_caCert") or ""
    verify: ssl.SSLContext | bool = (
        ssl.create_default_context(cadata=ca_cert) if ca_cert else verify_without_ca
    )
    spec: dict[str, Any] = {"token": jwt}
    if config.get("allowedAudience") and send_audiences:
        spec["audiences"] = [config["allowedAudience"]]
    bearer = config.get("_tokenReviewerJwt") or jwt
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
    try:
        async with httpx.AsyncClient(verify=verify, timeout=REVIEW_TIMEOUT_SECONDS) as client:
            response = await client.post(
                f"{host}/apis/authentication.k8s.io/v1/tokenreviews",
                json=body,
                headers={"Authorization": f"Bearer {bearer}"},
            )
    except httpx.HTTPError as exc:
        raise Unauthorized(f"Failed to review the Kubernetes token: {type(exc).__name__}") from exc
    if response.status_code >= 300:
        raise Unauthorized(f"Kubernetes TokenReview failed with status {response.status_code}")
    status: dict[str, Any] = (response.json() or {}).get("status") or {}
    return status


def check(config: dict[str, Any], status: dict[str, Any]) -> ReviewedAccount:
    """Apply the real service's checks to a TokenReview status (raises 400/401)."""
    if status.get("error"):
        # The apiserver's own words, as the real service passes them on (every generation), e.g.
        # "[invalid bearer token, token audiences [...] is invalid for the target audiences [...]]".
        raise Unauthorized(str(status["error"]), name=TOKEN_REVIEW_ERROR)
    if not status.get("authenticated"):
        raise Unauthorized("Kubernetes token not authenticated", name=TOKEN_REVIEW_ERROR)
    username = str((status.get("user") or {}).get("username") or "")
    parts = username[len(_SA_PREFIX) :].split(":") if username.startswith(_SA_PREFIX) else []
    if len(parts) != 2 or not all(parts):
        raise BadRequest("Invalid username format: expected system:serviceaccount:<namespace>:<name>")
    namespace, name = parts
    if not _allowed(config.get("allowedNamespaces"), namespace):
        raise Unauthorized("Access denied: namespace not allowed")
    if not _allowed(config.get("allowedNames"), name):
        raise Unauthorized("Access denied: service account name not allowed")
    audiences = [str(a) for a in status.get("audiences") or []]
    audience = config.get("allowedAudience")
    if audience and audience not in audiences:
        raise Unauthorized("Access denied: token audience not allowed")
    return ReviewedAccount(namespace, name, audiences)


def _allowed(listing: Any, value: str) -> bool:
    """Comma-separated exact names or globs; empty allows any."""
    entries = [e.strip() for e in str(listing or "").split(",") if e.strip()]
    return not entries or any(
        globs.glob_match(e, value) if "*" in e or "?" in e else e == value for e in entries
    )

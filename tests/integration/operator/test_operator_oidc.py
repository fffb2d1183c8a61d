"""OIDC and JWT auth end to end: the operator mints a ServiceAccount token, the dev server verifies it
against the local apiserver's OIDC discovery document and JWKS (anonymous, as managed clusters
serve them), no TokenReview involved.

- An OIDC identity and a JWT (JWKS URL) identity sync.
- A wrong audience, a wrong subject and an expired token are refused, the reason named at the
  identity, and the synced Secret is left as it was.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import harness
import httpx
import pytest
from harness import PROJECT_ID, eventually, source

from secretferry.devcluster.cluster import ISSUER, ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer, run_dev_server

pytestmark = pytest.mark.integration

OIDC_ID = "0f000000-0000-4000-8000-0000000000d1"
JWT_ID = "0f000000-0000-4000-8000-0000000000d2"
STRICT_ID = "0f000000-0000-4000-8000-0000000000d3"  # bound to a subject no test ServiceAccount has
OIDC_AUDIENCE = "secretferry-oidc"


@pytest.fixture(scope="module")
def service(
    control_plane: ControlPlane, reviewer_token: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevServer]:
    seed = harness.seed(control_plane, reviewer_token=reviewer_token)
    oidc = {
        "oidcDiscoveryUrl": control_plane.server,
        "caCert": control_plane.ca_pem,
        "boundIssuer": ISSUER,
        "boundAudiences": OIDC_AUDIENCE,
        "boundSubject": "system:serviceaccount:*:oidc-sa",
        "accessTokenTTL": 3600,
    }
    jwt = {
        "configurationType": "jwks",
        "jwksUrl": f"{control_plane.server}/openid/v1/jwks",
        "jwksCaCert": control_plane.ca_pem,
        "boundIssuer": ISSUER,
        "boundAudiences": OIDC_AUDIENCE,
        "accessTokenTTL": 3600,
    }
    strict = {**oidc, "boundSubject": "system:serviceaccount:elsewhere:nobody"}
    for identity_id, name, key, block in (
        (OIDC_ID, "oidc", "oidcAuth", oidc),
        (JWT_ID, "jwt", "jwtAuth", jwt),
        (STRICT_ID, "strict", "oidcAuth", strict),
    ):
        seed["identities"].append(
            {
                "id": identity_id,
                "name": name,
                "organization": "test-org",
                key: block,
                "projects": [{"project": harness.PROJECT_SLUG, "role": "admin"}],
            }
        )
    with run_dev_server(seed=seed, data_dir=tmp_path_factory.mktemp("devserver")) as server:
        harness.record_values(server)
        yield server


def _identity(
    cp: ControlPlane,
    namespace: str,
    name: str,
    method: str,
    identity_id: str,
    *,
    audience: str = OIDC_AUDIENCE,
) -> None:
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {
                "name": "oidc-sa",
                "namespace": namespace,
                "annotations": {harness.ALLOWED_IDENTITIES: name},
            },
        }
    )
    cp.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "MachineIdentity",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "auth": {
                    method: {
                        "identityId": identity_id,
                        "serviceAccountRef": {"name": "oidc-sa"},
                        "audiences": [audience],
                    }
                }
            },
        }
    )


def _identity_reason(cp: ControlPlane, namespace: str, name: str, reason: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        cond = harness.ready(cp, namespace, name, kind="machineidentity")
        return cond if cond and cond.get("reason") == reason else None

    return eventually(check, what=f"{name} Ready reason {reason}", timeout=60)


@pytest.mark.parametrize(("method", "identity_id"), [("oidc", OIDC_ID), ("jwt", JWT_ID)])
def test_a_service_account_token_logs_in_and_syncs(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    method: str,
    identity_id: str,
) -> None:
    value = f"{method}-{uuid.uuid4().hex[:8]}"
    service.set_secret(PROJECT_ID, "dev", f"/{namespace}", "K", value)
    _identity(control_plane, namespace, "ferry", method, identity_id)
    harness.secret_sync(control_plane, namespace, "app", sources=[source(f"/{namespace}")])
    eventually(
        lambda: harness.secret_data(control_plane, namespace, "app") == {"K": value},
        what=f"Secret synced through {method} auth",
        timeout=60,
    )
    routes = service.stats()["routes"]
    assert routes.get(f"POST /api/v1/auth/{method}-auth/login", 0) >= 1


def test_a_wrong_audience_is_refused_at_the_identity(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    _identity(control_plane, namespace, "ferry", "oidc", OIDC_ID, audience="not-the-bound-one")
    harness.secret_sync(control_plane, namespace, "app", sources=[source(f"/{namespace}")])
    cond = _identity_reason(control_plane, namespace, "ferry", "AuthFailed")
    assert "OIDC audience not allowed" in cond["message"], cond
    assert harness.get(control_plane, "secret", "app", namespace) is None


def test_a_wrong_subject_is_refused_at_the_identity(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    _identity(control_plane, namespace, "ferry", "oidc", STRICT_ID)
    harness.secret_sync(control_plane, namespace, "app", sources=[source(f"/{namespace}")])
    cond = _identity_reason(control_plane, namespace, "ferry", "AuthFailed")
    assert "OIDC subject not allowed" in cond["message"], cond


def test_an_expired_token_is_refused_by_the_service(
    control_plane: ControlPlane, service: DevServer, namespace: str
) -> None:
    """The operator never sends an expired token (it mints one per login), so the refusal is proven
    on the route itself with a real apiserver token, judged an hour later (``jwtClockSkewSeconds``):
    TokenRequest mints 10 minutes at least."""
    control_plane.kubectl("create", "serviceaccount", "expiring", "-n", namespace)
    token = control_plane.token_for(namespace, "expiring", audiences=[OIDC_AUDIENCE])
    login = f"{service.base_url}/api/v1/auth/jwt-auth/login"
    ok = httpx.post(login, json={"identityId": JWT_ID, "jwt": token})
    assert ok.status_code == 200, ok.text
    service.set_faults({"jwtClockSkewSeconds": 3600})
    try:
        late = httpx.post(login, json={"identityId": JWT_ID, "jwt": token})
    finally:
        service.clear_faults()
    assert late.status_code == 401 and late.json()["message"] == "Access denied: jwt expired", late.text

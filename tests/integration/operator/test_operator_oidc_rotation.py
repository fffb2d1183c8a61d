"""A rotated apiserver signing key, end to end, on a real kube-apiserver of the test's own.

The service verifies OIDC and JWT logins with the keys the cluster publishes (discovery → JWKS),
fetched at every login, so a key rotation at the cluster must need nothing from the operator or
the service. Rotated as an administrator does (``ControlPlane.restart_apiserver``):

1. the new public key joins the verification set and the apiserver signs with the new key (its
   JWKS now lists both): the operator's next logins send tokens signed by the new key and still
   sync; a token signed by the old key still logs in (the overlap an administrator leaves);
2. the old public key is dropped (JWKS lists the new key only): the operator still logs in and
   syncs, and a token signed by the old key is refused with the service's own words (the key's
   ``kid`` not found in the JWKS).

Its own throwaway control plane: restarting the shared one would break every other test's
watches and tokens. Nothing is stubbed: the dev server fetches the real discovery document and
JWKS from this apiserver over TLS.
"""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
import httpx
import pytest
from harness import PROJECT_ID, eventually, source

from secretferry.devcluster import certs, cluster
from secretferry.devcluster.cluster import ISSUER, ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer, run_dev_server

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
OIDC_ID = "0f000000-0000-4000-8000-0000000000e1"
JWT_ID = "0f000000-0000-4000-8000-0000000000e2"
AUDIENCE = "secretferry-rotation"
SA = "rotating-sa"
# A restart of kube-apiserver on 2 loaded cores has been seen to take ~20 s; the operator's
# watches and the next login follow within the backoff (max 3 s in the harness).
AFTER_RESTART_SECONDS = 90.0


@dataclass
class Rotating:
    cp: ControlPlane
    service: DevServer
    operator: OperatorProcess
    namespace: str


@pytest.fixture(scope="module")
def rotating(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rotating]:
    """A control plane of its own, a dev server whose OIDC and JWT identities trust its issuer, and
    the operator on it."""
    workdir = tmp_path_factory.mktemp("rotating-cp")
    cp = cluster.start(workdir)
    try:
        for path in sorted((REPO / "crds").glob("*.yaml")):
            cp.kubectl("apply", "--server-side", "-f", str(path))
        cp.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        cp.kubectl("create", "namespace", harness.OPERATOR_NAMESPACE)
        seed = harness.seed(cp, reviewer_token=cp.reviewer_token(expiration_seconds=24 * 3600))
        bounds = {"boundIssuer": ISSUER, "boundAudiences": AUDIENCE, "accessTokenTTL": 3600}
        oidc = {"oidcDiscoveryUrl": cp.server, "caCert": cp.ca_pem, **bounds}
        jwt = {
            "configurationType": "jwks",
            "jwksUrl": f"{cp.server}/openid/v1/jwks",
            "jwksCaCert": cp.ca_pem,
            **bounds,
        }
        for identity_id, name, key, block in (
            (OIDC_ID, "oidc", "oidcAuth", oidc),
            (JWT_ID, "jwt", "jwtAuth", jwt),
        ):
            block["boundSubject"] = f"system:serviceaccount:*:{SA}"
            seed["identities"].append(
                {
                    "id": identity_id,
                    "name": name,
                    "organization": "test-org",
                    key: block,
                    "projects": [{"project": harness.PROJECT_SLUG, "role": "admin"}],
                }
            )
        with run_dev_server(
            seed=seed,
            data_dir=tmp_path_factory.mktemp("rotating-devserver"),
            extra_args=["--heartbeat-seconds", "1", "--recheck-seconds", "2"],
        ) as service:
            harness.record_values(service)
            op = harness.start_operator(cp, service, tmp_path_factory.mktemp("rotating-op") / "operator.log")
            try:
                namespace = f"t-{uuid.uuid4().hex[:10]}"
                cp.kubectl("create", "namespace", namespace)
                yield Rotating(cp=cp, service=service, operator=op, namespace=namespace)
            finally:
                op.stop()
            harness.assert_no_values_leaked(cp, op)
    finally:
        cp.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _kid(token: str) -> str:
    header = token.split(".", 1)[0]
    kid: str = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"]
    return kid


def _published_kids(cp: ControlPlane) -> set[str]:
    """The kids of the apiserver's JWKS, fetched anonymously as the service does."""
    jwks = httpx.get(
        f"{cp.server}/openid/v1/jwks", verify=ssl.create_default_context(cadata=cp.ca_pem)
    ).json()
    return {key["kid"] for key in jwks["keys"]}


def _login(service: DevServer, method: str, identity_id: str, token: str) -> httpx.Response:
    return httpx.post(
        f"{service.base_url}/api/v1/auth/{method}-auth/login", json={"identityId": identity_id, "jwt": token}
    )


def _identity(cp: ControlPlane, namespace: str, name: str, method: str, identity_id: str) -> None:
    cp.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "MachineIdentity",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "auth": {
                    method: {
                        "identityId": identity_id,
                        "serviceAccountRef": {"name": SA},
                        "audiences": [AUDIENCE],
                    }
                }
            },
        }
    )


def _logins(service: DevServer, method: str) -> int:
    routes: dict[str, int] = service.stats()["routes"]
    return routes.get(f"POST /api/v1/auth/{method}-auth/login", 0)


def _synced_after_relogin(r: Rotating, value: str, *, why: str) -> None:
    """Force both identities to log in again (their access tokens expire at the service), change
    the value, and wait until both Secrets hold it: each login sent a token minted just now."""
    before = {m: _logins(r.service, m) for m in ("oidc", "jwt")}
    r.service.expire_tokens(OIDC_ID)
    r.service.expire_tokens(JWT_ID)
    for method in ("oidc", "jwt"):
        r.service.set_secret(PROJECT_ID, "dev", f"/{r.namespace}/{method}", "K", f"{value}-{method}")
    for method in ("oidc", "jwt"):

        def synced(m: str = method) -> bool:
            return harness.secret_data(r.cp, r.namespace, m) == {"K": f"{value}-{m}"}

        eventually(synced, what=f"the {method} Secret synced {why}", timeout=AFTER_RESTART_SECONDS)
        assert _logins(r.service, method) > before[method], f"{method}: no new login {why}"
        cond = harness.ready(r.cp, r.namespace, method, kind="machineidentity")
        assert cond is not None and cond["status"] == "True", cond


def test_a_rotated_signing_key_keeps_logins_working_and_refuses_a_removed_key(
    rotating: Rotating, tmp_path: Path
) -> None:
    r, cp, ns = rotating, rotating.cp, rotating.namespace
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {
                "name": SA,
                "namespace": ns,
                "annotations": {harness.ALLOWED_IDENTITIES: "oidc,jwt"},
            },
        }
    )
    for method, identity_id in (("oidc", OIDC_ID), ("jwt", JWT_ID)):
        _identity(cp, ns, method, method, identity_id)
        harness.secret_sync(cp, ns, method, identity=method, sources=[source(f"/{ns}/{method}")])
    _synced_after_relogin(r, "before", why="with the first key")

    old_token = cp.token_for(ns, SA, audiences=[AUDIENCE], expiration_seconds=3600)
    old_kid = _kid(old_token)
    assert _published_kids(cp) == {old_kid}

    # 1. The new key signs; both public keys verify (and are published).
    new_key, new_pub = tmp_path / "sa-2.key", tmp_path / "sa-2.pub"
    certs.write_service_account_pair(new_key, new_pub)
    cp.restart_apiserver(verification_keys=[cp.pki.sa_pub, new_pub], signing_key=new_key)
    new_kid = _kid(cp.token_for(ns, SA, audiences=[AUDIENCE]))
    assert new_kid != old_kid and _published_kids(cp) == {old_kid, new_kid}
    _synced_after_relogin(r, "rotated", why="after the new key signs")
    for method, identity_id in (("oidc", OIDC_ID), ("jwt", JWT_ID)):
        overlap = _login(r.service, method, identity_id, old_token)
        assert overlap.status_code == 200, f"{method}: {overlap.text}"

    # 2. The old public key is dropped: only the new one is published.
    cp.restart_apiserver(verification_keys=[new_pub], signing_key=new_key)
    assert _published_kids(cp) == {new_kid}
    _synced_after_relogin(r, "after", why="after the old key is removed")
    for method, identity_id, source_name in (
        ("oidc", OIDC_ID, "the OIDC provider"),
        ("jwt", JWT_ID, "the JWKS URL"),
    ):
        refused = _login(r.service, method, identity_id, old_token)
        assert refused.status_code == 401, f"{method}: {refused.text}"
        body: dict[str, Any] = refused.json()
        assert body["message"] == (
            f"Access denied: Unable to verify JWT signature. The signing key '{old_kid}' was not found "
            f"in {source_name}'s JWKS endpoint. This may indicate an invalid token or misconfigured "
            "OIDC provider."
        ), body

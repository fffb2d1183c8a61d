"""Kubernetes auth against the real local control plane: the dev server performs a real TokenReview."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from secretferry.devserver.testing import DevServer, kubernetes_auth, run_dev_server

pytestmark = pytest.mark.integration
PROJECT = "33333333-3333-4333-8333-333333333333"
AUDIENCE = "secretferry-devserver"
LOGIN = "/api/v1/auth/kubernetes-auth/login"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[DevServer]:
    seed = {"projects": [{"id": PROJECT, "slug": "k8s", "environments": [{"slug": "dev", "name": "Dev"}]}]}
    with run_dev_server(seed=seed, data_dir=tmp_path, extra_args=["--token-error-status", "403"]) as srv:
        yield srv


def identity(server: DevServer, control_plane: Any, namespace: str, **overrides: Any) -> str:
    identity_id = str(uuid.uuid4())
    config = kubernetes_auth(
        host=control_plane.server,
        ca_pem=control_plane.ca_pem,
        reviewer_token=control_plane.reviewer_token(),
        audience=AUDIENCE,
        **{"allowedNamespaces": namespace, "allowedNames": "app", **overrides},
    )
    server.add_seed(
        {
            "identities": [
                {
                    "id": identity_id,
                    "name": "k8s",
                    "kubernetesAuth": config,
                    "projects": [{"project": "k8s", "role": "viewer"}],
                }
            ]
        }
    )
    return identity_id


def service_account(control_plane: Any, namespace: str, name: str) -> None:
    control_plane.kubectl("create", "serviceaccount", name, "-n", namespace)


def login(server: DevServer, identity_id: str, jwt: str) -> httpx.Response:
    return httpx.post(f"{server.base_url}{LOGIN}", json={"identityId": identity_id, "jwt": jwt}, timeout=30)


def test_login_success_and_expiry(server: DevServer, control_plane: Any, namespace: str) -> None:
    service_account(control_plane, namespace, "app")
    identity_id = identity(server, control_plane, namespace)
    r = login(server, identity_id, control_plane.token_for(namespace, "app", audiences=[AUDIENCE]))
    assert r.status_code == 200, r.text
    assert r.json()["tokenType"] == "Bearer" and r.json()["expiresIn"] > 0
    bearer = {"Authorization": f"Bearer {r.json()['accessToken']}"}
    listing = httpx.get(
        f"{server.base_url}/api/v4/secrets",
        params={"projectId": PROJECT, "environment": "dev"},
        headers=bearer,
    )
    assert listing.status_code == 200
    server.expire_tokens(identity_id)
    expired = httpx.get(
        f"{server.base_url}/api/v4/secrets",
        params={"projectId": PROJECT, "environment": "dev"},
        headers=bearer,
    )
    assert expired.status_code == 403 and expired.json()["error"] == "TokenError"
    again = login(server, identity_id, control_plane.token_for(namespace, "app", audiences=[AUDIENCE]))
    assert again.status_code == 200


def test_wrong_namespace(server: DevServer, control_plane: Any, namespace: str) -> None:
    service_account(control_plane, namespace, "app")
    identity_id = identity(server, control_plane, namespace, allowedNamespaces="somewhere-else,other-*")
    r = login(server, identity_id, control_plane.token_for(namespace, "app", audiences=[AUDIENCE]))
    assert r.status_code == 401


def test_wrong_service_account_name(server: DevServer, control_plane: Any, namespace: str) -> None:
    service_account(control_plane, namespace, "intruder")
    identity_id = identity(server, control_plane, namespace)
    r = login(server, identity_id, control_plane.token_for(namespace, "intruder", audiences=[AUDIENCE]))
    assert r.status_code == 401


def test_wrong_audience(server: DevServer, control_plane: Any, namespace: str) -> None:
    service_account(control_plane, namespace, "app")
    identity_id = identity(server, control_plane, namespace)
    r = login(server, identity_id, control_plane.token_for(namespace, "app", audiences=["someone-else"]))
    assert r.status_code == 401


def test_garbage_token(server: DevServer, control_plane: Any, namespace: str) -> None:
    identity_id = identity(server, control_plane, namespace)
    assert login(server, identity_id, "not-a-jwt").status_code == 401


@pytest.fixture
def selfhosted(tmp_path: Path) -> Iterator[DevServer]:
    """The 2024-10 self-hosted release: its TokenReview carries no audiences."""
    seed = {"projects": [{"id": PROJECT, "slug": "k8s", "environments": [{"slug": "dev", "name": "Dev"}]}]}
    with run_dev_server(seed=seed, data_dir=tmp_path, extra_args=["--profile", "selfhosted-2024-10"]) as srv:
        yield srv


def test_selfhosted_reviews_against_the_apiservers_own_audiences(
    selfhosted: DevServer, control_plane: Any, namespace: str
) -> None:
    """With or without an allowed audience configured, a token for the service's audience fails the
    real TokenReview with the apiserver's own words; only an apiserver-audience token logs in (which
    the operator never sends for a namespaced identity)."""
    service_account(control_plane, namespace, "app")
    for allowed in (AUDIENCE, ""):
        identity_id = identity(selfhosted, control_plane, namespace, allowedAudience=allowed)
        r = login(selfhosted, identity_id, control_plane.token_for(namespace, "app", audiences=[AUDIENCE]))
        assert r.status_code == 401, r.text
        body = r.json()
        assert body["error"] == "KubernetesTokenReviewError" and "reqId" not in body
        assert (
            f'token audiences ["{AUDIENCE}"] is invalid for the target audiences '
            '["https://kubernetes.default.svc.cluster.local"]'
        ) in body["message"]
    api_token = control_plane.token_for(namespace, "app")  # no audience: the apiserver's own
    assert login(selfhosted, identity_id, api_token).status_code == 200


def test_selfhosted_unknown_identity_is_404(selfhosted: DevServer) -> None:
    r = login(selfhosted, str(uuid.uuid4()), "a.b.c")
    assert r.status_code == 404 and r.json()["error"] == "NotFound" and "reqId" not in r.json()

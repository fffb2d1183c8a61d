"""The operator against a dev server that is the 2024-10 self-hosted release (``--profile
selfhosted-2024-10``), on the auth side, with real TokenReviews against the local control plane.

- Its TokenReview ignores the identity's audience: a namespaced identity gets
  ``ServerIgnoresAudience`` with the remedy, and the operator does not keep logging in.
- The remedy works: an admin's ClusterMachineIdentity with ``allowAPIServerAudience: true`` logs in
  and syncs; without the field it is ``AudienceNotAllowed``, nothing minted for it.
- An unknown client id (404 there) is ``AuthFailed``, not ``SourceNotFound``, and not retried fast.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import harness
import pytest
from harness import PROJECT_ID, eventually, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer, kubernetes_auth, run_dev_server

pytestmark = pytest.mark.integration

KUBERNETES_LOGIN = "POST /api/v1/auth/kubernetes-auth/login"
UNIVERSAL_LOGIN = "POST /api/v1/auth/universal-auth/login"
OPEN_ID = "0f000000-0000-4000-8000-0000000000c1"  # Kubernetes auth with no allowed audience
# The operator's own retries back off up to 3 s here (harness.start_operator): several fit.
_RETRIES_SECONDS = 8.0


@pytest.fixture(scope="module")
def service(
    control_plane: ControlPlane, reviewer_token: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevServer]:
    seed = harness.seed(control_plane, reviewer_token=reviewer_token)
    seed["identities"].append(
        {
            "id": OPEN_ID,
            "name": "open",
            "organization": "test-org",
            "kubernetesAuth": kubernetes_auth(
                host=control_plane.server, ca_pem=control_plane.ca_pem, reviewer_token=reviewer_token
            ),
            "projects": [{"project": harness.PROJECT_SLUG, "role": "admin"}],
        }
    )
    with run_dev_server(
        seed=seed,
        data_dir=tmp_path_factory.mktemp("devserver"),
        extra_args=["--profile", "selfhosted-2024-10"],
    ) as server:
        harness.record_values(server)
        yield server


def _identity_cond(
    cp: ControlPlane, name: str, reason: str, namespace: str = "", kind: str = ""
) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        if namespace:
            cond = harness.ready(cp, namespace, name, kind="machineidentity")
        else:
            obj = harness.get(cp, kind, name, "default")  # cluster-scoped: -n is ignored
            conds = ((obj or {}).get("status") or {}).get("conditions") or []
            cond = next((c for c in conds if c.get("type") == "Ready"), None)
        return cond if cond and cond.get("reason") == reason else None

    return eventually(check, what=f"{name} Ready reason {reason}", timeout=60)


def _logins(service: DevServer, route: str) -> int:
    return int(service.stats()["routes"].get(route, 0))


def test_a_server_that_ignores_audiences_is_named_and_not_hammered(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(control_plane, namespace, "app", sources=[source(f"/{namespace}")])
    cond = _identity_cond(control_plane, "ferry", "ServerIgnoresAudience", namespace=namespace)
    assert "allowAPIServerAudience" in cond["message"] and "Upgrade the service" in cond["message"]
    assert harness.AUDIENCE in cond["message"] and 'service said: "' in cond["message"]
    harness.wait_reason(control_plane, namespace, "app", "ServerIgnoresAudience")
    before = _logins(service, KUBERNETES_LOGIN)
    time.sleep(_RETRIES_SECONDS)
    assert _logins(service, KUBERNETES_LOGIN) == before  # no retry within the hour
    assert harness.get(control_plane, "secret", "app", namespace) is None


def test_the_cluster_remedy_needs_the_explicit_field(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", f"selfhosted-{uuid.uuid4().hex[:8]}")
    control_plane.kubectl("create", "serviceaccount", "cluster-sa", "-n", namespace)
    name = f"api-aud-{namespace}"
    spec: dict[str, Any] = {
        "auth": {
            "kubernetes": {
                "identityId": OPEN_ID,
                "audiences": [],
                "serviceAccountRef": {"name": "cluster-sa", "namespace": namespace},
            }
        },
        "allowedNamespaces": {"names": [namespace]},
    }
    body = {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "ClusterMachineIdentity",
        "metadata": {"name": name},
    }
    try:
        before = _logins(service, KUBERNETES_LOGIN)
        control_plane.apply({**body, "spec": spec})
        harness.secret_sync(
            control_plane,
            namespace,
            "app",
            sources=[source(path)],
            identity=name,
            identity_kind="ClusterMachineIdentity",
        )
        cond = _identity_cond(control_plane, name, "AudienceNotAllowed", kind="clustermachineidentity")
        assert "allowAPIServerAudience" in cond["message"] and "no token was minted" in cond["message"]
        assert _logins(service, KUBERNETES_LOGIN) == before

        spec["auth"]["kubernetes"]["allowAPIServerAudience"] = True
        control_plane.apply({**body, "spec": spec})
        harness.wait_reason(control_plane, namespace, "app", "Synced", timeout=60)
        assert set(harness.secret_data(control_plane, namespace, "app") or {}) == {"K"}
    finally:
        control_plane.kubectl("delete", "clustermachineidentity", name, "--wait=false", check=False)


def test_an_unknown_client_id_is_auth_failed_and_not_retried_fast(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "creds",
                "namespace": namespace,
                "annotations": {harness.ALLOWED_IDENTITIES: "uni"},
            },
            "stringData": {"clientSecret": "whatever"},
        }
    )
    control_plane.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "MachineIdentity",
            "metadata": {"name": "uni", "namespace": namespace},
            "spec": {
                "auth": {
                    "universal": {
                        "clientId": "no-such-client",
                        "clientSecretRef": {"name": "creds", "key": "clientSecret"},
                    }
                }
            },
        }
    )
    harness.secret_sync(control_plane, namespace, "app", sources=[source(f"/{namespace}")], identity="uni")
    cond = _identity_cond(control_plane, "uni", "AuthFailed", namespace=namespace)
    assert "knows no such client id" in cond["message"]
    harness.wait_reason(control_plane, namespace, "app", "AuthFailed")
    before = _logins(service, UNIVERSAL_LOGIN)
    time.sleep(_RETRIES_SECONDS)
    assert _logins(service, UNIVERSAL_LOGIN) == before

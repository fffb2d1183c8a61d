"""Consent and namespace labels take effect at once (issue 20), on the real control plane.

- An ``allowed-identities`` annotation removed from a ServiceAccount or credentials Secret stops
  its use within seconds (watched, not re-checked at the next login up to 300 s later): the
  identity is not Ready (``CredentialsNotOptedIn``), its token is revoked at the dev server, its
  SecretSyncs are ``IdentityNotReady`` and their Secrets keep their data; the annotation added
  back makes it Ready again, as fast.
- A namespace label removed from a ClusterMachineIdentity's ``allowedNamespaces`` selector
  refuses that namespace's SecretSyncs at once (``IdentityNotAllowed``), added back admits them.

"At once" is checked with timeouts well under the old delays (the 300 s until the next login,
the 30 s label cache): before the watches, the token stayed live and the namespace admitted.
"""

from __future__ import annotations

from typing import Any

import harness
import pytest
import tenant
from harness import IDENTITY_ID, PROJECT_ID, UNIVERSAL_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

ALLOWED = "secretferry.io/allowed-identities"
AT_ONCE_SECONDS = 10.0  # well under 300 s (logins) and 30 s (the old label cache); load leaves room


def _identity_reason(cp: ControlPlane, namespace: str, name: str) -> str | None:
    cond = harness.ready(cp, namespace, name, kind="machineidentity") or {}
    return cond.get("reason")


def _identity_condition(cp: ControlPlane, namespace: str, name: str, reason: str) -> dict[str, Any] | None:
    cond = harness.ready(cp, namespace, name, kind="machineidentity")
    return cond if cond and cond.get("reason") == reason else None


def _sync_reason(cp: ControlPlane, namespace: str, name: str) -> str | None:
    return (harness.ready(cp, namespace, name) or {}).get("reason")


def test_a_service_account_taking_its_opt_in_back_stops_the_identity_at_once(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "consent-value-1")
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(control_plane, namespace, "app", sources=[source(path)])
    eventually(lambda: secret_data(control_plane, namespace, "app") == {"K": "consent-value-1"}, what="sync")
    eventually(lambda: _identity_reason(control_plane, namespace, "ferry") == "LoggedIn", what="Ready")
    eventually(lambda: service.live_tokens(IDENTITY_ID) == 1, what="the identity's token")

    control_plane.kubectl("annotate", "serviceaccount", "ferry-sa", "-n", namespace, f"{ALLOWED}-")
    eventually(
        lambda: _identity_reason(control_plane, namespace, "ferry") == "CredentialsNotOptedIn",
        what="the identity not Ready once the opt-in is gone",
        timeout=AT_ONCE_SECONDS,
    )
    eventually(
        lambda: service.live_tokens(IDENTITY_ID) == 0, what="its token revoked", timeout=AT_ONCE_SECONDS
    )
    eventually(
        lambda: _sync_reason(control_plane, namespace, "app") == "IdentityNotReady",
        what="the SecretSync IdentityNotReady",
        timeout=AT_ONCE_SECONDS,
    )
    cond = harness.ready(control_plane, namespace, "app") or {}
    assert "CredentialsNotOptedIn" in cond.get("message", "") and ALLOWED in cond.get("message", "")
    assert secret_data(control_plane, namespace, "app") == {"K": "consent-value-1"}  # nothing lost

    control_plane.kubectl("annotate", "serviceaccount", "ferry-sa", "-n", namespace, f"{ALLOWED}=ferry")
    eventually(
        lambda: _identity_reason(control_plane, namespace, "ferry") == "LoggedIn",
        what="Ready again once the opt-in is back",
        timeout=AT_ONCE_SECONDS,
    )
    eventually(
        lambda: _sync_reason(control_plane, namespace, "app") == "Synced",
        what="the SecretSync synced again",
        timeout=AT_ONCE_SECONDS,
    )
    assert service.live_tokens(IDENTITY_ID) == 1


def test_a_credentials_secret_taking_its_opt_in_back_stops_the_identity_at_once(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "consent-value-2")
    harness.universal_identity(control_plane, namespace)
    harness.secret_sync(control_plane, namespace, "app", sources=[source(path)], identity="uni")
    eventually(lambda: secret_data(control_plane, namespace, "app") == {"K": "consent-value-2"}, what="sync")
    eventually(lambda: service.live_tokens(UNIVERSAL_ID) >= 1, what="the identity's token")

    control_plane.kubectl(
        "annotate", "secret", "uni-creds", "-n", namespace, f"{ALLOWED}=someone-else", "--overwrite"
    )
    eventually(
        lambda: _identity_reason(control_plane, namespace, "uni") == "CredentialsNotOptedIn",
        what="the identity not Ready once the Secret names another identity",
        timeout=AT_ONCE_SECONDS,
    )
    eventually(
        lambda: service.live_tokens(UNIVERSAL_ID) == 0, what="its token revoked", timeout=AT_ONCE_SECONDS
    )
    eventually(
        lambda: _sync_reason(control_plane, namespace, "app") == "IdentityNotReady",
        what="the SecretSync IdentityNotReady",
        timeout=AT_ONCE_SECONDS,
    )
    assert secret_data(control_plane, namespace, "app") == {"K": "consent-value-2"}

    control_plane.kubectl("annotate", "secret", "uni-creds", "-n", namespace, f"{ALLOWED}=uni", "--overwrite")
    eventually(
        lambda: _identity_reason(control_plane, namespace, "uni") == "LoggedIn",
        what="Ready again once the opt-in is back",
        timeout=AT_ONCE_SECONDS,
    )
    eventually(
        lambda: _sync_reason(control_plane, namespace, "app") == "Synced",
        what="synced again",
        timeout=AT_ONCE_SECONDS,
    )


def test_a_namespace_label_change_takes_effect_at_once(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "label-value-1")
    name = f"by-label-{namespace}"
    control_plane.kubectl("label", "namespace", namespace, "ferry-tenant=yes")
    control_plane.kubectl("create", "serviceaccount", "cluster-sa", "-n", namespace)
    control_plane.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "ClusterMachineIdentity",
            "metadata": {"name": name},
            "spec": {
                "auth": {
                    "kubernetes": {
                        "identityId": IDENTITY_ID,
                        "audiences": [harness.AUDIENCE],
                        "serviceAccountRef": {"name": "cluster-sa", "namespace": namespace},
                    }
                },
                "allowedNamespaces": {"selector": {"matchLabels": {"ferry-tenant": "yes"}}},
            },
        }
    )
    try:
        harness.secret_sync(
            control_plane,
            namespace,
            "app",
            sources=[source(path)],
            identity=name,
            identity_kind="ClusterMachineIdentity",
        )
        eventually(
            lambda: secret_data(control_plane, namespace, "app") == {"K": "label-value-1"}, what="sync"
        )

        control_plane.kubectl("label", "namespace", namespace, "ferry-tenant-")
        eventually(
            lambda: _sync_reason(control_plane, namespace, "app") == "IdentityNotAllowed",
            what="the namespace refused once its label is gone",
            timeout=AT_ONCE_SECONDS,
        )
        assert secret_data(control_plane, namespace, "app") == {"K": "label-value-1"}  # nothing lost

        control_plane.kubectl("label", "namespace", namespace, "ferry-tenant=yes")
        eventually(
            lambda: _sync_reason(control_plane, namespace, "app") == "Synced",
            what="admitted again once the label is back",
            timeout=AT_ONCE_SECONDS,
        )
    finally:
        control_plane.kubectl("delete", "clustermachineidentity", name, check=False)


def test_a_tenant_cannot_tell_a_missing_secret_from_one_that_did_not_opt_in(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    """Issue 20: CredentialsNotFound vs CredentialsNotOptedIn told a tenant which Secret names
    exist. Both identities now read the same, names aside."""
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "admin-token", "namespace": namespace},
            "stringData": {"token": "admin-only-token-value"},
        }
    )
    harness.VALUES.add("admin-only-token-value")
    for name, secret in (("probe-exists", "admin-token"), ("probe-missing", "no-such-token")):
        hostile.apply(
            {
                "apiVersion": "secretferry.io/v1alpha1",
                "kind": "MachineIdentity",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"auth": {"accessToken": {"secretRef": {"name": secret, "key": "token"}}}},
            }
        )
    exists = eventually(
        lambda: _identity_condition(control_plane, namespace, "probe-exists", "CredentialsNotOptedIn"),
        what="the identity naming an existing Secret refused",
    )
    missing = eventually(
        lambda: _identity_condition(control_plane, namespace, "probe-missing", "CredentialsNotOptedIn"),
        what="the identity naming a missing Secret refused",
    )
    assert exists["message"].replace("probe-exists", "X").replace("admin-token", "S") == (
        missing["message"].replace("probe-missing", "X").replace("no-such-token", "S")
    )
    harness.assert_no_values_leaked(control_plane, operator)

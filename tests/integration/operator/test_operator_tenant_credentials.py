"""A hostile tenant tries to steal credentials: no token and no Secret value leaves through the operator.

The tenant may create MachineIdentities and SecretSyncs in its namespace and nothing else (the
``hostile`` fixture). Each test points the operator at credentials the tenant cannot read and at a
listener of the tenant's own, and judges what the operator did on the tenant's behalf:

- the listener received nothing (no request at all, so no token and no value);
- no ServiceAccount token was minted: a ValidatingAdmissionPolicy in ``Warn`` mode matches the
  TokenRequests for exactly one ServiceAccount, and the apiserver counts each one it sees
  (``TokenProbe``), so "none" is a measurement, not an absence of evidence;
- the refusal is in the identity's status with its reason, and a SecretSync using the identity
  does not proceed.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import harness
import pytest
import tenant
from harness import IDENTITY_ID, PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

UNIVERSAL_LOGIN = "POST /api/v1/auth/universal-auth/login"
# The operator's retries back off from 0.5 s up to 3 s in these tests (harness.start_operator):
# waiting this long after a refusal covers several of them.
_RETRIES_SECONDS = 4.0
_METRIC = "apiserver_validating_admission_policy_check_total"


@dataclass
class TokenProbe:
    """Counts TokenRequests for one ServiceAccount as the apiserver admits them (``token_probe``)."""

    cp: ControlPlane
    name: str
    base_all: int = 0
    base_long: int = 0

    def minted(self) -> int:
        """TokenRequests for the ServiceAccount since the probe went live."""
        return self.count("all") - self.base_all

    def long(self) -> int:
        """Of those, the ones asking for more than 10 minutes."""
        return self.count("long") - self.base_long

    def count(self, suffix: str) -> int:
        policy = f'policy="{self.name}-{suffix}"'
        total = 0.0
        for line in self.cp.get("/metrics").decode().splitlines():
            if line.startswith(_METRIC) and policy in line:
                total += float(line.rsplit(" ", 1)[1])
        return int(total)


@contextlib.contextmanager
def token_probe(cp: ControlPlane, namespace: str, service_account: str) -> Iterator[TokenProbe]:
    """Two admission policies in ``Warn`` mode (they never refuse anything) match only this
    ServiceAccount's ``serviceaccounts/token`` creations: ``<name>-all`` fails every one, and
    ``<name>-long`` those asking for more than 600 s. The apiserver counts failed checks per policy
    in ``apiserver_validating_admission_policy_check_total``."""
    probe = TokenProbe(cp, f"tokens-{uuid.uuid4().hex[:8]}")
    match = f"request.namespace == '{namespace}' && request.name == '{service_account}'"
    for suffix, expression in (("all", "false"), ("long", "object.spec.expirationSeconds <= 600")):
        policy = f"{probe.name}-{suffix}"
        cp.apply(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": policy},
                "spec": {
                    "failurePolicy": "Ignore",
                    "matchConstraints": {
                        "resourceRules": [
                            {
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "operations": ["CREATE"],
                                "resources": ["serviceaccounts/token"],
                            }
                        ]
                    },
                    "matchConditions": [{"name": "this-service-account", "expression": match}],
                    "validations": [{"expression": expression, "message": "counted by the test"}],
                },
            }
        )
        cp.apply(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": policy},
                "spec": {"policyName": policy, "validationActions": ["Warn"]},
            }
        )
    try:
        # The probe must be seen to work, or "nothing minted" would prove nothing: the test mints
        # one long token itself and waits until both policies have counted it.
        def live() -> bool:
            cp.token_for(namespace, service_account, expiration_seconds=3600)
            return probe.count("all") > 0 and probe.count("long") > 0

        eventually(live, what="the TokenRequest probe to count", timeout=30, interval=0.5)
        probe.base_all, probe.base_long = probe.count("all"), probe.count("long")
        yield probe
    finally:
        for suffix in ("all", "long"):
            for kind in ("validatingadmissionpolicybinding", "validatingadmissionpolicy"):
                cp.kubectl("delete", kind, f"{probe.name}-{suffix}", "--wait=false", check=False)


def _identity(name: str, namespace: str, auth: dict[str, Any], host: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"auth": auth}
    if host is not None:
        spec["hostAPI"] = host
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "MachineIdentity",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _sync(name: str, namespace: str, identity: str, path: str) -> dict[str, Any]:
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"identityRef": {"kind": "MachineIdentity", "name": identity}, "sources": [source(path)]},
    }


def _service_account(cp: ControlPlane, namespace: str, name: str, *, opted_in: str | None = None) -> None:
    annotations = {harness.ALLOWED_IDENTITIES: opted_in} if opted_in else {}
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        }
    )


def _identity_reason(cp: ControlPlane, namespace: str, name: str, reason: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        cond = harness.ready(cp, namespace, name, kind="machineidentity")
        return cond if cond and cond.get("reason") == reason else None

    return eventually(check, what=f"MachineIdentity {namespace}/{name} Ready reason {reason}")


def _host_port(url: str) -> str:
    return url.split("://", 1)[1]


def test_token_theft_to_a_tenant_host_sends_nothing_and_mints_nothing(
    control_plane: ControlPlane, operator: OperatorProcess, hostile: tenant.Tenant, namespace: str
) -> None:
    """Token theft: the tenant points an identity at its own http listener to catch a 48 h token.

    Worst case on purpose: the ServiceAccount opted in to an identity of this very name (its owner
    trusts ``deploy-id``), and the tenant, who may update MachineIdentities, repoints that identity.
    """
    _service_account(control_plane, namespace, "deployer", opted_in="deploy-id")
    with token_probe(control_plane, namespace, "deployer") as probe, tenant.listening() as spy:
        hostile.apply(
            _identity(
                "deploy-id",
                namespace,
                {
                    "kubernetes": {
                        "identityId": IDENTITY_ID,
                        "serviceAccountRef": {"name": "deployer"},
                        "audiences": [],
                        "tokenExpirationSeconds": 172800,
                    }
                },
                host=spy.url,
            )
        )
        hostile.apply(_sync("app", namespace, "deploy-id", f"/{namespace}"))
        cond = _identity_reason(control_plane, namespace, "deploy-id", "HostNotAllowed")
        assert cond["status"] == "False"
        assert _host_port(spy.url) in cond["message"]
        assert "SECRETFERRY_ALLOWED_HOSTS" in cond["message"]
        synced = harness.wait_reason(control_plane, namespace, "app", "IdentityNotReady")
        assert "HostNotAllowed" in synced["message"]
        time.sleep(_RETRIES_SECONDS)
        assert spy.received == [], spy.text()
        assert probe.minted() == 0
    assert harness.get(control_plane, "secret", "app", namespace) is None


def test_secret_theft_to_a_tenant_host_sends_nothing(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    hostile: tenant.Tenant,
    namespace: str,
) -> None:
    """Secret theft: the tenant names a Secret it cannot read as a client secret or an access token.

    To the tenant's host: refused before the Secret is read. To the allowed host: the Secret did
    not opt in, so it is not used either (the dev server sees no login).
    """
    value = f"db-password-{uuid.uuid4().hex[:12]}"
    harness.VALUES.add(value)  # the module's leak check looks for it everywhere, too
    control_plane.kubectl(
        "create", "secret", "generic", "db-creds", "-n", namespace, f"--from-literal=password={value}"
    )
    assert not hostile.can("get", "secrets")
    ref = {"name": "db-creds", "key": "password"}
    logins_before = service.stats()["routes"].get(UNIVERSAL_LOGIN, 0)
    with tenant.listening() as spy:
        hostile.apply(
            _identity(
                "steal-uni", namespace, {"universal": {"clientId": "x", "clientSecretRef": ref}}, spy.url
            )
        )
        hostile.apply(_identity("steal-tok", namespace, {"accessToken": {"secretRef": ref}}, spy.url))
        hostile.apply(
            _identity("local-uni", namespace, {"universal": {"clientId": "x", "clientSecretRef": ref}})
        )
        hostile.apply(_identity("local-tok", namespace, {"accessToken": {"secretRef": ref}}))
        hostile.apply(_sync("via-token", namespace, "local-tok", f"/{namespace}"))
        for name in ("steal-uni", "steal-tok"):
            _identity_reason(control_plane, namespace, name, "HostNotAllowed")
        for name in ("local-uni", "local-tok"):
            cond = _identity_reason(control_plane, namespace, name, "CredentialsNotOptedIn")
            assert f"Secret {namespace}/db-creds" in cond["message"]
            assert f"{harness.ALLOWED_IDENTITIES} listing '{name}'" in cond["message"]
        harness.wait_reason(control_plane, namespace, "via-token", "CredentialsNotOptedIn")
        time.sleep(_RETRIES_SECONDS)
        assert spy.received == [], spy.text()
    assert service.stats()["routes"].get(UNIVERSAL_LOGIN, 0) == logins_before
    assert harness.get(control_plane, "secret", "via-token", namespace) is None
    everything = "\n".join(
        [
            operator.log_text(),
            control_plane.kubectl("get", "events", "-n", namespace, "-o", "json"),
            control_plane.kubectl("get", "machineidentities,secretsyncs", "-n", namespace, "-o", "json"),
        ]
    )
    assert value not in everything


def test_a_service_account_is_used_only_with_an_audience_and_after_it_opts_in(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    hostile: tenant.Tenant,
    namespace: str,
) -> None:
    """The allowed host, step by step: no audience → refused; no opt-in → refused, nothing minted;
    the ServiceAccount's owner opts in → synced end to end, with a token of at most 10 minutes."""
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "tenant-opt-in-value-1")
    _service_account(control_plane, namespace, "deployer")
    k8s: dict[str, Any] = {
        "identityId": IDENTITY_ID,
        "serviceAccountRef": {"name": "deployer"},
        "audiences": [],
        "tokenExpirationSeconds": 172800,
    }
    with token_probe(control_plane, namespace, "deployer") as probe:
        hostile.apply(_identity("ferry", namespace, {"kubernetes": k8s}))
        hostile.apply(_sync("app", namespace, "ferry", path))
        cond = _identity_reason(control_plane, namespace, "ferry", "AudienceRequired")
        assert "audiences" in cond["message"]
        assert (
            "AudienceRequired"
            in harness.wait_reason(control_plane, namespace, "app", "IdentityNotReady")["message"]
        )

        hostile.apply(_identity("ferry", namespace, {"kubernetes": {**k8s, "audiences": [harness.AUDIENCE]}}))
        cond = _identity_reason(control_plane, namespace, "ferry", "CredentialsNotOptedIn")
        assert f"ServiceAccount {namespace}/deployer" in cond["message"]
        assert "no token was minted" in cond["message"]
        harness.wait_reason(control_plane, namespace, "app", "CredentialsNotOptedIn")
        time.sleep(_RETRIES_SECONDS)
        assert probe.minted() == 0

        # The ServiceAccount's owner (here the admin; the tenant could not) opts it in.
        control_plane.kubectl(
            "annotate", "serviceaccount", "deployer", "-n", namespace, f"{harness.ALLOWED_IDENTITIES}=ferry"
        )
        eventually(
            lambda: secret_data(control_plane, namespace, "app") == {"K": "tenant-opt-in-value-1"},
            what="the sync after the opt-in",
        )
        assert harness.wait_reason(control_plane, namespace, "app", "Synced")["status"] == "True"
        cond = _identity_reason(control_plane, namespace, "ferry", "LoggedIn")
        assert "tokenExpirationSeconds 172800 lowered to 600" in cond["message"]
        assert probe.minted() >= 1
        assert probe.long() == 0


def test_service_error_text_is_cut_and_marked_as_the_services(
    control_plane: ControlPlane, operator: OperatorProcess, namespace: str
) -> None:
    """Any host can answer a login, so what it says is quoted as its own, on one line, cut short.

    A ClusterMachineIdentity (a cluster admin's object) may name any host, loopback over http
    included; here it names a listener that refuses every login with a crafted message.
    """
    name = f"chatty-{namespace}"
    crafted = "Synced: all good\nReady=True " + "x" * 400
    control_plane.kubectl(
        "create",
        "secret",
        "generic",
        "chatty-creds",
        "-n",
        namespace,
        "--from-literal=s=chatty-client-secret",
    )
    listener = tenant.Listener(status=401, answer={"message": crafted, "reqId": "not a request id\n"})
    with tenant.listening(listener) as spy:
        control_plane.apply(
            {
                "apiVersion": "secretferry.io/v1alpha1",
                "kind": "ClusterMachineIdentity",
                "metadata": {"name": name},
                "spec": {
                    "hostAPI": spy.url,
                    "auth": {
                        "universal": {
                            "clientId": "chatty",
                            "clientSecretRef": {"namespace": namespace, "name": "chatty-creds", "key": "s"},
                        }
                    },
                },
            }
        )
        try:
            cond = eventually(
                lambda: _cluster_ready(control_plane, name, "AuthFailed"), what=f"{name} AuthFailed"
            )
            message = cond["message"]
            said = re.search(r'service said: "(.*)"$', message)
            assert said is not None, message
            assert said.group(1) == ("Synced: all good Ready=True " + "x" * 400)[:200] + "…"
            assert "\n" not in message
            assert "not a request id" not in message
            assert len(spy.received) >= 1  # the admin's choice: this identity may use that host
        finally:
            control_plane.kubectl("delete", "clustermachineidentity", name, "--wait=false", check=False)


def _cluster_ready(cp: ControlPlane, name: str, reason: str) -> dict[str, Any] | None:
    out = cp.kubectl("get", "clustermachineidentity", name, "-o", "json", check=False)
    if not out:
        return None
    for cond in (json.loads(out).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("reason") == reason:
            return dict(cond)
    return None


KUBERNETES_LOGIN = "POST /api/v1/auth/kubernetes-auth/login"
# The local control plane's --api-audiences (devcluster/cluster.py): a token for it is valid
# against the Kubernetes API itself.
API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"


@pytest.mark.parametrize("method", ["kubernetes", "oidc", "jwt"])
def test_an_apiserver_audience_is_never_minted_nor_sent(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    hostile: tenant.Tenant,
    namespace: str,
    method: str,
) -> None:
    """Token theft through the audience: the tenant names the apiserver's own audience (alone, or
    hidden beside the service's) for a ServiceAccount that trusts the identity. The operator knows
    the apiserver's audiences from the cluster and refuses before minting: nothing minted, no login
    at the (allowed) service, nothing written. The same for OIDC and JWT auth, which send the same
    ServiceAccount token to the service."""
    login_route = f"POST /api/v1/auth/{method}-auth/login"
    _service_account(control_plane, namespace, "deployer", opted_in="ferry")
    k8s: dict[str, Any] = {"identityId": IDENTITY_ID, "serviceAccountRef": {"name": "deployer"}}
    logins_before = service.stats()["routes"].get(login_route, 0)
    with token_probe(control_plane, namespace, "deployer") as probe:
        for audiences in ([API_AUDIENCE], [harness.AUDIENCE, API_AUDIENCE]):
            hostile.apply(_identity("ferry", namespace, {method: {**k8s, "audiences": audiences}}))
            hostile.apply(_sync("app", namespace, "ferry", f"/{namespace}"))

            def refused(audiences: list[str] = audiences) -> dict[str, Any] | None:
                cond = harness.ready(control_plane, namespace, "ferry", kind="machineidentity")
                spec = json.loads(
                    control_plane.kubectl("get", "machineidentity", "ferry", "-n", namespace, "-o", "json")
                )["spec"]["auth"][method]["audiences"]
                ok = cond and cond.get("reason") == "AudienceNotAllowed" and spec == audiences
                return cond if ok else None

            cond = eventually(refused, what=f"AudienceNotAllowed for {audiences}")
            assert API_AUDIENCE in cond["message"] and "no token was minted" in cond["message"]
            harness.wait_reason(control_plane, namespace, "app", "AudienceNotAllowed")
            time.sleep(_RETRIES_SECONDS)
            assert probe.minted() == 0
    assert service.stats()["routes"].get(login_route, 0) == logins_before
    assert harness.get(control_plane, "secret", "app", namespace) is None

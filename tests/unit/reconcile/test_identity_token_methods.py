"""OIDC and JWT auth: the same TokenRequest, opt-in and audience rules as Kubernetes auth.

Both methods send a freshly minted ServiceAccount token to the service, which verifies it against
the cluster's public keys. The token is as good as a Kubernetes-auth one against the apiserver if
its audience is the apiserver's own, so the rules that keep a tenant from exporting such a token
must hold for every method that mints one. The service is never reached here (see
``test_identities``); what was minted and refused is read from the fake apiserver's calls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from reconcile_fakes import API_AUDIENCES, FakeApiserver, FakeKube

from secretferry import settings as settings_mod
from secretferry.models import identity as identity_models
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import reasons, tenancy

HOST = "https://service.example"
SETTINGS = settings_mod.Settings(default_host_api=HOST)
PROBE = f"/api/v1/namespaces/{SETTINGS.namespace}/serviceaccounts/default/token"
API_AUD = API_AUDIENCES[0]
METHODS = ("oidc", "jwt")


class World:
    def __init__(self) -> None:
        self.apiserver = FakeApiserver()
        self.kube = FakeKube(self.apiserver.answer)
        self.registry = ident_mod.IdentityRegistry(kube=self.kube.port(), settings=SETTINGS)

    def token_requests(self) -> list[str]:
        return [p for m, p, _ in self.kube.calls if m == "POST" and p.endswith("/token") and p != PROBE]

    def put_service_account(self, namespace: str, name: str, *, allowed: str | None = None) -> None:
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if allowed is not None:
            meta["annotations"] = {tenancy.ALLOWED_IDENTITIES_ANNOTATION: allowed}
        self.apiserver.put(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}", {"metadata": meta})


@pytest.fixture
async def world() -> AsyncIterator[World]:
    made = World()
    yield made
    await made.registry.close()


def _body(kind: str, auth: dict[str, Any]) -> dict[str, Any]:
    cluster = kind == ident_mod.CLUSTER
    meta: dict[str, Any] = {"name": "id", "generation": 1, "uid": "uid-id"}
    if not cluster:
        meta["namespace"] = "team-a"
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "ClusterMachineIdentity" if cluster else "MachineIdentity",
        "metadata": meta,
        "spec": {"auth": auth},
    }


def _auth(method: str, *, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": "robot"}
    if namespace is not None:
        ref["namespace"] = namespace
    return {method: {"identityId": "i", "serviceAccountRef": ref, **extra}}


@pytest.mark.parametrize("method", METHODS)
def test_the_models_accept_each_method_alone(method: str) -> None:
    spec = identity_models.MachineIdentitySpec.model_validate({"auth": _auth(method, audiences=["svc"])})
    assert spec.auth.method == method
    assert spec.auth.token_auth is not None and spec.auth.token_auth.audiences == ["svc"]
    with pytest.raises(ValueError, match=r"set exactly one of auth\.kubernetes, auth\.oidc, auth\.jwt"):
        identity_models.MachineIdentitySpec.model_validate({"auth": {**_auth(method), **_auth("kubernetes")}})


@pytest.mark.parametrize("method", METHODS)
def test_a_namespaced_identity_needs_an_audience_and_minting_allowed(method: str) -> None:
    spec = identity_models.MachineIdentitySpec.model_validate({"auth": _auth(method)})
    policy = tenancy.HostPolicy.from_settings(SETTINGS)
    refusal = tenancy.check_identity(spec, namespaced=True, policy=policy)
    assert refusal is not None and refusal.reason == reasons.AUDIENCE_REQUIRED
    assert f"spec.auth.{method}.audiences" in refusal.message

    off = tenancy.HostPolicy.from_settings(
        settings_mod.Settings(default_host_api=HOST, token_requests_enabled=False)
    )
    refusal = tenancy.check_identity(spec, namespaced=True, policy=off)
    assert refusal is not None and refusal.reason == reasons.TOKEN_REQUESTS_DISABLED
    assert f"spec.auth.{method} needs a ServiceAccount token" in refusal.message


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    ("kind", "extra", "refused"),
    [
        (ident_mod.MACHINE, {"audiences": [API_AUD]}, True),
        (ident_mod.MACHINE, {"audiences": ["service", API_AUD]}, True),
        (ident_mod.MACHINE, {"audiences": [API_AUD], "allowAPIServerAudience": True}, True),
        (ident_mod.MACHINE, {"audiences": ["service"]}, False),
        (ident_mod.CLUSTER, {"audiences": []}, True),
        (ident_mod.CLUSTER, {"audiences": [API_AUD], "allowAPIServerAudience": True}, False),
    ],
    ids=["ns-api", "ns-mixed", "ns-api-allowed", "ns-service", "cl-empty", "cl-api-allowed"],
)
async def test_a_token_the_apiserver_accepts_is_never_minted(
    world: World, method: str, kind: str, extra: dict[str, Any], refused: bool
) -> None:
    world.put_service_account("team-a", "robot", allowed="id")
    world.put_service_account("ops", "robot")
    namespace = "ops" if kind == ident_mod.CLUSTER else None
    entry = world.registry.upsert(kind, _body(kind, _auth(method, namespace=namespace, **extra)))
    session = await world.registry.session(entry)
    assert f", {method}," in repr(session)  # the method's own credentials, hence its own login route

    with pytest.raises(Exception) as info:  # the fake service host does not answer: a login error
        await session.token()

    if refused:
        assert getattr(info.value, "reason", None) == reasons.AUDIENCE_NOT_ALLOWED, repr(info.value)
        assert f"spec.auth.{method}.audiences" in str(info.value) or "empty audiences" in str(info.value)
        assert world.token_requests() == []
    else:
        assert len(world.token_requests()) == 1


@pytest.mark.parametrize("method", METHODS)
async def test_a_service_account_that_has_not_opted_in_mints_no_token(world: World, method: str) -> None:
    world.put_service_account("team-a", "robot", allowed="someone-else")
    entry = world.registry.upsert(ident_mod.MACHINE, _body(ident_mod.MACHINE, _auth(method, audiences=["s"])))
    session = await world.registry.session(entry)

    with pytest.raises(Exception) as info:
        await session.token()

    assert getattr(info.value, "reason", None) == reasons.CREDENTIALS_NOT_OPTED_IN
    assert world.token_requests() == []

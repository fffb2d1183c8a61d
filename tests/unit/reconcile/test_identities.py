"""The identity registry: which identity a SecretSync may use, what it may read, one session each.

No apiserver: a ``FakeApiserver`` behind a ``FakeKube`` holds the Secrets, ServiceAccounts and
Namespaces, and the calls it records show what was (not) read or minted. The service is never
reached: every session here either fails before its login sends anything, or is not used.
Problems are judged by their ``reason`` and ``message``, not by their class.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Protocol, cast

import pytest
from reconcile_fakes import API_AUDIENCES, FakeApiserver, FakeKube

from secretferry import settings as settings_mod
from secretferry.kube import errors as kube_errors
from secretferry.models import secretsync as sync_models
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import reasons, tenancy
from secretferry.reconcile.login import context as login_context
from secretferry.reconcile.login import secret_values

HOST = "https://service.example"
TOKEN_VALUE = "a-static-access-token-value"  # checked never to reach a message
ALLOWED = tenancy.ALLOWED_IDENTITIES_ANNOTATION
SETTINGS = settings_mod.Settings(default_host_api=HOST)
# Where the operator learns the apiserver's audiences: its own namespace's default ServiceAccount.
PROBE = f"/api/v1/namespaces/{SETTINGS.namespace}/serviceaccounts/default/token"


class Problem(Protocol):
    reason: str
    message: str


class World:
    def __init__(self) -> None:
        self.apiserver = FakeApiserver()
        self.kube = FakeKube(self.apiserver.answer)
        self.registry = ident_mod.IdentityRegistry(kube=self.kube.port(), settings=SETTINGS)

    def gets(self, kind: str) -> list[str]:
        """Paths of the GETs of one collection (``secrets``, ``serviceaccounts``, ``namespaces``)."""
        return [p for m, p, _ in self.kube.calls if m == "GET" and _collection(p) == kind]

    def token_requests(self) -> list[str]:
        """TokenRequests for identities' ServiceAccounts (not the operator's audience probe)."""
        return [p for m, p, _ in self.kube.calls if m == "POST" and p.endswith("/token") and p != PROBE]

    def put_secret(self, namespace: str, name: str, *, allowed: str | None = None) -> None:
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if allowed is not None:
            meta["annotations"] = {tenancy.ALLOWED_IDENTITIES_ANNOTATION: allowed}
        data = {"token": base64.b64encode(TOKEN_VALUE.encode()).decode()}
        self.apiserver.put(f"/api/v1/namespaces/{namespace}/secrets/{name}", {"metadata": meta, "data": data})

    def put_service_account(self, namespace: str, name: str, *, allowed: str | None = None) -> None:
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if allowed is not None:
            meta["annotations"] = {tenancy.ALLOWED_IDENTITIES_ANNOTATION: allowed}
        self.apiserver.put(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}", {"metadata": meta})

    def put_namespace(self, name: str, labels: dict[str, str]) -> None:
        self.apiserver.put(f"/api/v1/namespaces/{name}", {"metadata": {"name": name, "labels": labels}})


def _collection(path: str) -> str:
    parts = path.strip("/").split("/")  # api/v1/namespaces/<ns>[/<plural>/<name>]
    return parts[4] if len(parts) > 4 else parts[2]


@pytest.fixture
async def world() -> AsyncIterator[World]:
    made = World()
    yield made
    await made.registry.close()


def machine(
    name: str = "id", namespace: str = "team-a", *, generation: int = 1, **spec: Any
) -> dict[str, Any]:
    spec.setdefault("auth", {"accessToken": {"secretRef": {"name": "creds", "key": "token"}}})
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "generation": generation},
        "spec": spec,
    }


def cluster(name: str = "shared", *, generation: int = 1, **spec: Any) -> dict[str, Any]:
    ref = {"name": "creds", "key": "token", "namespace": "ops"}
    spec.setdefault("auth", {"accessToken": {"secretRef": ref}})
    return {"metadata": {"name": name, "uid": f"uid-{name}", "generation": generation}, "spec": spec}


def secret_sync(namespace: str, *, kind: str = "MachineIdentity", name: str = "id") -> sync_models.SecretSync:
    return sync_models.SecretSync.from_body(
        {
            "metadata": {"name": "app", "namespace": namespace, "uid": "uid-app", "generation": 1},
            "spec": {
                "identityRef": {"kind": kind, "name": name},
                "sources": [{"projectId": "p", "environment": "dev"}],
            },
        }
    )


async def raised(call: Awaitable[object]) -> Exception:
    try:
        await call
    except Exception as exc:
        return exc
    raise AssertionError("nothing was raised")


async def problem(call: Awaitable[object]) -> Problem:
    """The problem ``call`` raises (of any class carrying ``reason`` and ``message``)."""
    exc = await raised(call)
    assert hasattr(exc, "reason") and hasattr(exc, "message"), repr(exc)
    return cast(Problem, exc)


# --- isolation ----------------------------------------------------------------------------------


async def test_a_namespaced_identity_serves_only_its_own_namespace(world: World) -> None:
    entry = world.registry.upsert(ident_mod.MACHINE, machine())

    assert await world.registry.resolve(secret_sync("team-a")) is entry
    found = await problem(world.registry.resolve(secret_sync("team-b")))

    assert found.reason == reasons.IDENTITY_NOT_FOUND
    assert "'id'" in found.message and "team-b" in found.message


async def test_a_cluster_identity_is_not_found_under_the_namespaced_kind(world: World) -> None:
    world.registry.upsert(ident_mod.CLUSTER, cluster(name="id"))

    found = await problem(world.registry.resolve(secret_sync("team-a")))

    assert found.reason == reasons.IDENTITY_NOT_FOUND


@pytest.mark.parametrize(
    ("allowed", "namespace", "labels", "admitted"),
    [
        (None, "anywhere", {}, True),
        ({"names": ["team-a", "team-b"]}, "team-b", {}, True),
        ({"names": ["team-a"]}, "team-b", {}, False),
        ({"selector": {"matchLabels": {"tenant": "yes"}}}, "team-c", {"tenant": "yes"}, True),
        ({"selector": {"matchLabels": {"tenant": "yes"}}}, "team-c", {"tenant": "no"}, False),
        (
            {"selector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]}},
            "team-d",
            {"tier": "gold"},
            True,
        ),
        (
            {"names": ["team-a"], "selector": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}},
            "team-e",
            {},
            False,
        ),
    ],
)
async def test_a_cluster_identity_serves_the_namespaces_it_allows(
    world: World, allowed: dict[str, Any] | None, namespace: str, labels: dict[str, str], admitted: bool
) -> None:
    spec: dict[str, Any] = {} if allowed is None else {"allowedNamespaces": allowed}
    entry = world.registry.upsert(ident_mod.CLUSTER, cluster(**spec))
    world.put_namespace(namespace, labels)
    sync = secret_sync(namespace, kind="ClusterMachineIdentity", name="shared")

    if admitted:
        assert await world.registry.resolve(sync) is entry
    else:
        found = await problem(world.registry.resolve(sync))
        assert found.reason == reasons.IDENTITY_NOT_ALLOWED
        assert namespace in found.message and "allowedNamespaces" in found.message
    # Labels are read only when allowedNamespaces is set.
    assert world.gets("namespaces") == ([] if allowed is None else [f"/api/v1/namespaces/{namespace}"])


async def test_namespace_labels_are_read_once_for_many_resolutions(world: World) -> None:
    world.registry.upsert(
        ident_mod.CLUSTER, cluster(allowedNamespaces={"selector": {"matchLabels": {"a": "b"}}})
    )
    world.put_namespace("team-a", {"a": "b"})
    sync = secret_sync("team-a", kind="ClusterMachineIdentity", name="shared")

    for _ in range(5):
        await world.registry.resolve(sync)

    assert len(world.gets("namespaces")) == 1


async def test_an_identity_with_an_invalid_spec_is_not_ready(world: World) -> None:
    entry = world.registry.upsert(ident_mod.MACHINE, machine(auth={}))
    assert entry.model is None

    found = await problem(world.registry.resolve(secret_sync("team-a")))

    assert found.reason == reasons.IDENTITY_NOT_READY
    assert "invalid spec" in found.message and "spec.auth" in found.message


# --- refusals: nothing read, minted or sent ------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "body", "refusal"),
    [
        (ident_mod.MACHINE, machine(hostAPI="https://elsewhere.example"), reasons.HOST_NOT_ALLOWED),
        (ident_mod.CLUSTER, cluster(hostAPI="http://plain.example"), reasons.HOST_NOT_ALLOWED),
        (
            ident_mod.MACHINE,
            machine(auth={"kubernetes": {"identityId": "i", "serviceAccountRef": {"name": "robot"}}}),
            reasons.AUDIENCE_REQUIRED,
        ),
    ],
    ids=["namespaced-foreign-host", "cluster-plain-http", "namespaced-no-audience"],
)
async def test_a_refused_identity_is_refused_before_anything_is_read(
    world: World, kind: str, body: dict[str, Any], refusal: str
) -> None:
    world.put_secret("team-a", "creds", allowed="id")
    world.put_secret("ops", "creds")
    world.put_service_account("team-a", "robot", allowed="id")
    entry = world.registry.upsert(kind, body)
    sync = secret_sync("team-a", kind=kind, name=entry.key[2])

    resolved = await problem(world.registry.resolve(sync))
    refused = await problem(world.registry.session(entry))

    assert resolved.reason == reasons.IDENTITY_NOT_READY
    assert refusal in resolved.message
    assert refused.reason == refusal
    assert "nothing was sent" in refused.message or "no token was minted" in refused.message
    assert world.kube.calls == []  # not a Secret, not a ServiceAccount, not a token
    assert entry.session is None


# --- opt-in of the credentials a namespaced identity uses -----------------------------------------


@pytest.mark.parametrize("allowed", [None, "other", "other,ids", "*"])
async def test_a_secret_that_has_not_opted_in_is_not_read_by_a_namespaced_identity(
    world: World, allowed: str | None
) -> None:
    world.put_secret("team-a", "creds", allowed=allowed)
    entry = world.registry.upsert(ident_mod.MACHINE, machine())

    found = await problem(world.registry.session(entry))

    assert found.reason == reasons.CREDENTIALS_NOT_OPTED_IN
    assert "Secret team-a/creds" in found.message
    assert TOKEN_VALUE not in found.message
    assert entry.session is None


@pytest.mark.parametrize("allowed", ["id", "other, id", " id "])
async def test_a_secret_that_opted_in_gives_a_namespaced_identity_its_session(
    world: World, allowed: str
) -> None:
    world.put_secret("team-a", "creds", allowed=allowed)
    entry = world.registry.upsert(ident_mod.MACHINE, machine())

    session = await world.registry.session(entry)

    assert entry.session is session
    assert world.gets("secrets") == ["/api/v1/namespaces/team-a/secrets/creds"]


async def test_a_cluster_identity_reads_its_secret_without_an_opt_in(world: World) -> None:
    world.put_secret("ops", "creds")
    entry = world.registry.upsert(ident_mod.CLUSTER, cluster())

    assert await world.registry.session(entry) is entry.session
    assert world.gets("secrets") == ["/api/v1/namespaces/ops/secrets/creds"]


async def test_a_missing_secret_reads_as_not_opted_in_and_a_missing_key_as_not_found(world: World) -> None:
    """For a namespaced identity a missing Secret is refused in the very words of one that did
    not opt in: a tenant cannot probe which Secret names exist. A key missing from a Secret that
    opted in is CredentialsNotFound (its owner consented; the key names help fix the reference)."""
    missing = world.registry.upsert(ident_mod.MACHINE, machine())
    found = await problem(world.registry.session(missing))
    world.put_secret("team-a", "creds", allowed="someone-else")
    unopted = world.registry.upsert(ident_mod.MACHINE, machine(generation=2))
    not_opted = await problem(world.registry.session(unopted))
    assert found.reason == not_opted.reason == reasons.CREDENTIALS_NOT_OPTED_IN
    assert found.message == not_opted.message
    assert "team-a/creds" in found.message

    world.put_secret("team-a", "creds", allowed="other-key")
    no_key = world.registry.upsert(
        ident_mod.MACHINE,
        machine("other-key", auth={"accessToken": {"secretRef": {"name": "creds", "key": "x"}}}),
    )
    found = await problem(world.registry.session(no_key))
    assert found.reason == reasons.CREDENTIALS_NOT_FOUND
    assert "'x'" in found.message and TOKEN_VALUE not in found.message


def _kubernetes(**extra: Any) -> dict[str, Any]:
    auth = {"identityId": "i", "serviceAccountRef": {"name": "robot"}, "audiences": ["service"], **extra}
    return {"kubernetes": auth}


async def test_a_service_account_that_has_not_opted_in_mints_no_token(world: World) -> None:
    world.put_service_account("team-a", "robot", allowed="someone-else")
    entry = world.registry.upsert(ident_mod.MACHINE, machine(auth=_kubernetes()))
    session = await world.registry.session(entry)  # built without reading anything: minting is per login
    assert world.kube.calls == []

    found = await problem(session.token())

    assert found.reason == reasons.CREDENTIALS_NOT_OPTED_IN
    assert "ServiceAccount team-a/robot" in found.message
    assert world.gets("serviceaccounts") == ["/api/v1/namespaces/team-a/serviceaccounts/robot"]
    assert world.token_requests() == []


async def test_a_service_account_that_opted_in_is_asked_for_a_token_at_login(world: World) -> None:
    world.put_service_account("team-a", "robot", allowed="id")
    token_path = "/api/v1/namespaces/team-a/serviceaccounts/robot/token"
    world.apiserver.faults[("POST", token_path)] = kube_errors.Forbidden(403, "Forbidden", "no RBAC")
    entry = world.registry.upsert(ident_mod.MACHINE, machine(auth=_kubernetes()))
    session = await world.registry.session(entry)

    found = await problem(session.token())

    assert world.token_requests() == [token_path]
    assert found.reason == reasons.CREDENTIALS_NOT_FOUND
    assert "TokenRequest" in found.message


# --- sessions across identity changes --------------------------------------------------------------


async def test_a_status_only_change_keeps_the_session_and_a_new_generation_drops_it(world: World) -> None:
    world.put_secret("team-a", "creds", allowed="id")
    entry = world.registry.upsert(ident_mod.MACHINE, machine())
    first = await world.registry.session(entry)

    same = world.registry.upsert(ident_mod.MACHINE, machine())  # our own status patch echoing back
    assert same is entry
    assert await world.registry.session(same) is first
    assert len(world.gets("secrets")) == 1

    changed = world.registry.upsert(ident_mod.MACHINE, machine(generation=2))
    assert changed is not entry and changed.session is None
    second = await world.registry.session(changed)
    assert second is not first
    assert len(world.gets("secrets")) == 2  # the credentials are read again: they may differ
    assert "retired" in str(await raised(first.token()))  # the old session logs in no more


async def test_a_removed_identity_is_not_found_and_its_session_retired(world: World) -> None:
    world.put_secret("team-a", "creds", allowed="id")
    entry = world.registry.upsert(ident_mod.MACHINE, machine())
    session = await world.registry.session(entry)

    world.registry.remove(ident_mod.MACHINE, "team-a", "id")

    assert (await problem(world.registry.resolve(secret_sync("team-a")))).reason == reasons.IDENTITY_NOT_FOUND
    assert "retired" in str(await raised(session.token()))


# --- what the watches report (identity_intake.py) --------------------------------------------------


async def test_watched_namespace_labels_take_effect_at_once(world: World) -> None:
    """Once the namespace watch listed, its labels decide (no GET, no 30 s cache): a label
    removed refuses the namespace at the next resolution, a label added admits it."""
    world.registry.upsert(
        ident_mod.CLUSTER, cluster(allowedNamespaces={"selector": {"matchLabels": {"tenant": "yes"}}})
    )
    sync = secret_sync("team-a", kind="ClusterMachineIdentity", name="shared")
    assert world.registry.namespaces.seen("team-a", {"tenant": "yes"}) is False  # first sight: no change
    world.registry.namespaces.listed({"team-a"})
    await world.registry.resolve(sync)

    assert world.registry.namespaces.seen("team-a", {}) is True
    found = await problem(world.registry.resolve(sync))
    assert found.reason == reasons.IDENTITY_NOT_ALLOWED
    assert world.registry.namespaces.seen("team-a", {"tenant": "yes"}) is True
    await world.registry.resolve(sync)
    assert world.registry.namespaces.seen("team-a", {"tenant": "yes"}) is False  # unchanged
    assert world.gets("namespaces") == []


async def test_a_namespace_the_watch_has_not_delivered_is_read_once(world: World) -> None:
    world.registry.upsert(
        ident_mod.CLUSTER, cluster(allowedNamespaces={"selector": {"matchLabels": {"a": "b"}}})
    )
    world.registry.namespaces.listed(set())
    world.put_namespace("new", {"a": "b"})
    await world.registry.resolve(secret_sync("new", kind="ClusterMachineIdentity", name="shared"))
    assert world.gets("namespaces") == ["/api/v1/namespaces/new"]


async def test_consent_taken_back_drops_the_session_and_refuses_until_it_is_given_again(world: World) -> None:
    world.put_secret("team-a", "creds", allowed="id")
    entry = world.registry.upsert(ident_mod.MACHINE, machine())
    session = await world.registry.session(entry)
    assert world.registry.consent_seen("Secret", "team-a", "creds", {ALLOWED: "id"}) == ([], [])

    # Other objects, other namespaces, other identities' names: no effect.
    assert world.registry.consent_seen("Secret", "team-a", "unrelated", None) == ([], [])
    assert world.registry.consent_seen("Secret", "team-b", "creds", None) == ([], [])
    assert world.registry.consent_seen("ServiceAccount", "team-a", "creds", None) == ([], [])
    assert entry.session is session

    lost, back = world.registry.consent_seen("Secret", "team-a", "creds", {ALLOWED: "other"})
    assert (lost, back) == ([entry], [])
    assert entry.session is None
    assert "retired" in str(await raised(session.token()))
    refused = await problem(world.registry.session(entry))
    assert refused.reason == reasons.CREDENTIALS_NOT_OPTED_IN
    in_sync = await problem(world.registry.resolve(secret_sync("team-a")))
    assert (
        in_sync.reason == reasons.IDENTITY_NOT_READY and reasons.CREDENTIALS_NOT_OPTED_IN in in_sync.message
    )
    assert world.registry.consent_seen("Secret", "team-a", "creds", {ALLOWED: "x"}) == ([], [])  # still no

    lost, back = world.registry.consent_seen("Secret", "team-a", "creds", {ALLOWED: "other, id"})
    assert (lost, back) == ([], [entry])
    assert await world.registry.resolve(secret_sync("team-a")) is entry
    assert await world.registry.session(entry) is entry.session

    # Deleted is consent gone too.
    assert world.registry.consent_seen("Secret", "team-a", "creds", None) == ([entry], [])


async def test_consent_given_after_a_failed_login_is_news(world: World) -> None:
    """An identity whose login failed for want of an opt-in logs in again when the watch sees it."""
    entry = world.registry.upsert(ident_mod.MACHINE, machine(auth=_kubernetes()))
    entry.reported = ("False", reasons.CREDENTIALS_NOT_OPTED_IN, "", "")
    assert world.registry.consent_seen("ServiceAccount", "team-a", "robot", {ALLOWED: "id"}) == ([], [entry])
    cluster_entry = world.registry.upsert(ident_mod.CLUSTER, cluster())
    cluster_entry.reported = ("False", reasons.CREDENTIALS_NOT_FOUND, "", "")
    # A cluster identity needs no opt-in: the watch is not about it.
    assert world.registry.consent_seen("Secret", "ops", "creds", None) == ([], [])


async def test_a_missing_service_account_reads_as_not_opted_in(world: World) -> None:
    world.put_service_account("team-a", "robot", allowed="someone-else")
    unopted = world.registry.upsert(ident_mod.MACHINE, machine(auth=_kubernetes()))
    not_opted = await problem((await world.registry.session(unopted)).token())
    missing = world.registry.upsert(
        ident_mod.MACHINE,
        machine(
            auth={"kubernetes": {**_kubernetes()["kubernetes"], "serviceAccountRef": {"name": "ghost"}}},
            generation=2,
        ),
    )
    found = await problem((await world.registry.session(missing)).token())
    assert found.reason == not_opted.reason == reasons.CREDENTIALS_NOT_OPTED_IN
    assert found.message.replace("ghost", "robot") == not_opted.message


# --- the apiserver's own audiences ------------------------------------------------------------------

API_AUD = API_AUDIENCES[0]


@pytest.mark.parametrize(
    ("kind", "k8s", "refused"),
    [
        (ident_mod.MACHINE, {"audiences": [API_AUD]}, True),
        (ident_mod.MACHINE, {"audiences": ["service", API_AUD]}, True),  # one is enough
        (ident_mod.MACHINE, {"audiences": ["service"]}, False),
        # Not a field of the namespaced kind: a tenant who writes it gains nothing.
        (ident_mod.MACHINE, {"audiences": [API_AUD], "allowAPIServerAudience": True}, True),
        (ident_mod.CLUSTER, {"audiences": [API_AUD]}, True),
        (ident_mod.CLUSTER, {"audiences": []}, True),  # empty: the apiserver's own
        (ident_mod.CLUSTER, {"audiences": [], "allowAPIServerAudience": True}, False),
        (ident_mod.CLUSTER, {"audiences": [API_AUD], "allowAPIServerAudience": True}, False),
    ],
    ids=[
        "ns-api",
        "ns-mixed",
        "ns-service",
        "ns-api-allowed",
        "cl-api",
        "cl-empty",
        "cl-empty-allowed",
        "cl-api-allowed",
    ],
)
async def test_a_token_the_apiserver_accepts_is_never_minted(
    world: World, kind: str, k8s: dict[str, Any], refused: bool
) -> None:
    world.put_service_account("team-a", "robot", allowed="id")
    world.put_service_account("ops", "robot")
    auth = {"identityId": "i", "serviceAccountRef": {"name": "robot"}, **k8s}
    if kind == ident_mod.CLUSTER:
        auth["serviceAccountRef"]["namespace"] = "ops"
        entry = world.registry.upsert(kind, cluster(auth={"kubernetes": auth}))
    else:
        entry = world.registry.upsert(kind, machine(auth={"kubernetes": auth}))
    session = await world.registry.session(entry)

    found = await raised(session.token())  # the fake service host does not answer: a login error

    if refused:
        assert getattr(found, "reason", None) == reasons.AUDIENCE_NOT_ALLOWED, repr(found)
        assert API_AUD in str(found) and "no token was minted" in str(found)
        assert world.token_requests() == []
    else:
        assert len(world.token_requests()) == 1
    assert [p for m, p, _ in world.kube.calls if p == PROBE] == [PROBE]  # learnt once


async def test_the_apiserver_audiences_are_learnt_once_and_unknown_means_nothing_minted(world: World) -> None:
    world.put_service_account("team-a", "robot", allowed="id")
    world.apiserver.faults[("POST", PROBE)] = kube_errors.Forbidden(403, "Forbidden", "no RBAC")
    entry = world.registry.upsert(ident_mod.MACHINE, machine(auth=_kubernetes()))
    session = await world.registry.session(entry)

    found = await problem(session.token())
    assert found.reason == reasons.KUBERNETES_ERROR and "no token was minted" in found.message
    assert world.token_requests() == []

    for _ in range(3):
        await raised(session.token())
    assert [p for m, p, _ in world.kube.calls if p == PROBE] == [PROBE, PROBE]  # learnt, then cached
    assert len(world.token_requests()) >= 1


# --- CA bundles (spec.tls.caSecretRef) -----------------------------------------------------------


def _ca_pems() -> tuple[str, str]:
    """Two real CA certificates (certifi's first two roots): each loads as a CA bundle."""
    import certifi

    end = "-----END CERTIFICATE-----"
    certs = [c.strip() + "\n" + end + "\n" for c in certifi.contents().split(end) if "BEGIN" in c]
    return certs[0][certs[0].index("-----BEGIN") :], certs[1][certs[1].index("-----BEGIN") :]


def _put_ca(world: World, pem: str) -> str:
    """The CA Secret (opted in to identity ``id``); returns its resourceVersion as stored."""
    path = "/api/v1/namespaces/team-a/secrets/ca"
    meta = {"name": "ca", "namespace": "team-a", "annotations": {ALLOWED: "id"}}
    world.apiserver.put(path, {"metadata": meta, "data": {"ca.crt": base64.b64encode(pem.encode()).decode()}})
    return str(world.apiserver.objects[path]["metadata"]["resourceVersion"])


async def test_a_changed_ca_secret_ends_the_session_and_the_next_one_trusts_the_new_bundle(
    world: World,
) -> None:
    old_pem, new_pem = _ca_pems()
    world.put_secret("team-a", "creds", allowed="id")
    version = _put_ca(world, old_pem)
    entry = world.registry.upsert(
        ident_mod.MACHINE, machine(tls={"caSecretRef": {"name": "ca", "key": "ca.crt"}})
    )
    first = await world.registry.session(entry)
    assert entry.ca_version == version

    # The watch's first listing, an unrelated Secret, another namespace: nothing changes.
    assert world.registry.ca_secret_seen("team-a", "ca", version) == []
    assert world.registry.ca_secret_seen("team-a", "creds", "999") == []
    assert world.registry.ca_secret_seen("team-b", "ca", "999") == []
    assert entry.session is first

    changed_version = _put_ca(world, new_pem)
    assert world.registry.ca_secret_seen("team-a", "ca", changed_version) == [entry]
    assert entry.session is None
    assert "retired" in str(await raised(first.token()))  # the old session logs in no more

    second = await world.registry.session(entry)
    assert second is not first and entry.ca_version == changed_version
    assert second._client is not first._client  # another pool: the one that trusts the new bundle
    # Deleted: the session ends too; the next one reports the missing Secret.
    assert world.registry.ca_secret_seen("team-a", "ca", None) == [entry]


async def test_an_identity_without_a_ca_secret_ignores_secret_changes(world: World) -> None:
    world.put_secret("team-a", "creds", allowed="id")
    entry = world.registry.upsert(ident_mod.MACHINE, machine())
    session = await world.registry.session(entry)
    assert world.registry.ca_secret_seen("team-a", "creds", "999") == []
    assert entry.session is session


async def test_a_ca_secret_changing_while_the_session_is_built_is_read_again(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    old_pem, new_pem = _ca_pems()
    world.put_secret("team-a", "creds", allowed="id")
    _put_ca(world, old_pem)
    entry = world.registry.upsert(
        ident_mod.MACHINE, machine(tls={"caSecretRef": {"name": "ca", "key": "ca.crt"}})
    )
    original = secret_values.read

    async def read_then_change(ctx: login_context.LoginContext, ref: Any) -> str:
        # The CA Secret was read; before the session exists, the watch sees it change.
        if ref.name == "creds" and not hasattr(read_then_change, "done"):
            read_then_change.done = True  # type: ignore[attr-defined]
            version = _put_ca(world, new_pem)
            assert world.registry.ca_secret_seen("team-a", "ca", version) == [entry]
        return await original(ctx, ref)

    # The universal login reads its client secret through secret_values (reconcile/login/).
    monkeypatch.setattr(secret_values, "read", read_then_change)
    await world.registry.session(entry)
    ca_gets = [p for p in world.gets("secrets") if p.endswith("/ca")]
    assert len(ca_gets) == 2  # read again: the session trusts the bundle the Secret holds now
    assert (
        entry.ca_version
        == world.apiserver.objects["/api/v1/namespaces/team-a/secrets/ca"]["metadata"]["resourceVersion"]
    )

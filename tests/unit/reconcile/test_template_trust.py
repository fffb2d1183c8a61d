"""Who may make the operator compute over values (``template_trust``, pure, table-driven), and the
registry's check of it (``IdentityRegistry.check_templates``) over a fake apiserver.

The premise (issue 20): a template's author can read every value its identity reads, so a
SecretSync with templates proceeds only when the identity's credential owner opted in.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest
from clock_fakes import Clock
from reconcile_fakes import FakeApiserver, FakeKube

from secretferry import settings as settings_mod
from secretferry.models import identity as identity_models
from secretferry.models import secretsync as sync_models
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import problems, reasons, template_trust, tenancy

ALLOWED = tenancy.ALLOWED_IDENTITIES_ANNOTATION
TEMPLATES = template_trust.ALLOW_TEMPLATES_ANNOTATION
TOKEN_VALUE = "a-static-access-token-value"  # checked never to reach a message


def sync_spec(target: dict[str, Any]) -> sync_models.SecretSyncSpec:
    return sync_models.SecretSyncSpec.model_validate(
        {
            "identityRef": {"name": "id"},
            "sources": [{"projectId": "p", "environment": "dev"}],
            "target": target,
        }
    )


@pytest.mark.parametrize(
    ("target", "computes"),
    [
        ({}, False),
        ({"template": {"data": {"url": "{{ A }}"}}}, True),
        ({"template": {"data": {"url": "literal"}}}, True),  # a literal is a template too: it can guess
        ({"template": {"data": {"url": "{{ A }}"}, "includeAll": True}}, True),
        ({"template": {"includeAll": True}}, False),  # every fetched key as it is: nothing runs
        # Template text from a ConfigMap or Secret is the same code: the same opt-in.
        ({"template": {"templateFrom": [{"configMap": {"name": "t"}}]}}, True),
        ({"template": {"templateFrom": [{"secret": {"name": "t"}}], "includeAll": True}}, True),
        ({"type": "kubernetes.io/basic-auth", "labels": {"a": "b"}}, False),
    ],
)
def test_only_templates_compute_over_values(target: dict[str, Any], computes: bool) -> None:
    assert template_trust.computes_over_values(sync_spec(target)) is computes


def test_key_filters_do_not_compute_over_values() -> None:
    spec = sync_models.SecretSyncSpec.model_validate(
        {
            "identityRef": {"name": "id"},
            "sources": [
                {"projectId": "p", "environment": "dev", "includeKeys": ["DB_*"], "excludeKeys": ["*_OLD"]}
            ],
        }
    )
    assert not template_trust.computes_over_values(spec)


@pytest.mark.parametrize(
    ("auth", "holder"),
    [
        (
            {"kubernetes": {"identityId": "i", "serviceAccountRef": {"name": "robot"}, "audiences": ["a"]}},
            ("ServiceAccount", "robot"),
        ),
        (
            {"universal": {"clientId": "c", "clientSecretRef": {"name": "client", "key": "k"}}},
            ("Secret", "client"),
        ),
        ({"universal": {"credentialsSecretRef": {"name": "both"}}}, ("Secret", "both")),
        ({"accessToken": {"secretRef": {"name": "token", "key": "t"}}}, ("Secret", "token")),
    ],
)
def test_the_opt_in_goes_on_the_object_holding_the_login_credential(
    auth: dict[str, Any], holder: tuple[str, str]
) -> None:
    parsed = identity_models.IdentityAuth.model_validate(auth)
    assert template_trust.credential_object(parsed) == holder


def test_a_ca_bundle_secret_is_not_the_credential_object() -> None:
    spec = identity_models.MachineIdentitySpec.model_validate(
        {
            "tls": {"caSecretRef": {"name": "ca", "key": "ca.crt"}},
            "auth": {"accessToken": {"secretRef": {"name": "token", "key": "t"}}},
        }
    )
    assert template_trust.credential_object(spec.auth) == ("Secret", "token")


MACHINE_SPEC = identity_models.MachineIdentitySpec.model_validate(
    {"auth": {"accessToken": {"secretRef": {"name": "token", "key": "t"}}}}
)


def _cluster_spec(**extra: Any) -> identity_models.ClusterMachineIdentitySpec:
    ref = {"name": "token", "key": "t", "namespace": "ops"}
    return identity_models.ClusterMachineIdentitySpec.model_validate(
        {"auth": {"accessToken": {"secretRef": ref}}, **extra}
    )


@pytest.mark.parametrize(
    ("spec", "annotations", "allowed"),
    [
        # A namespaced identity: its credential object names it, exactly.
        (MACHINE_SPEC, None, False),
        (MACHINE_SPEC, {}, False),
        (MACHINE_SPEC, {ALLOWED: "id"}, False),  # may log in; may not template
        (MACHINE_SPEC, {TEMPLATES: "id"}, True),
        (MACHINE_SPEC, {TEMPLATES: "other, id "}, True),
        (MACHINE_SPEC, {TEMPLATES: "other"}, False),
        (MACHINE_SPEC, {TEMPLATES: "true"}, False),  # no blanket value
        (MACHINE_SPEC, {TEMPLATES: "*"}, False),
        (MACHINE_SPEC, {TEMPLATES: "id-2"}, False),  # names, not prefixes
        (MACHINE_SPEC, {TEMPLATES: ""}, False),
        # A cluster identity: its spec alone, whatever any object says.
        (_cluster_spec(), None, False),
        (_cluster_spec(), {TEMPLATES: "id"}, False),
        (_cluster_spec(allowTemplates=False), None, False),
        (_cluster_spec(allowTemplates=True), None, True),
    ],
)
def test_who_may_template(
    spec: identity_models.MachineIdentitySpec, annotations: dict[str, str] | None, allowed: bool
) -> None:
    assert template_trust.allowed(spec, identity="id", annotations=annotations) is allowed


def test_allow_templates_defaults_to_false_on_a_cluster_identity() -> None:
    assert _cluster_spec().allow_templates is False


@pytest.mark.parametrize(
    ("holder", "says", "retriable"),
    [
        ("ServiceAccount team-a/robot", ["ServiceAccount team-a/robot", TEMPLATES, "'id'"], True),
        (None, ["spec.allowTemplates: true", "cluster admin"], False),
    ],
)
def test_the_refusal_names_where_the_opt_in_goes(
    holder: str | None, says: list[str], retriable: bool
) -> None:
    refusal = template_trust.refusal(kind="MachineIdentity", identity="id", holder=holder)
    assert refusal.reason == reasons.TEMPLATES_NOT_ALLOWED
    assert refusal.retriable is retriable
    assert all(text in refusal.message for text in says), refusal.message
    assert "can read them all" in refusal.message
    assert "Nothing was fetched, rendered or written" in refusal.message


# --- the registry's check --------------------------------------------------------------------------


class World:
    def __init__(self) -> None:
        self.clock = Clock()
        self.apiserver = FakeApiserver()
        self.kube = FakeKube(self.apiserver.answer)
        self.registry = ident_mod.IdentityRegistry(
            kube=self.kube.port(),
            settings=settings_mod.Settings(default_host_api="https://service.example"),
            clock=self.clock,
        )

    def annotate(self, kind: str, annotations: dict[str, str]) -> None:
        meta = {"name": "creds", "namespace": "team-a", "annotations": annotations}
        if kind == "Secret":
            data = {"token": base64.b64encode(TOKEN_VALUE.encode()).decode()}
            self.apiserver.put("/api/v1/namespaces/team-a/secrets/creds", {"metadata": meta, "data": data})
        else:
            self.apiserver.put("/api/v1/namespaces/team-a/serviceaccounts/creds", {"metadata": meta})

    def reads(self) -> int:
        return sum(1 for m, _, _ in self.kube.calls if m == "GET")


@pytest.fixture
async def world() -> AsyncIterator[World]:
    made = World()
    yield made
    await made.registry.close()


AUTHS = {
    "Secret": {"accessToken": {"secretRef": {"name": "creds", "key": "token"}}},
    "ServiceAccount": {
        "kubernetes": {"identityId": "i", "serviceAccountRef": {"name": "creds"}, "audiences": ["a"]}
    },
}
TEMPLATED = {"template": {"data": {"url": "{{ A }}"}}}


def machine(kind: str) -> dict[str, Any]:
    meta = {"name": "id", "namespace": "team-a", "uid": "uid-id", "generation": 1}
    return {"metadata": meta, "spec": {"auth": AUTHS[kind]}}


def secret_sync(target: dict[str, Any], *, identity_kind: str = "MachineIdentity") -> sync_models.SecretSync:
    return sync_models.SecretSync.from_body(
        {
            "metadata": {"name": "app", "namespace": "team-a", "uid": "uid-app", "generation": 1},
            "spec": {
                "identityRef": {"kind": identity_kind, "name": "id"},
                "sources": [{"projectId": "p", "environment": "dev"}],
                "target": target,
            },
        }
    )


async def checked(world: World, entry: ident_mod.IdentityEntry, sync: sync_models.SecretSync) -> str | None:
    """The reason ``check_templates`` refuses with, or None."""
    try:
        await world.registry.check_templates(entry, sync)
    except problems.Problem as refused:
        assert TOKEN_VALUE not in refused.message
        return refused.reason
    return None


@pytest.mark.parametrize("kind", ["Secret", "ServiceAccount"])
@pytest.mark.parametrize(
    ("annotations", "reason"),
    [
        ({}, reasons.CREDENTIALS_NOT_OPTED_IN),  # what the login would say: nothing new learnt
        ({ALLOWED: "id"}, reasons.TEMPLATES_NOT_ALLOWED),
        ({ALLOWED: "id", TEMPLATES: "true"}, reasons.TEMPLATES_NOT_ALLOWED),
        ({ALLOWED: "id", TEMPLATES: "ci, id"}, None),
    ],
)
async def test_a_namespaced_identity_templates_only_with_its_credential_owners_opt_in(
    world: World, kind: str, annotations: dict[str, str], reason: str | None
) -> None:
    world.annotate(kind, annotations)
    entry = world.registry.upsert(ident_mod.MACHINE, machine(kind))
    assert await checked(world, entry, secret_sync(TEMPLATED)) == reason


async def test_a_sync_without_templates_reads_nothing(world: World) -> None:
    entry = world.registry.upsert(ident_mod.MACHINE, machine("Secret"))
    assert await checked(world, entry, secret_sync({"template": {"includeAll": True}})) is None
    assert world.kube.calls == []


async def test_the_watch_keeps_the_opt_in_current_without_a_timer(world: World) -> None:
    """One read serves a burst of passes, however long; the watch's view replaces it, so a
    withdrawal counts from the very next pass (no 5 s grace) and a grant needs no read either."""
    world.annotate("Secret", {ALLOWED: "id", TEMPLATES: "id"})
    entry = world.registry.upsert(ident_mod.MACHINE, machine("Secret"))
    for _ in range(3):
        assert await checked(world, entry, secret_sync(TEMPLATED)) is None
        world.clock.now += 60.0  # no timer: still the one read
    assert world.reads() == 1

    withdrawn = {ALLOWED: "id"}
    world.annotate("Secret", withdrawn)
    assert world.registry.templates_seen("Secret", "team-a", "creds", withdrawn) == [entry]
    assert await checked(world, entry, secret_sync(TEMPLATED)) == reasons.TEMPLATES_NOT_ALLOWED
    granted = {ALLOWED: "id", TEMPLATES: "id"}
    world.annotate("Secret", granted)
    assert world.registry.templates_seen("Secret", "team-a", "creds", granted) == [entry]
    assert await checked(world, entry, secret_sync(TEMPLATED)) is None
    assert world.registry.templates_seen("Secret", "team-a", "unrelated", {}) == []
    assert world.registry.templates_seen("Secret", "team-a", "creds", None) == [entry]  # deleted
    assert world.reads() == 1  # every answer after the first came from the watch


async def test_a_read_overtaken_by_a_watch_event_is_not_kept(world: World) -> None:
    """A read sent before a withdrawal that the watch shows while it is under way answers that
    pass (it was sent first), but is not kept: the next pass goes by the watch."""
    world.annotate("Secret", {ALLOWED: "id", TEMPLATES: "id"})
    entry = world.registry.upsert(ident_mod.MACHINE, machine("Secret"))
    gate = asyncio.Event()
    answer = world.apiserver.answer

    async def slow(method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        await gate.wait()
        return await answer(method, path, kwargs)

    world.kube._answer = slow
    task = asyncio.create_task(checked(world, entry, secret_sync(TEMPLATED)))
    await asyncio.sleep(0)  # the read is under way
    world.registry.templates_seen("Secret", "team-a", "creds", {ALLOWED: "id"})
    gate.set()
    assert await task is None
    assert await checked(world, entry, secret_sync(TEMPLATED)) == reasons.TEMPLATES_NOT_ALLOWED
    assert world.reads() == 1


@pytest.mark.parametrize(
    ("allow", "reason"),
    [(None, reasons.TEMPLATES_NOT_ALLOWED), (False, reasons.TEMPLATES_NOT_ALLOWED), (True, None)],
)
async def test_a_cluster_identity_templates_only_with_allow_templates(
    world: World, allow: bool | None, reason: str | None
) -> None:
    spec: dict[str, Any] = {
        "auth": {"accessToken": {"secretRef": {"name": "c", "key": "t", "namespace": "ops"}}}
    }
    if allow is not None:
        spec["allowTemplates"] = allow
    entry = world.registry.upsert(
        ident_mod.CLUSTER, {"metadata": {"name": "id", "uid": "u", "generation": 1}, "spec": spec}
    )
    sync = secret_sync(TEMPLATED, identity_kind="ClusterMachineIdentity")
    assert await checked(world, entry, sync) == reason
    assert world.kube.calls == []  # decided by the spec alone

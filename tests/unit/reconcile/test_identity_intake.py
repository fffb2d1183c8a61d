"""Identities in: the start-up read of every identity, and kopf's events before and after leading.

No apiserver: a fake Kube port answers the LISTs; the work queue records what was queued.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from reconcile_fakes import FakeKube, FakeSession, FakeSessions, RecordingQueue

from secretferry import settings as settings_mod
from secretferry.kube import errors as kube_errors
from secretferry.kube import watching
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import (
    identity_intake,
    identity_status,
    reasons,
    state,
    tasks,
    template_trust,
    tenancy,
)
from secretferry.service import auth, listroutes
from secretferry.service import client as service_client

GROUP_PATH = "/apis/secretferry.io/v1alpha1"


async def _one_per_collection(method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A LIST of identities answered with one object named after the collection."""
    assert method == "GET"
    namespace = path.split("/namespaces/")[1].split("/")[0] if "/namespaces/" in path else None
    meta = {"name": "from-" + (namespace or "cluster"), "uid": path, "generation": 1}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"items": [{"metadata": meta, "spec": {}}]}


def _intake(
    kube: FakeKube, queue: RecordingQueue | None = None, syncs: dict[Any, Any] | None = None, **settings: Any
) -> tuple[identity_intake.IdentityIntake, ident_mod.IdentityRegistry]:
    cfg = settings_mod.Settings(**settings)
    registry = ident_mod.IdentityRegistry(kube=kube.port(), settings=cfg)
    status = identity_status.IdentityStatus(
        kube=kube.port(),
        identities=FakeSessions(FakeSession()).port(),
        routes=listroutes.ListRoutes(),
        background=tasks.Tasks(),
    )
    intake = identity_intake.IdentityIntake(
        kube=kube.port(),
        settings=cfg,
        identities=registry,
        syncs=syncs if syncs is not None else {},
        queue=(queue or RecordingQueue()).port(),
        status=status,
    )
    return intake, registry


async def test_start_up_reads_cluster_identities_and_those_of_each_watched_namespace() -> None:
    kube = FakeKube(_one_per_collection)
    intake, registry = _intake(kube, watch_namespaces="a,b")
    await intake.list_all()
    assert [path for _, path, _ in kube.calls] == [
        f"{GROUP_PATH}/clustermachineidentities",
        f"{GROUP_PATH}/namespaces/a/machineidentities",
        f"{GROUP_PATH}/namespaces/b/machineidentities",
    ]
    assert registry.get((ident_mod.CLUSTER, "", "from-cluster")) is not None
    assert registry.get((ident_mod.MACHINE, "a", "from-a")) is not None
    assert registry.get((ident_mod.MACHINE, "b", "from-b")) is not None


async def test_start_up_reads_machine_identities_cluster_wide_when_serving_every_namespace() -> None:
    kube = FakeKube(_one_per_collection)
    await _intake(kube)[0].list_all()
    assert [path for _, path, _ in kube.calls] == [
        f"{GROUP_PATH}/clustermachineidentities",
        f"{GROUP_PATH}/machineidentities",
    ]


@pytest.mark.looptime
async def test_a_listing_the_apiserver_refuses_is_retried_with_growing_waits_then_left_to_kopf() -> None:
    async def cluster_list_fails(method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/clustermachineidentities"):
            raise kube_errors.Unavailable(503, "ServiceUnavailable", "storage is (re)initializing")
        return await _one_per_collection(method, path, kwargs)

    kube = FakeKube(cluster_list_fails)
    intake, registry = _intake(kube)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await intake.list_all()

    paths = [path for _, path, _ in kube.calls]
    assert paths.count(f"{GROUP_PATH}/clustermachineidentities") == 10
    # Ceilings 0.5, 1, 2, 4, then capped at 5 s: 7.5 + 6 * 5 = 37.5 s at most; equal jitter
    # waits at least half of each ceiling.
    assert 37.5 / 2 <= loop.time() - started <= 37.5
    assert paths[-1] == f"{GROUP_PATH}/machineidentities"  # the other collections are still read
    assert registry.get((ident_mod.MACHINE, "", "from-cluster")) is not None


def _sync_entry(name: str, identity: str) -> state.SyncEntry:
    body = {"spec": {"identityRef": {"kind": ident_mod.MACHINE, "name": identity}}}
    return state.SyncEntry(key=("ns", name), uid=name, generation=1, body=body, status={})


def _identity_body(name: str, generation: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": generation}}


async def test_a_standby_replica_only_keeps_its_registry_current() -> None:
    kube, queue = FakeKube(), RecordingQueue()
    syncs = {("ns", "app"): _sync_entry("app", "id")}
    intake, registry = _intake(kube, queue, syncs)

    intake.event(ident_mod.MACHINE, "ADDED", _identity_body("id"))

    assert registry.get((ident_mod.MACHINE, "ns", "id")) is not None
    assert queue.queued == {}
    assert kube.calls == []  # no login check, no status


@pytest.mark.looptime
async def test_the_leader_logs_a_new_identity_in_and_queues_the_secretsyncs_naming_it_as_backlog() -> None:
    kube, queue = FakeKube(), RecordingQueue()
    syncs = {("ns", "app"): _sync_entry("app", "id"), ("ns", "other"): _sync_entry("other", "someone-else")}
    intake, _ = _intake(kube, queue, syncs)
    intake.take_over()

    intake.event(ident_mod.MACHINE, "ADDED", _identity_body("id"))
    await asyncio.sleep(1)  # virtual: the login check runs in its own task

    assert queue.queued == {("ns", "app"): False}
    ((method, path, _),) = kube.calls
    assert (method, path) == ("PATCH", f"{GROUP_PATH}/namespaces/ns/machineidentities/id/status")


async def test_the_leader_ignores_an_identity_event_that_changes_no_generation() -> None:
    kube, queue = FakeKube(), RecordingQueue()
    syncs = {("ns", "app"): _sync_entry("app", "id")}
    intake, _ = _intake(kube, queue, syncs)
    intake.event(ident_mod.MACHINE, "ADDED", _identity_body("id"))  # while standby
    intake.take_over()

    intake.event(ident_mod.MACHINE, "MODIFIED", _identity_body("id"))  # a status echo

    assert queue.queued == {}


def _cluster_sync(namespace: str, name: str) -> state.SyncEntry:
    body = {"spec": {"identityRef": {"kind": ident_mod.CLUSTER, "name": "shared"}}}
    return state.SyncEntry(key=(namespace, name), uid=name, generation=1, body=body, status={})


def _namespace(event_type: str, name: str, labels: dict[str, str]) -> watching.WatchEvent:
    return watching.WatchEvent(event_type, {"metadata": {"name": name, "labels": labels}})  # type: ignore[arg-type]


async def test_a_namespace_label_change_requeues_its_cluster_identity_users_at_once() -> None:
    kube, queue = FakeKube(), RecordingQueue()
    syncs = {
        ("team-a", "shared-user"): _cluster_sync("team-a", "shared-user"),
        ("team-a", "own-identity"): _sync_entry("own-identity", "id"),
        ("team-b", "elsewhere"): _cluster_sync("team-b", "elsewhere"),
    }
    syncs[("team-a", "own-identity")].key = ("team-a", "own-identity")
    intake, _ = _intake(kube, queue, syncs)
    intake.take_over()
    seen: set[str] = set()
    for name in ("team-a", "team-b"):
        intake.namespace_event(_namespace("ADDED", name, {"tenant": "yes"}), seen)
    intake.namespace_event(watching.WatchEvent("SYNCED", {}), seen)
    assert queue.queued == {}  # the first listing is no change

    intake.namespace_event(_namespace("MODIFIED", "team-a", {}), seen)  # the label removed
    assert queue.queued == {("team-a", "shared-user"): True}
    intake.namespace_event(_namespace("MODIFIED", "team-b", {"tenant": "yes"}), seen)  # no change
    assert queue.queued == {("team-a", "shared-user"): True}


@pytest.mark.looptime
async def test_consent_taken_back_reports_the_identity_and_requeues_its_secretsyncs() -> None:
    kube, queue = FakeKube(), RecordingQueue()
    syncs = {("ns", "app"): _sync_entry("app", "id"), ("ns", "other"): _sync_entry("other", "someone-else")}
    intake, registry = _intake(kube, queue, syncs)
    body = _identity_body("id") | {
        "spec": {"auth": {"accessToken": {"secretRef": {"name": "creds", "key": "token"}}}}
    }
    intake.event(ident_mod.MACHINE, "ADDED", body)  # while standby: no check
    intake.take_over()
    annotation = tenancy.ALLOWED_IDENTITIES_ANNOTATION

    intake.consent_seen("Secret", "ns", "creds", {annotation: "id"})
    assert queue.queued == {}
    intake.consent_seen("Secret", "ns", "creds", {})
    await asyncio.sleep(1)  # virtual: the status check runs in its own task
    assert queue.queued == {("ns", "app"): True}
    entry = registry.get((ident_mod.MACHINE, "ns", "id"))
    assert (
        entry is not None and reasons.CREDENTIALS_NOT_OPTED_IN in entry.withdrawn[("Secret", "creds")].reason
    )
    ((method, path, kwargs),) = kube.calls
    assert (method, path) == ("PATCH", f"{GROUP_PATH}/namespaces/ns/machineidentities/id/status")
    assert kwargs["body"]["status"]["conditions"][0]["reason"] == reasons.CREDENTIALS_NOT_OPTED_IN


@pytest.mark.looptime
async def test_the_allow_templates_opt_in_taken_back_requeues_its_secretsyncs_at_once() -> None:
    """Consent to log in stays; only the template opt-in goes: the identity's SecretSyncs pass
    again now (and are refused TemplatesNotAllowed then), not at their next resync."""
    kube, queue = FakeKube(), RecordingQueue()
    syncs = {("ns", "app"): _sync_entry("app", "id"), ("ns", "other"): _sync_entry("other", "someone-else")}
    intake, registry = _intake(kube, queue, syncs)
    body = _identity_body("id") | {
        "spec": {"auth": {"accessToken": {"secretRef": {"name": "creds", "key": "token"}}}}
    }
    intake.event(ident_mod.MACHINE, "ADDED", body)
    intake.take_over()
    allowed = {tenancy.ALLOWED_IDENTITIES_ANNOTATION: "id"}
    templates = {template_trust.ALLOW_TEMPLATES_ANNOTATION: "id"}

    intake.consent_seen("Secret", "ns", "creds", allowed | templates)
    assert queue.queued == {}  # the first sight is no change
    intake.consent_seen("Secret", "ns", "creds", allowed)
    assert queue.queued == {("ns", "app"): True}
    entry = registry.get((ident_mod.MACHINE, "ns", "id"))
    assert entry is not None and entry.templates_opt_in is False and not entry.withdrawn
    queue.queued.clear()
    intake.consent_seen("Secret", "ns", "creds", allowed)  # a relist: nothing new
    assert queue.queued == {}


async def test_a_changed_ca_secret_requeues_the_identitys_secretsyncs_and_a_relist_does_not() -> None:
    kube, queue = FakeKube(), RecordingQueue()
    syncs = {("ns", "app"): _sync_entry("app", "id"), ("ns", "other"): _sync_entry("other", "someone-else")}
    intake, registry = _intake(kube, queue, syncs)
    ca_ref = {"name": "ca", "key": "ca.crt"}
    body = _identity_body("id") | {
        "spec": {
            "auth": {"accessToken": {"secretRef": {"name": "creds", "key": "token"}}},
            "tls": {"caSecretRef": ca_ref},
        }
    }
    intake.event(ident_mod.MACHINE, "ADDED", body)  # while standby: no check
    intake.take_over()
    entry = registry.get((ident_mod.MACHINE, "ns", "id"))
    assert entry is not None
    async with service_client.ServiceClient("https://service.example") as client:
        old = entry.session = auth.AuthSession(client, auth.StaticTokenCredentials("t"))
        entry.ca_version = "5"  # as read when the session was built

        intake.ca_secret_seen("ns", "ca", "5")  # the watch's listing: the version read
        intake.ca_secret_seen("ns", "creds", "9")  # not the CA Secret
        assert queue.queued == {} and entry.session is not None

        intake.ca_secret_seen("ns", "ca", "6")
        await asyncio.sleep(1)  # virtual: the status check runs in its own task
        assert queue.queued == {("ns", "app"): True}
        assert entry.session is not old  # ended: the next session reads the bundle afresh
        assert "retired" in str(await _raised(old.token()))


async def _raised(call: Any) -> Exception:
    try:
        await call
    except Exception as exc:
        return exc
    raise AssertionError("nothing was raised")

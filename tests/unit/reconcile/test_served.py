"""Which namespaces are served under a namespace selector, and what the intakes do when that
changes: SecretSyncs of other namespaces are never taken in; a namespace that comes to match is
listed and queued, its identities checked; one that stops matching is forgotten, nothing written.

No apiserver: watch events are handed to the intakes directly; a fake Kube answers the LISTs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from reconcile_fakes import FakeKube, FakeSession, FakeSessions, RecordingQueue

from secretferry import settings as settings_mod
from secretferry.kube import watching
from secretferry.models import selectors
from secretferry.reconcile import controller as controller_mod
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import identity_intake, identity_status, served, state, sync_intake, tasks
from secretferry.service import listroutes, scopes

SELECTOR = "release=a"


def _served(text: str = SELECTOR, names: tuple[str, ...] = ()) -> served.ServedNamespaces:
    return served.ServedNamespaces(selectors.parse(text), names=names)


def _ns(name: str, **labels: str) -> watching.WatchEvent:
    return watching.WatchEvent("ADDED", {"metadata": {"name": name, "labels": labels}})


def test_without_a_selector_every_namespace_is_served_and_nothing_waits() -> None:
    s = served.ServedNamespaces(None)
    assert s.listed.is_set() and not s.selecting
    assert s.serves("anything")
    assert s.observe("anything", {}) is None


def test_nothing_is_served_before_the_first_listing_and_it_reports_no_transitions() -> None:
    s = _served()
    assert not s.serves("a1")
    assert s.observe("a1", {"release": "a"}) is None  # filling in, not a change
    assert s.observe("b1", {"release": "b"}) is None
    assert not s.listed.is_set()
    assert s.listing_done({"a1", "b1"}) == []
    assert s.listed.is_set()
    assert s.serves("a1") and not s.serves("b1")


def test_transitions_after_the_listing() -> None:
    s = _served()
    s.observe("a1", {"release": "a"})
    s.listing_done({"a1"})
    assert s.observe("a1", {"release": "a", "other": "x"}) is None  # still matches
    assert s.observe("b1", {"release": "a"}) is True  # relabelled into the selection
    assert s.observe("a1", {"release": "b"}) is False  # relabelled out
    assert s.observe("a1", {}) is None
    assert s.gone("b1") is False  # deleted while served
    assert s.gone("b1") is None
    s.observe("c1", {"release": "a"})
    assert s.listing_done(set()) == ["c1"]  # a relisting that no longer names it


def test_with_a_list_of_names_a_namespace_must_be_listed_and_match() -> None:
    s = _served(names=("a1", "a2"))
    s.listing_done(set())
    assert s.observe("a1", {"release": "a"}) is True
    assert s.observe("x", {"release": "a"}) is None  # matches, but not listed
    assert s.observe("a2", {"release": "b"}) is None  # listed, but does not match
    assert s.served() == {"a1"}


# --- the SecretSync intake -------------------------------------------------------------------
def _sync(namespace: str, name: str = "app") -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}", "generation": 1}
    return {"metadata": meta, "spec": {}, "status": {}}


async def _listing(method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    namespace = path.split("/namespaces/")[1].split("/")[0]
    return {"items": [_sync(namespace, "one"), _sync(namespace, "two")]}


def _sync_intake(
    s: served.ServedNamespaces, kube: FakeKube | None = None, index: state.ScopeIndex | None = None
) -> tuple[sync_intake.SyncIntake, dict[state.SyncKey, state.SyncEntry], RecordingQueue]:
    syncs: dict[state.SyncKey, state.SyncEntry] = {}
    queue = RecordingQueue()
    intake = sync_intake.SyncIntake(
        kube=(kube or FakeKube(_listing)).port(),
        syncs=syncs,
        scopes=index or state.ScopeIndex(jitter_fraction=0),
        targets=state.TargetCache(),
        queue=queue.port(),
        on_scopes_changed=lambda added, removed: None,
        served_namespaces=s,
    )
    return intake, syncs, queue


async def test_a_namespace_taken_in_has_its_secretsyncs_listed_and_queued_as_live_work() -> None:
    s = _served()
    s.listing_done(set())
    kube = FakeKube(_listing)
    intake, syncs, queue = _sync_intake(s, kube)
    assert s.observe("a1", {"release": "a"}) is True
    await intake.take_in("a1")
    assert [path for _, path, _ in kube.calls] == ["/apis/secretferry.io/v1alpha1/namespaces/a1/secretsyncs"]
    assert set(syncs) == {("a1", "one"), ("a1", "two")}
    assert queue.queued == {("a1", "one"): True, ("a1", "two"): True}


async def test_a_namespace_let_go_while_its_listing_ran_is_not_taken_in() -> None:
    s = _served()
    s.listing_done(set())
    intake, syncs, queue = _sync_intake(s)
    s.observe("a1", {"release": "a"})
    s.observe("a1", {"release": "b"})
    await intake.take_in("a1")
    assert syncs == {} and queue.queued == {}


def test_let_go_forgets_the_namespace_in_memory_and_writes_nothing() -> None:
    s = _served()
    s.observe("a1", {"release": "a"})
    s.observe("a2", {"release": "a"})
    s.listing_done({"a1", "a2"})
    index = state.ScopeIndex(jitter_fraction=0)
    kube = FakeKube(_listing)
    intake, syncs, queue = _sync_intake(s, kube, index)
    for ns in ("a1", "a2"):
        intake.upserted(_sync(ns), live=True)
    scope = scopes.Scope("MachineIdentity/a1/id", "p", "dev", "/")
    index.bind(("a1", "app"), [scope], instant=False, refresh_seconds=300, now=0)
    intake.let_go("a1")
    assert set(syncs) == {("a2", "app")}
    assert queue.queued == {("a2", "app"): True}
    assert index.keys_of(scope) == set()
    assert kube.calls == []  # nothing asked of the apiserver, let alone written or deleted


# --- the identity intake ---------------------------------------------------------------------
def _identity(kind: str, namespace: str | None, name: str = "id") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"{namespace}-{name}", "generation": 1}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta, "spec": {"auth": {"universal": {"credentialsRef": {"name": "c"}}}}}


class _Checks:
    def __init__(self) -> None:
        self.checked: list[ident_mod.IdentityKey] = []

    def spawn_check(self, entry: ident_mod.IdentityEntry) -> None:
        self.checked.append(entry.key)


def _identity_intake(
    s: served.ServedNamespaces, changes: list[tuple[str, bool]]
) -> tuple[identity_intake.IdentityIntake, _Checks]:
    cfg = settings_mod.Settings(watch_namespace_selector=SELECTOR)
    kube = FakeKube()
    registry = ident_mod.IdentityRegistry(kube=kube.port(), settings=cfg)
    checks = _Checks()
    intake = identity_intake.IdentityIntake(
        kube=kube.port(),
        settings=cfg,
        identities=registry,
        syncs={},
        queue=RecordingQueue().port(),
        status=identity_status.IdentityStatus(
            kube=kube.port(),
            identities=FakeSessions(FakeSession()).port(),
            routes=listroutes.ListRoutes(),
            background=tasks.Tasks(),
        ),
        served_namespaces=s,
        on_namespace_served=lambda ns, serve: changes.append((ns, serve)),
    )
    intake._status = checks  # type: ignore[assignment]  # record the checks, log in nowhere
    intake.take_over()
    return intake, checks


def test_identities_of_namespaces_not_served_are_never_checked() -> None:
    s = _served()
    changes: list[tuple[str, bool]] = []
    intake, checks = _identity_intake(s, changes)
    seen: set[str] = set()
    for event in (_ns("a1", release="a"), _ns("b1", release="b")):
        intake.namespace_event(event, seen)
    intake.namespace_event(watching.WatchEvent("SYNCED", {}), seen)
    assert changes == []  # the first listing only fills in
    for body in (_identity(ident_mod.MACHINE, "a1"), _identity(ident_mod.MACHINE, "b1")):
        intake.event(ident_mod.MACHINE, "ADDED", body)
    intake.event(ident_mod.CLUSTER, "ADDED", _identity(ident_mod.CLUSTER, None, "shared"))
    assert checks.checked == [(ident_mod.MACHINE, "a1", "id"), (ident_mod.CLUSTER, "", "shared")]
    checks.checked.clear()
    assert len(intake.check_all()) == 2  # a1's and the cluster one; b1's is not ours

    # b1 relabelled into the selection: taken in, its identity checked; a1 out: let go.
    intake.namespace_event(watching.WatchEvent("MODIFIED", _ns("b1", release="a").object), seen)
    intake.namespace_event(watching.WatchEvent("MODIFIED", _ns("a1", release="b").object), seen)
    assert changes == [("b1", True), ("a1", False)]
    a1_identity = intake._identities.get((ident_mod.MACHINE, "a1", "id"))
    assert a1_identity is not None
    a1_identity.reported = ("True", "LoggedIn", "", "", "")
    intake.namespace_let_go("a1")
    assert a1_identity.reported is None  # served again later: its status is written afresh
    intake.namespace_served("b1")
    assert checks.checked[-1] == (ident_mod.MACHINE, "b1", "id")
    checks.checked.clear()
    intake.event(
        ident_mod.MACHINE,
        "MODIFIED",
        {
            **_identity(ident_mod.MACHINE, "a1"),
            "metadata": {"name": "id", "namespace": "a1", "uid": "a1-id", "generation": 2},
        },
    )
    assert checks.checked == []  # a1 is not served any more

    # deleted while served: let go
    intake.namespace_event(watching.WatchEvent("DELETED", _ns("b1").object), seen)
    assert changes[-1] == ("b1", False)


# --- the controller's wiring -----------------------------------------------------------------
async def test_the_controller_takes_a_namespace_in_and_lets_it_go_as_its_labels_change() -> None:
    kube = FakeKube(_listing)
    ctl = controller_mod.Controller(
        kube=kube.port(),
        settings=settings_mod.Settings(watch_namespace_selector=SELECTOR),
        hmac_key=b"k" * 32,
        instance="test-0",
    )
    seen: set[str] = set()
    ctl.identity_intake.namespace_event(_ns("a1", release="a"), seen)
    ctl.identity_intake.namespace_event(_ns("b1", release="b"), seen)
    ctl.identity_intake.namespace_event(watching.WatchEvent("SYNCED", {}), seen)
    assert ctl.served.served() == {"a1"} and kube.calls == []  # start-up lists everything itself

    ctl.identity_intake.namespace_event(watching.WatchEvent("MODIFIED", _ns("b1", release="a").object), seen)
    for _ in range(10):  # the take-in runs as a side task
        await asyncio.sleep(0)
    assert set(ctl.syncs) == {("b1", "one"), ("b1", "two")}

    ctl.identity_intake.namespace_event(watching.WatchEvent("MODIFIED", _ns("b1", release="b").object), seen)
    assert ctl.syncs == {}
    # One LIST of SecretSyncs, one per generator kind; letting go writes nothing.
    assert sorted(p.rsplit("/", 1)[-1] for m, p, _ in kube.calls if m == "GET") == [
        "passwordgenerators",
        "secretsyncs",
        "uuidgenerators",
    ]
    assert {m for m, _, _ in kube.calls} == {"GET"}
    await ctl.background.cancel_all()

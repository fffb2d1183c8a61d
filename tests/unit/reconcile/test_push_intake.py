"""PushSecrets in: what queues a pass, and what does not (our own status echo, Secrets nobody
pushes, a Secret event that changed nothing). No apiserver: events are handed in directly."""

from __future__ import annotations

from typing import Any, cast

from reconcile_fakes import FakeKube, RecordingQueue

from secretferry.reconcile import scheduler
from secretferry.reconcile.push import intake as intake_mod
from secretferry.reconcile.push import pushing


def _intake(serves: set[str] | None = None) -> tuple[intake_mod.PushIntake, RecordingQueue]:
    deps = pushing.PushDeps(
        kube=FakeKube().port(),
        identities=cast(Any, None),
        routes=cast(Any, None),
        slugs=cast(Any, None),
        hmac_key=b"k" * 32,
        instance="test",
    )
    intake = intake_mod.PushIntake(
        deps=deps,
        workers=1,
        backoff_initial_seconds=0.5,
        backoff_max_seconds=3,
        serves=(lambda ns: ns in serves) if serves is not None else (lambda _ns: True),
    )
    queue = RecordingQueue()
    intake.queue = cast(scheduler.Scheduler[intake_mod.PushKey], queue)
    return intake, queue


def _push(name: str = "p", *, generation: int = 1, secret: str = "src", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "generation": generation, **meta},
        "spec": {"selector": {"secret": {"name": secret}}},
    }


def _handled(intake: intake_mod.PushIntake, key: intake_mod.PushKey, generation: int) -> None:
    """What a finished pass leaves behind (the worker's bookkeeping)."""
    intake._entries[key].handled_generation = generation


def test_a_new_pushsecret_is_queued_and_its_status_echo_is_not() -> None:
    intake, queue = _intake()
    intake.seen(("ns", "p"), _push())
    assert queue.queued == {("ns", "p"): True}
    queue.queued.clear()
    _handled(intake, ("ns", "p"), 1)
    intake.seen(("ns", "p"), {**_push(), "status": {"pushedKeyCount": 1}})  # our own status patch
    assert queue.queued == {}
    intake.seen(("ns", "p"), _push(generation=2))  # a spec change
    assert queue.queued == {("ns", "p"): True}


def test_deletion_queues_the_pass_that_removes_the_finalizer() -> None:
    intake, queue = _intake()
    intake.seen(("ns", "p"), _push())
    _handled(intake, ("ns", "p"), 1)
    queue.queued.clear()
    intake.seen(("ns", "p"), _push(deletionTimestamp="2026-01-01T00:00:00Z"))
    assert queue.queued == {("ns", "p"): True}


def test_only_a_change_of_a_named_secret_queues_its_pushsecrets() -> None:
    intake, queue = _intake()
    intake.seen(("ns", "a"), _push("a", secret="src"))
    intake.seen(("ns", "b"), _push("b", secret="src"))
    intake.seen(("ns", "c"), _push("c", secret="other"))
    queue.queued.clear()
    intake.secret_seen("ns", "unrelated", {"resourceVersion": "7"})
    intake.secret_seen("elsewhere", "src", {"resourceVersion": "7"})  # same name, other namespace
    assert queue.queued == {}
    intake.secret_seen("ns", "src", {"resourceVersion": "8"})
    assert set(queue.queued) == {("ns", "a"), ("ns", "b")}
    queue.queued.clear()
    intake.secret_seen("ns", "src", {"resourceVersion": "8"})  # a relist of the same version
    assert queue.queued == {}
    intake.secret_seen("ns", "src", None)  # deleted: the pass reports it
    assert set(queue.queued) == {("ns", "a"), ("ns", "b")}


def test_a_deleted_pushsecret_stops_watching_its_secret() -> None:
    intake, queue = _intake()
    intake.seen(("ns", "a"), _push("a"))
    intake._drop(("ns", "a"))
    queue.queued.clear()
    intake.secret_seen("ns", "src", {"resourceVersion": "9"})
    assert queue.queued == {} and intake.count() == 0


def test_a_pushsecret_in_a_namespace_not_served_is_not_ours() -> None:
    intake, queue = _intake(serves={"served"})
    intake.seen(("ns", "p"), _push())
    assert queue.queued == {} and intake.count() == 0


def test_an_identity_event_queues_the_pushsecrets_naming_it() -> None:
    intake, queue = _intake()
    mine = _push("mine")
    mine["spec"]["identityRef"] = {"name": "ferry"}
    cluster = _push("cluster")
    cluster["spec"]["identityRef"] = {"kind": "ClusterMachineIdentity", "name": "shared"}
    intake.seen(("ns", "mine"), mine)
    intake.seen(("ns", "cluster"), cluster)
    queue.queued.clear()
    intake.identity_changed("MachineIdentity", "other-ns", "ferry")  # same name, other namespace
    intake.identity_changed("ClusterMachineIdentity", None, "ferry")
    assert queue.queued == {}
    intake.identity_changed("MachineIdentity", "ns", "ferry")
    intake.identity_changed("ClusterMachineIdentity", None, "shared")
    assert set(queue.queued) == {("ns", "mine"), ("ns", "cluster")}

"""SecretSyncs in: what a watch event queues, and what it does not.

No apiserver: events are handed to the intake directly; the work queue records what was queued.
"""

from __future__ import annotations

from typing import Any

from reconcile_fakes import FakeKube, RecordingQueue

from secretferry.reconcile import state, sync_intake
from secretferry.service import scopes


def _body(generation: int, *, uid: str = "u", force: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "app", "namespace": "ns", "uid": uid, "generation": generation}
    if force is not None:
        meta["annotations"] = {state.FORCE_SYNC_ANNOTATION: force}
    return {"metadata": meta, "spec": {}, "status": {"observedGeneration": generation - 1}}


def _intake(
    index: state.ScopeIndex | None = None,
) -> tuple[sync_intake.SyncIntake, dict[state.SyncKey, state.SyncEntry], RecordingQueue, list[Any]]:
    syncs: dict[state.SyncKey, state.SyncEntry] = {}
    queue, changed = RecordingQueue(), []
    intake = sync_intake.SyncIntake(
        kube=FakeKube().port(),
        syncs=syncs,
        scopes=index or state.ScopeIndex(jitter_fraction=0),
        targets=state.TargetCache(),
        queue=queue.port(),
        on_scopes_changed=lambda added, removed: changed.append(removed),
    )
    return intake, syncs, queue, changed


def test_a_status_only_change_queues_nothing_but_a_new_force_annotation_does() -> None:
    intake, syncs, queue, _ = _intake()
    intake.upserted(_body(1), live=True)
    assert queue.queued == {("ns", "app"): True}
    syncs[("ns", "app")].status = {"observedGeneration": 1}  # what we wrote

    queue.queued.clear()
    intake.upserted(_body(1), live=True)  # our own status patch echoing back
    assert queue.queued == {}
    assert syncs[("ns", "app")].status == {"observedGeneration": 1}

    intake.upserted(_body(1, force="now"), live=False)
    assert queue.queued == {("ns", "app"): True}
    assert syncs[("ns", "app")].force_pending


def test_a_list_item_older_than_the_watch_event_already_seen_is_ignored() -> None:
    intake, syncs, queue, _ = _intake()
    intake.upserted(_body(3), live=True)
    queue.queued.clear()
    intake.upserted(_body(2), live=False)
    assert queue.queued == {}
    assert syncs[("ns", "app")].generation == 3


def test_a_deleted_secretsync_lets_go_of_its_scopes() -> None:
    index = state.ScopeIndex(jitter_fraction=0)
    intake, syncs, queue, changed = _intake(index)
    intake.upserted(_body(1), live=True)
    scope = scopes.Scope("MachineIdentity/ns/id", "p", "dev", "/")
    index.bind(("ns", "app"), [scope], instant=False, refresh_seconds=300, now=0)

    intake.deleted(("ns", "app"))

    assert syncs == {} and queue.queued == {}
    assert changed == [{scope}]

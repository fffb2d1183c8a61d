"""spec.refreshPolicy (reconcile/refresh.py): which passes read the service, under each policy.

Judged by the list calls the fake service counts, the scopes the pass holds (a held scope is what
the resync loop and the event stream work from), and status. Same World as test_sync.py: virtual
clock, fake apiserver, real fetcher and indexes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from test_sync import HOST, NAME, NAMESPACE, SECRET_PATH, FakeList, World, sync_body

from secretferry.models import labels
from secretferry.models import secretsync as sync_models
from secretferry.reconcile import conditions as cond_mod
from secretferry.reconcile import desired, reasons, refresh, state, sync_intake
from secretferry.service import client

pytestmark = pytest.mark.looptime

KEY: state.SyncKey = (NAMESPACE, NAME)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    service = FakeList()
    async with client.ServiceClient(HOST, transport=httpx.MockTransport(service.handler)) as api:
        made = World(api, service)
        try:
            yield made
        finally:
            await made.deps.rollouts.close()
            await made.registry.close()


def body(policy: str, *, generation: int = 1, **spec: Any) -> dict[str, Any]:
    return sync_body(generation=generation, refreshPolicy=policy, **spec)


def status_of(world: World) -> dict[str, Any]:
    return world.entry.status


async def test_periodic_holds_its_scope_and_reads_again_when_due(world: World) -> None:
    await world.run(body("Periodic"))
    assert world.deps.scopes.scopes_of(KEY)  # the resync loop and the stream work from it
    world.later()
    await world.run()
    assert world.service.calls == 2
    assert status_of(world).get("updateMode") not in (reasons.ON_CHANGE, reasons.CREATED_ONCE)


@pytest.mark.parametrize("policy", ["OnChange", "CreatedOnce"])
async def test_first_pass_reads_once_and_holds_no_scope(world: World, policy: str) -> None:
    assert await world.run(body(policy)) is None
    assert world.service.calls == 1
    assert world.apiserver.secret_data(NAMESPACE, NAME) is not None
    assert world.deps.scopes.scopes_of(KEY) == ()  # no resync, no stream registration
    assert world.deps.scopes.all() == {}
    assert world.scopes_changed == []  # the stream plan never heard of it
    status = world.status_patches()[-1]
    assert status["updateMode"] == policy
    assert policy in status["updateModeReason"]


@pytest.mark.parametrize("policy", ["OnChange", "CreatedOnce"])
async def test_later_passes_read_nothing_and_log_in_to_nothing(world: World, policy: str) -> None:
    """Resyncs, identity events, a hand edit of the target: queued passes, zero service calls."""
    await world.run(body(policy))
    session = world.identity.session
    assert session is not None
    logins_before = session.logins + session.renewals
    world.service.secrets = {"DB_USER": "a-changed-password-value"}
    for _ in range(3):
        world.later()
        assert await world.run() is None
    assert world.service.calls == 1
    assert world.ready()["reason"] == reasons.SYNCED
    assert session.logins + session.renewals == logins_before
    # A hand edit of the target is left as it is (refresh.py: repairing it would need a fetch).
    secret = world.apiserver.objects[SECRET_PATH]
    secret["data"] = {"DB_USER": "ZWRpdGVk"}
    await world.run()
    assert world.service.calls == 1
    assert world.apiserver.objects[SECRET_PATH]["data"] == {"DB_USER": "ZWRpdGVk"}


@pytest.mark.parametrize("policy", ["OnChange", "CreatedOnce"])
async def test_a_deleted_target_is_recreated_with_one_read(world: World, policy: str) -> None:
    await world.run(body(policy))
    del world.apiserver.objects[SECRET_PATH]
    world.deps.targets.forget(("Secret", NAMESPACE, NAME))
    await world.run()
    assert world.service.calls == 2
    assert world.apiserver.secret_data(NAMESPACE, NAME) is not None
    await world.run()
    assert world.service.calls == 2


async def test_on_change_reads_on_a_spec_edit_and_created_once_does_not(world: World) -> None:
    await world.run(body("OnChange"))
    await world.run(body("OnChange", generation=2, allowEmpty=True))
    assert world.service.calls == 2
    assert status_of(world)["observedGeneration"] == 2
    await world.run(body("CreatedOnce", generation=3))
    assert world.service.calls == 2  # the target exists: CreatedOnce never reads again for it


@pytest.mark.parametrize("policy", ["OnChange", "CreatedOnce"])
async def test_force_sync_reads_once(world: World, policy: str) -> None:
    await world.run(body(policy))
    forced = body(policy)
    forced["metadata"]["annotations"] = {state.FORCE_SYNC_ANNOTATION: "1"}
    world.service.secrets = {"DB_USER": "a-changed-password-value"}
    await world.run(forced)
    assert world.service.calls == 2
    assert world.apiserver.secret_data(NAMESPACE, NAME) == {"DB_USER": "a-changed-password-value"} | {
        "DB_PASS": world.apiserver.secret_data(NAMESPACE, NAME)["DB_PASS"]  # type: ignore[index]
    }
    await world.run()
    assert world.service.calls == 2


@pytest.mark.parametrize("policy", ["OnChange", "CreatedOnce"])
async def test_a_restart_reads_nothing_when_the_target_is_there(world: World, policy: str) -> None:
    """After a restart every in-memory index is empty: status and the target decide."""
    await world.run(body(policy))
    listed = {**body(policy), "status": status_of(world)}
    world.syncs.clear()
    world.deps.targets = state.TargetCache()
    world.kube.calls.clear()
    world.intake = sync_intake.SyncIntake(
        kube=world.kube.port(),
        syncs=world.syncs,
        scopes=world.deps.scopes,
        targets=world.deps.targets,
        queue=world.intake._queue,  # the same recording queue
        on_scopes_changed=lambda added, removed: None,
    )
    world.intake.upserted(listed, live=False)
    await world.run()
    assert world.service.calls == 1
    assert world.status_patches() == []  # nothing changed: nothing patched
    # The target watch knows whom a deletion of the target concerns (no write told it this time).
    assert world.deps.targets.owner_of(("Secret", NAMESPACE, NAME)) == KEY


async def test_a_stranger_secret_of_the_name_is_not_taken_for_ours(world: World) -> None:
    world.apiserver.put(
        SECRET_PATH, {"metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {}}, "data": {}}
    )
    await world.run(body("CreatedOnce"))
    assert world.service.calls == 1  # read, then refused as not ours (TargetConflict)
    assert world.ready()["status"] == "False"


@pytest.mark.parametrize(
    ("policy", "generation", "status", "present", "force", "held"),
    [
        ("Periodic", 1, {}, True, False, False),
        ("CreatedOnce", 1, {}, True, False, True),
        ("CreatedOnce", 1, {}, False, False, False),
        ("CreatedOnce", 1, {}, True, True, False),
        ("OnChange", 2, {"observedGeneration": 1}, True, False, False),
        ("OnChange", 1, {"observedGeneration": 1}, True, False, True),
        ("OnChange", 1, {"observedGeneration": 1}, False, False, False),
    ],
)
def test_hold_reason(
    policy: str, generation: int, status: dict[str, Any], present: bool, force: bool, held: bool
) -> None:
    if status:
        status = {
            **status,
            "conditions": [
                c.model_dump(by_alias=True)
                for c in cond_mod.set_condition(
                    [],
                    type_=reasons.READY,
                    status="True",
                    reason=reasons.SYNCED,
                    message="m",
                    observed_generation=status["observedGeneration"],
                    now=cond_mod.now(),
                )
            ],
        }
    got = refresh.hold_reason(
        policy, generation=generation, status=status, target_present=present, force=force
    )
    assert (got is not None) == held


def test_owned_target_needs_our_label_or_our_merge() -> None:
    ours = {"kind": "Secret", "metadata": {"name": "t", "labels": {labels.SYNC_LABEL: "app"}}}
    stranger = {"kind": "Secret", "metadata": {"name": "t", "labels": {labels.SYNC_LABEL: "other"}}}
    merged = {"kind": "Secret", "metadata": {"name": "t"}}
    merge_status = {"dataHMAC": "h", "syncedKeys": ["A"], "target": {"kind": "Secret", "name": "t"}}
    assert refresh.owned_target(ours, sync_name="app", status={})
    assert not refresh.owned_target(stranger, sync_name="app", status={})
    assert not refresh.owned_target(None, sync_name="app", status=merge_status)
    assert refresh.owned_target(merged, sync_name="app", status=merge_status)
    assert not refresh.owned_target(merged, sync_name="app", status={})


async def test_leaving_periodic_lets_go_of_the_scope_and_its_stream(world: World) -> None:
    await world.run(body("Periodic"))
    (scope,) = world.deps.scopes.scopes_of(KEY)
    await world.run(body("OnChange", generation=2))
    assert world.service.calls == 2  # the new generation is read once
    assert world.deps.scopes.all() == {}
    assert world.scopes_changed[-1] == (set(), {scope})  # the stream plan drops it
    world.later()
    await world.run()
    assert world.service.calls == 2
    await world.run(body("Periodic", generation=3))
    assert world.deps.scopes.scopes_of(KEY) == (scope,)  # back on the timer (and the stream)


def test_a_long_name_recognises_its_target_by_the_label_value() -> None:
    """The label holds the shortened name (sync_label_value); ``held`` compares with that."""
    long = "a" * 70
    parsed = sync_models.SecretSync.from_body(
        {**sync_body(), "metadata": {"name": long, "namespace": NAMESPACE}}
    )
    target = {"kind": "Secret", "metadata": {"labels": {labels.SYNC_LABEL: labels.sync_label_value(long)}}}
    assert refresh.owned_target(target, sync_name=desired.sync_label(parsed, None), status={})
    assert not refresh.owned_target(target, sync_name=long, status={})  # what was compared before

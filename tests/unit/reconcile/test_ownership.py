"""secretferry.reconcile.ownership: each SecretSync applies as itself, and takes over from 0.x's manager."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from reconcile_fakes import FakeKube

from secretferry.kube import errors as kube_errors
from secretferry.kube import objects
from secretferry.reconcile import desired, ownership

PATH = objects.path("Secret", "ns", "shared")
OWNER_FIELDS = {"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:data": {"f:own": {}}}}


def want(policy: str, sync: str = "m1") -> desired.DesiredObject:
    return desired.DesiredObject(
        kind="Secret",
        name="shared",
        namespace="ns",
        type=None if policy == "Merge" else "Opaque",
        labels={},
        annotations={},
        string_data={"a": "1"},
        data_hmac="h",
        owner=None,
        creation_policy=policy,  # type: ignore[arg-type]  # a literal, checked by pydantic
        deletion_policy="Retain",
        sync_name=sync,
    )


def merge() -> tuple[desired.DesiredObject, dict[str, Any]]:
    wanted = want("Merge")
    return wanted, wanted.manifest()


def stored(managed: list[dict[str, Any]], version: str = "7") -> dict[str, Any]:
    return {"metadata": {"name": "shared", "resourceVersion": version, "managedFields": managed}}


class Script:
    """Answers each request with the next scripted reply (an object, or an error to raise)."""

    def __init__(self, *replies: dict[str, Any] | Exception) -> None:
        self.replies = list(replies)

    async def __call__(self, method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return copy.deepcopy(reply)


def calls(kube: FakeKube) -> list[tuple[str, str, str]]:
    """(method, content type, field manager) of each request."""
    return [
        (m, kw.get("content_type", ""), str((kw.get("query") or {}).get("fieldManager", "")))
        for m, _, kw in kube.calls
    ]


def legacy_conflict() -> kube_errors.KubeError:
    return kube_errors.from_status(
        409,
        {
            "reason": "Conflict",
            "message": 'Apply failed with 1 conflict: conflict with "secretferry": .data.a',
            "details": {
                "causes": [
                    {
                        "reason": "FieldManagerConflict",
                        "message": 'conflict with "secretferry"',
                        "field": ".data.a",
                    }
                ]
            },
        },
    )


async def test_a_write_without_the_old_manager_is_one_apply_as_the_secretsync() -> None:
    kube = FakeKube(Script(stored([OWNER_FIELDS])))
    await ownership.apply(kube.port(), *merge(), previously=[])
    assert calls(kube) == [("PATCH", objects.APPLY_PATCH, "secretferry/m1")]
    assert kube.calls[0][2]["query"]["force"] is False


async def test_a_merge_value_the_old_manager_holds_is_taken_over_then_applied() -> None:
    legacy = {"manager": "secretferry", "operation": "Apply", "fieldsV1": {"f:data": {"f:a": {}, "f:b": {}}}}
    kube = FakeKube(
        Script(
            legacy_conflict(),
            stored([legacy, OWNER_FIELDS]),  # GET
            stored([]),  # the hand-over patch
            stored([{**legacy, "fieldsV1": {"f:data": {"f:b": {}}}}]),  # the apply again
        )
    )
    await ownership.apply(kube.port(), *merge(), previously=[])
    assert calls(kube) == [
        ("PATCH", objects.APPLY_PATCH, "secretferry/m1"),
        ("GET", "", ""),
        ("PATCH", objects.MERGE_PATCH, "secretferry/m1"),
        ("PATCH", objects.APPLY_PATCH, "secretferry/m1"),
    ]
    handed = kube.calls[2][2]["body"]["metadata"]
    assert handed["resourceVersion"] == "7"  # only over what was read
    # The old manager keeps m2's key b; m1 now owns a.
    assert [(e["manager"], e["fieldsV1"]) for e in handed["managedFields"]] == [
        ("secretferry", {"f:data": {"f:b": {}}}),
        ("kubectl", {"f:data": {"f:own": {}}}),
        ("secretferry/m1", {"f:data": {"f:a": {}}}),
    ]


async def test_a_conflict_with_another_writer_is_not_taken_over() -> None:
    other = kube_errors.Conflict(
        409, "Conflict", "conflict", conflicts=(kube_errors.FieldConflict(".data.a", "secretferry/m2", ""),)
    )
    kube = FakeKube(Script(other))
    with pytest.raises(kube_errors.Conflict):
        await ownership.apply(kube.port(), *merge(), previously=[])
    assert len(kube.calls) == 1


async def test_an_owned_target_takes_everything_over_and_applies_again_to_drop_stale_fields() -> None:
    legacy = {
        "manager": "secretferry",
        "operation": "Apply",
        "fieldsV1": {"f:metadata": {"f:labels": {"f:old": {}}}},
    }
    kube = FakeKube(Script(stored([legacy]), stored([]), stored([])))
    owned = want("Owner", "app")
    await ownership.apply(kube.port(), owned, owned.manifest(), previously=[])
    assert calls(kube) == [
        ("PATCH", objects.APPLY_PATCH, "secretferry/app"),
        ("PATCH", objects.MERGE_PATCH, "secretferry/app"),
        ("PATCH", objects.APPLY_PATCH, "secretferry/app"),
    ]
    assert [kw["query"].get("force") for _, _, kw in kube.calls] == [True, None, True]


async def test_a_hand_over_that_lost_a_race_leaves_the_write_done() -> None:
    legacy = {"manager": "secretferry", "operation": "Apply", "fieldsV1": {"f:data": {"f:a": {}}}}
    stale = kube_errors.Conflict(409, "Conflict", "the object has been modified")
    kube = FakeKube(Script(stored([legacy]), stale))
    owned = want("Owner", "app")
    result = await ownership.apply(kube.port(), owned, owned.manifest(), previously=[])
    assert result == stored([legacy])  # the apply's result; the hand-over waits for the next write
    assert len(kube.calls) == 2

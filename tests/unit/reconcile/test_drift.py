"""secretferry.reconcile.drift: does the target need a write, and which keys go."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secretferry import models
from secretferry.models import labels
from secretferry.reconcile import desired, drift

KEY = b"k" * 32


def make(data: dict[str, str], **target: Any) -> desired.DesiredObject:
    sync = models.SecretSync.from_body(
        {
            "metadata": {"name": "app", "namespace": "ns", "uid": "uid-1"},
            "spec": {
                "identityRef": {"name": "mi"},
                "sources": [{"projectId": "p", "environment": "e"}],
                "target": target,
            },
        }
    )
    return desired.build_desired(sync, [desired.FetchedSource(data)], hmac_key=KEY)


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def as_read(d: desired.DesiredObject) -> dict[str, Any]:
    """What the apiserver returns after applying ``d`` (plus fields the server adds)."""
    body = d.manifest()
    body["metadata"] = {**body["metadata"], "uid": "target-uid", "resourceVersion": "1"}
    return body


DESIRED = make({"A": "1", "B": "2"})


def mutate(change: Any) -> dict[str, Any]:
    actual = copy.deepcopy(as_read(DESIRED))
    change(actual)
    return actual


@pytest.mark.parametrize(
    ("actual", "reason"),
    [
        (None, drift.MISSING),
        (as_read(DESIRED), None),
        (mutate(lambda a: a["data"].update(A=b64("changed"))), drift.DATA_CHANGED),
        (mutate(lambda a: a["data"].pop("B")), drift.DATA_CHANGED),
        (mutate(lambda a: a["data"].update(A="!!not base64!!")), drift.DATA_CHANGED),
        (mutate(lambda a: a["data"].update(A=base64.b64encode(b"\xff").decode())), drift.DATA_CHANGED),
        (mutate(lambda a: a.pop("data")), drift.DATA_CHANGED),
        (mutate(lambda a: a["data"].update(FOREIGN=b64("x"))), drift.DATA_CHANGED),  # Owner+Retain: not ours
        (mutate(lambda a: a.update(type="kubernetes.io/tls")), drift.TYPE_CHANGED),
        (mutate(lambda a: a.pop("type")), None),  # the apiserver's default is Opaque
        (mutate(lambda a: a["metadata"]["labels"].pop(labels.SYNC_LABEL)), drift.LABELS_CHANGED),
        (mutate(lambda a: a["metadata"].pop("labels")), drift.LABELS_CHANGED),
        (mutate(lambda a: a["metadata"]["labels"].update(extra="fine")), None),
        (
            mutate(lambda a: a["metadata"]["annotations"].update({labels.DATA_HMAC_ANNOTATION: "x"})),
            drift.ANNOTATIONS_CHANGED,
        ),
        (mutate(lambda a: a["metadata"]["annotations"].update(other="fine")), None),
        (mutate(lambda a: a["metadata"].pop("ownerReferences")), drift.OWNER_MISSING),
        (mutate(lambda a: a["metadata"]["ownerReferences"][0].update(uid="other")), drift.OWNER_MISSING),
        (mutate(lambda a: a["metadata"]["ownerReferences"].insert(0, {"uid": "gc"})), None),
        # type first: it forces delete + recreate, which rewrites everything else too
        (mutate(lambda a: (a.update(type="x"), a["data"].clear())), drift.TYPE_CHANGED),
    ],
)
def test_needs_write(actual: dict[str, Any] | None, reason: str | None) -> None:
    assert drift.needs_write(DESIRED, actual) == reason


def test_retained_key_is_not_drift_but_foreign_key_is() -> None:
    actual = mutate(lambda a: a["data"].update(OLD=b64("kept")))
    assert drift.needs_write(DESIRED, actual, previously_synced=["A", "B", "OLD"]) is None
    assert drift.needs_write(DESIRED, actual, previously_synced=["A", "B"]) == drift.DATA_CHANGED


def test_configmap_data_is_plain() -> None:
    d = make({"A": "1"}, kind="ConfigMap")
    actual = as_read(d)
    assert actual["data"] == {"A": "1"}
    assert drift.needs_write(d, actual) is None
    actual["data"]["A"] = "2"
    assert drift.needs_write(d, actual) == drift.DATA_CHANGED


MERGE = make({"A": "1"}, creationPolicy="Merge")
FOREIGN_SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "type": "kubernetes.io/tls",
    "metadata": {"name": "app", "labels": {labels.MANAGED_BY_LABEL: "Helm"}},
    "data": {"A": b64("1"), "tls.crt": b64("c"), "tls.key": b64("k")},
}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda a: None, None),  # type, foreign keys and Helm's label are not ours to judge
        (lambda a: a["data"].update(A=b64("2")), drift.DATA_CHANGED),
        (lambda a: a["data"].pop("A"), drift.DATA_CHANGED),
    ],
)
def test_merge_compares_only_our_keys(change: Any, reason: str | None) -> None:
    actual = copy.deepcopy(FOREIGN_SECRET)
    change(actual)
    assert drift.needs_write(MERGE, actual) == reason


OWNER_RETAIN = make({"A": "1"})
OWNER_DELETE = make({"A": "1"}, deletionPolicy="Delete")
MERGE_RETAIN = make({"A": "1"}, creationPolicy="Merge")
MERGE_DELETE = make({"A": "1"}, creationPolicy="Merge", deletionPolicy="Delete")
ORPHAN_DELETE = make({"A": "1"}, creationPolicy="Orphan", deletionPolicy="Delete")
# In the target: A (desired), GONE (synced before, vanished at the service), MINE (someone else's).
TARGET = {"kind": "Secret", "data": {"A": b64("1"), "GONE": b64("g"), "MINE": b64("m")}}
PREVIOUS = ["A", "GONE"]


@pytest.mark.parametrize(
    ("d", "remove", "retain"),
    [
        (OWNER_RETAIN, {"MINE"}, {"GONE"}),
        (OWNER_DELETE, {"GONE", "MINE"}, set()),
        (ORPHAN_DELETE, {"GONE", "MINE"}, set()),
        (MERGE_RETAIN, set(), {"GONE"}),
        (MERGE_DELETE, {"GONE"}, set()),
    ],
)
def test_keys_to_remove_and_retain(d: desired.DesiredObject, remove: set[str], retain: set[str]) -> None:
    assert drift.keys_to_remove(d, TARGET, PREVIOUS) == remove
    assert drift.retained_keys(d, TARGET, PREVIOUS) == retain
    assert drift.keys_to_remove(d, None, PREVIOUS) == set()
    assert drift.retained_keys(d, None, PREVIOUS) == set()


@given(
    desired_keys=st.sets(st.sampled_from("ABCDEF")),
    actual_keys=st.sets(st.sampled_from("ABCDEF")),
    previous=st.sets(st.sampled_from("ABCDEF")),
    policy=st.sampled_from([OWNER_RETAIN, OWNER_DELETE, MERGE_RETAIN, MERGE_DELETE]),
)
def test_removal_invariants(
    desired_keys: set[str], actual_keys: set[str], previous: set[str], policy: desired.DesiredObject
) -> None:
    d = policy.model_copy(update={"string_data": {k: "v" for k in sorted(desired_keys)}})
    actual = {"kind": "Secret", "data": {k: b64("v") for k in actual_keys}}
    remove = drift.keys_to_remove(d, actual, previous)
    retain = drift.retained_keys(d, actual, previous)
    assert not remove & desired_keys  # never drop what we are about to write
    assert remove <= actual_keys and retain <= actual_keys
    assert not remove & retain
    if d.creation_policy == "Merge":
        assert remove <= previous  # never touch someone else's keys
    if d.deletion_policy == "Retain":
        assert not remove & previous


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({}, []),
        ({"syncedKeys": ["A", "B"]}, ["A", "B"]),  # a status from before status.target: trusted
        ({"syncedKeys": ["A"], "target": {"kind": "Secret", "name": "app"}}, ["A"]),
        ({"syncedKeys": ["A"], "target": {"kind": "Secret", "name": "former"}}, []),
        ({"syncedKeys": ["A"], "target": {"kind": "ConfigMap", "name": "app"}}, []),
    ],
)
def test_previously_synced_counts_only_for_the_same_target(
    status: dict[str, Any], expected: list[str]
) -> None:
    assert drift.previously_synced(status, kind="Secret", name="app") == expected


def test_keys_synced_into_a_former_target_are_not_removed_from_a_merge_target() -> None:
    status = {"syncedKeys": ["A", "password"], "target": {"kind": "Secret", "name": "former"}}
    previously = drift.previously_synced(status, kind="Secret", name="app")
    actual = {"kind": "Secret", "data": {"A": b64("1"), "password": b64("theirs")}}
    assert drift.keys_to_remove(MERGE_DELETE, actual, previously) == set()

"""secretferry.kube.managers: a field manager per SecretSync, and the hand-over from the old one."""

from __future__ import annotations

from typing import Any

import pytest

from secretferry.kube import managers

LONG = "a" * 200  # SecretSync names may have up to 253 characters


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("app", "secretferry/app"),
        ("db.creds-1", "secretferry/db.creds-1"),
        ("x" * 116, "secretferry/" + "x" * 116),  # exactly 128 characters: kept as it is
    ],
)
def test_a_name_that_fits_is_the_manager_after_the_prefix(name: str, expected: str) -> None:
    assert managers.for_sync(name) == expected


@pytest.mark.parametrize("name", ["x" * 117, LONG, "b" * 253])
def test_a_long_name_is_cut_and_hashed_within_the_apiservers_limit(name: str) -> None:
    manager = managers.for_sync(name)
    assert len(manager) == managers.MAX_LENGTH
    assert manager.startswith("secretferry/" + name[:40])
    assert "~" in manager  # never in a Kubernetes name: no plain name gives this manager
    assert managers.for_sync(name) == manager  # deterministic across restarts and replicas


def test_long_names_sharing_their_prefix_get_different_managers() -> None:
    names = [LONG + suffix for suffix in ("", "b", "c", "-1", ".1")]
    assert len({managers.for_sync(n) for n in names}) == len(names)


def _entry(manager: str, fields: dict[str, Any], operation: str = "Apply", **extra: Any) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        **extra,
    }


OWNER = _entry(
    "kubectl-create",
    {"f:data": {".": {}, "f:own": {}}, "f:metadata": {"f:annotations": {".": {}, "f:merge-from": {}}}},
    operation="Update",
)


def test_an_owned_target_hands_everything_of_the_old_manager_over() -> None:
    old = [
        _entry("secretferry", {"f:data": {".": {}, "f:a": {}}, "f:type": {}}, operation="Update"),
        _entry(
            "secretferry", {"f:data": {"f:a": {}, "f:stale": {}}, "f:metadata": {"f:labels": {"f:x": {}}}}
        ),
        _entry("secretferry/app", {"f:data": {"f:a": {}}}),
        OWNER,
    ]
    new = managers.hand_over(old, to="secretferry/app")
    assert new == [
        _entry(
            "secretferry/app",
            {
                "f:data": {".": {}, "f:a": {}, "f:stale": {}},
                "f:type": {},
                "f:metadata": {"f:labels": {"f:x": {}}},
            },
        ),
        OWNER,
    ]
    assert managers.hand_over(new, to="secretferry/app") is None  # nothing left to move


def test_a_merge_target_hands_over_only_the_fields_it_names() -> None:
    # The old manager applied m2's key last; m1 moves first and must leave m2's key where it is.
    old = [
        _entry("secretferry", {"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:l": {}}}}),
        OWNER,
    ]
    only = managers.fields_of(
        {"data": {"a": "YQ=="}, "metadata": {"labels": {"l": "1"}, "annotations": {"n": "v"}}}
    )
    new = managers.hand_over(old, to="secretferry/m1", only=only)
    assert new == [
        _entry("secretferry", {"f:data": {"f:b": {}}}),
        OWNER,
        _entry("secretferry/m1", {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:l": {}}}}),
    ]
    assert managers.legacy_owns(new)
    assert not managers.legacy_owns(new, only)
    last = managers.hand_over(new, to="secretferry/m2", only=managers.fields_of({"data": {"b": "Yg=="}}))
    assert last is not None and not managers.legacy_owns(last)


def test_keys_written_before_are_handed_over_with_the_current_ones() -> None:
    old = [_entry("secretferry", {"f:data": {"f:gone": {}}})]
    only = managers.fields_of({"data": {"a": "YQ=="}}, data_keys=["gone"])
    assert managers.hand_over(old, to="secretferry/m1", only=only) == [
        _entry("secretferry/m1", {"f:data": {"f:gone": {}}})
    ]


def test_the_maps_themselves_stay_with_their_owner() -> None:
    only = managers.fields_of({"data": {"a": "YQ=="}})
    assert only == {"f:data": {"f:a": {}}}
    old = [_entry("secretferry", {"f:data": {".": {}, "f:a": {}}})]
    assert managers.hand_over(old, to="secretferry/m1", only=only) == [
        _entry("secretferry", {"f:data": {".": {}}}),
        _entry("secretferry/m1", {"f:data": {"f:a": {}}}),
    ]


def test_nothing_to_hand_over() -> None:
    assert managers.hand_over(None, to="secretferry/app") is None
    assert managers.hand_over([OWNER], to="secretferry/app") is None
    # A status subresource entry under the old name is not ours to move (our status patches
    # go to SecretSyncs, not to Secrets, but the rule holds for any object).
    status = _entry("secretferry", {"f:status": {}}, operation="Update", subresource="status")
    assert managers.hand_over([status], to="secretferry/app") is None
    assert not managers.legacy_owns([status])

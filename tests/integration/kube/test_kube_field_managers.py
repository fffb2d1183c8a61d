"""Field managers per SecretSync on a real apiserver: shared objects, and the upgrade from 0.x.

0.x wrote every target as the one manager ``secretferry``; these objects are made the way it made
them (its applies, its creates), then written as this version writes them
(``reconcile.ownership.apply``), and ``managedFields`` is read back.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from secretferry.kube import client, errors, managers, objects
from secretferry.reconcile import desired, ownership

pytestmark = pytest.mark.integration


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _want(
    namespace: str,
    sync: str,
    data: dict[str, str],
    *,
    policy: str = "Merge",
    labels: dict[str, str] | None = None,
) -> desired.DesiredObject:
    return desired.DesiredObject(
        kind="Secret",
        name="shared",
        namespace=namespace,
        type=None if policy == "Merge" else "Opaque",
        labels=labels or {},
        annotations={},
        string_data=data,
        data_hmac="h",
        owner=None,
        creation_policy=policy,  # type: ignore[arg-type]  # a literal, checked by pydantic
        deletion_policy="Retain",
        sync_name=sync,
    )


async def _write(kube: client.Kube, want: desired.DesiredObject, previously: list[str] | None = None) -> None:
    await ownership.apply(kube, want, want.manifest(), previously=previously or [])


async def _read(kube: client.Kube, namespace: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The Secret's data (decoded) and who owns which fields: {manager: fieldsV1}."""
    obj = await objects.get(kube, kind="Secret", namespace=namespace, name="shared")
    assert obj is not None
    data = {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}
    owners: dict[str, Any] = {}
    for entry in obj["metadata"].get("managedFields") or []:
        owners.setdefault(entry["manager"], {}).update(entry.get("fieldsV1") or {})
    return data, owners


async def _opted_in(kube: client.Kube, namespace: str, syncs: str) -> None:
    """The owner's Secret, created as an admin would (not by us), opted in to ``syncs``."""
    await kube.request(
        "POST",
        objects.path("Secret", namespace),
        query={"fieldManager": "kubectl-create"},
        body={
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "shared",
                "namespace": namespace,
                "annotations": {"secretferry.io/merge-from": syncs},
            },
            "data": {"own": _b64("owner-value")},
        },
    )


async def test_merge_secretsyncs_keep_each_others_keys(kube: client.Kube, namespace: str) -> None:
    await _opted_in(kube, namespace, "m1,m2")
    for round_ in range(3):
        await _write(kube, _want(namespace, "m1", {"a": f"a{round_}"}))
        await _write(kube, _want(namespace, "m2", {"b": f"b{round_}"}))
        data, owners = await _read(kube, namespace)
        assert data == {"own": "owner-value", "a": f"a{round_}", "b": f"b{round_}"}
    assert owners["secretferry/m1"] == {"f:data": {"f:a": {}}}
    assert owners["secretferry/m2"] == {"f:data": {"f:b": {}}}
    # m1 stops sending its key: only m1's key goes, because m1 alone owned it.
    await _write(kube, _want(namespace, "m1", {}), previously=["a"])
    data, _ = await _read(kube, namespace)
    assert data == {"own": "owner-value", "b": "b2"}
    # Two SecretSyncs wanting one key with different values: the second is refused, not merged over.
    with pytest.raises(errors.Conflict) as refused:
        await _write(kube, _want(namespace, "m1", {"b": "m1s-b"}))
    assert refused.value.managers == {"secretferry/m2"}


async def test_an_upgraded_merge_target_moves_the_old_managers_keys_to_their_secretsync(
    kube: client.Kube, namespace: str
) -> None:
    await _opted_in(kube, namespace, "m1,m2")
    # As 0.x did: both applied as "secretferry"; m2 applied last, so "secretferry" owns b only.
    for want in (_want(namespace, "m1", {"a": "a0"}), _want(namespace, "m2", {"b": "b0"})):
        await objects.apply(kube, want.manifest(), field_manager=managers.LEGACY, force=False)
    data, owners = await _read(kube, namespace)
    assert data == {"own": "owner-value", "b": "b0"}
    assert owners[managers.LEGACY] == {"f:data": {"f:b": {}}}

    # m2 changes its value: under the old manager that was a Conflict with "secretferry".
    await _write(kube, _want(namespace, "m2", {"b": "b1"}))
    await _write(kube, _want(namespace, "m1", {"a": "a1"}))
    data, owners = await _read(kube, namespace)
    assert data == {"own": "owner-value", "a": "a1", "b": "b1"}
    assert managers.LEGACY not in owners
    assert owners["secretferry/m2"] == {"f:data": {"f:b": {}}}
    assert owners["kubectl-create"]["f:data"] == {".": {}, "f:own": {}}  # the owner's own stays theirs


async def test_an_upgraded_owned_target_loses_what_0x_wrote_and_no_longer_wants(
    kube: client.Kube, namespace: str
) -> None:
    old = _want(
        namespace, "app", {"a": "1", "stale": "x"}, policy="Owner", labels={"keep": "1", "dropped": "1"}
    )
    await objects.create(kube, old.manifest(), field_manager=managers.LEGACY)
    await objects.apply(kube, old.manifest(), field_manager=managers.LEGACY, force=True)

    new = _want(namespace, "app", {"a": "2"}, policy="Owner", labels={"keep": "1"})
    await _write(kube, new)
    obj = await objects.get(kube, kind="Secret", namespace=namespace, name="shared")
    assert obj is not None
    assert set(obj["data"]) == {"a"}
    assert obj["metadata"]["labels"] == {"keep": "1"}
    assert [e["manager"] for e in obj["metadata"]["managedFields"]] == ["secretferry/app"]
    # And from now on it is an ordinary owned target: an unchanged write stores nothing.
    version = obj["metadata"]["resourceVersion"]
    await _write(kube, new)
    again = await objects.get(kube, kind="Secret", namespace=namespace, name="shared")
    assert again is not None and again["metadata"]["resourceVersion"] == version


async def test_a_hand_over_from_a_stale_read_is_refused(kube: client.Kube, namespace: str) -> None:
    await _opted_in(kube, namespace, "m1")
    applied = await objects.apply(
        kube, _want(namespace, "m1", {"a": "1"}).manifest(), field_manager=managers.LEGACY, force=False
    )
    await objects.apply(
        kube,
        _want(namespace, "m1", {"a": "1", "c": "2"}).manifest(),
        field_manager=managers.LEGACY,
        force=False,
    )
    fields = managers.hand_over(applied["metadata"]["managedFields"], to="secretferry/m1")
    assert fields is not None
    with pytest.raises(errors.Conflict):
        await objects.set_managed_fields(
            kube,
            kind="Secret",
            namespace=namespace,
            name="shared",
            resource_version=applied["metadata"]["resourceVersion"],
            managed_fields=fields,
        )

"""Secrets and ConfigMaps by server-side apply on a real apiserver."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.kube import client, errors, objects

pytestmark = pytest.mark.integration


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _secret(namespace: str, name: str, data: dict[str, str], **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, **metadata},
        "type": "Opaque",
        "data": {k: _b64(v) for k, v in data.items()},
    }


async def test_get_missing_is_none(kube: client.Kube, namespace: str) -> None:
    assert await objects.get(kube, kind="Secret", namespace=namespace, name="nope") is None
    assert await objects.get(kube, kind="ConfigMap", namespace=namespace, name="nope") is None


async def test_apply_creates_then_unchanged_apply_writes_nothing(kube: client.Kube, namespace: str) -> None:
    manifest = _secret(
        namespace,
        "s",
        {"a": "1"},
        labels={"app.kubernetes.io/managed-by": "secretferry"},
        annotations={"secretferry.io/data-hmac": "abc"},
    )
    first = await objects.apply(kube, manifest, force=True)
    assert first["data"] == {"a": _b64("1")}
    assert first["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "secretferry"
    second = await objects.apply(kube, manifest, force=True)
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    fetched = await objects.get(kube, kind="Secret", namespace=namespace, name="s")
    assert fetched is not None
    assert fetched["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    changed = await objects.apply(kube, _secret(namespace, "s", {"a": "2"}), force=True)
    assert changed["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    # Fields we stopped applying are removed (we owned them alone).
    assert "labels" not in changed["metadata"] or not changed["metadata"].get("labels")


async def test_string_data_and_configmap(kube: client.Kube, namespace: str) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "sd", "namespace": namespace},
        "stringData": {"k": "v"},
    }
    applied = await objects.apply(kube, secret, force=True)
    assert applied["data"] == {"k": _b64("v")}
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": namespace},
        "data": {"x": "y"},
    }
    assert (await objects.apply(kube, cm, force=True))["data"] == {"x": "y"}


async def test_merge_keeps_foreign_keys(
    kube: client.Kube, control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.kubectl(
        "create", "secret", "generic", "m", "-n", namespace, "--from-literal=foreign=theirs"
    )
    applied = await objects.apply(kube, _secret(namespace, "m", {"ours": "mine"}), force=False)
    assert applied["data"] == {"foreign": _b64("theirs"), "ours": _b64("mine")}


async def test_conflict_with_another_field_manager(
    kube: client.Kube, control_plane: ControlPlane, namespace: str
) -> None:
    theirs = _secret(namespace, "c", {"shared": "theirs"})
    control_plane.kubectl(
        "apply", "--server-side", "--field-manager=other", "-f", "-", input=json.dumps(theirs)
    )
    with pytest.raises(errors.Conflict) as caught:
        await objects.apply(kube, _secret(namespace, "c", {"shared": "ours"}), force=False)
    assert caught.value.managers == {"other"}
    assert caught.value.fields == (".data.shared",)
    assert "ours" not in str(caught.value) and _b64("ours") not in str(caught.value)
    # force takes the field over
    taken = await objects.apply(kube, _secret(namespace, "c", {"shared": "ours"}), force=True)
    assert taken["data"]["shared"] == _b64("ours")


async def test_owner_reference_to_custom_object(
    kube: client.Kube, control_plane: ControlPlane, namespace: str, test_crds: str
) -> None:
    control_plane.apply(
        {"apiVersion": f"{test_crds}/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": namespace}}
    )
    owner = await kube.request("GET", f"/apis/{test_crds}/v1/namespaces/{namespace}/widgets/w")
    reference = {
        "apiVersion": f"{test_crds}/v1",
        "kind": "Widget",
        "name": "w",
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    applied = await objects.apply(
        kube, _secret(namespace, "owned", {"a": "1"}, ownerReferences=[reference]), force=True
    )
    assert applied["metadata"]["ownerReferences"] == [reference]


async def test_remove_keys(kube: client.Kube, control_plane: ControlPlane, namespace: str) -> None:
    # `shared` is claimed by another manager too, so our apply alone cannot drop it.
    theirs = _secret(namespace, "r", {"shared": "v"})
    control_plane.kubectl(
        "apply", "--server-side", "--field-manager=other", "-f", "-", input=json.dumps(theirs)
    )
    await objects.apply(kube, _secret(namespace, "r", {"shared": "v", "ours": "1"}), force=True)
    kept = await objects.apply(kube, _secret(namespace, "r", {"ours": "1"}), force=True)
    assert set(kept["data"]) == {"shared", "ours"}
    removed = await objects.remove_keys(
        kube, kind="Secret", namespace=namespace, name="r", keys=["shared", "absent"]
    )
    assert set(removed["data"]) == {"ours"}
    again = await objects.remove_keys(kube, kind="Secret", namespace=namespace, name="r", keys=["shared"])
    assert again["metadata"]["resourceVersion"] == removed["metadata"]["resourceVersion"]
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rc", "namespace": namespace}}
    await objects.apply(kube, {**cm, "data": {"a": "1", "b": "2"}}, force=True)
    result = await objects.remove_keys(kube, kind="ConfigMap", namespace=namespace, name="rc", keys=["a"])
    assert result["data"] == {"b": "2"}


async def test_delete(kube: client.Kube, namespace: str) -> None:
    applied = await objects.apply(kube, _secret(namespace, "d", {"a": "1"}), force=True)
    with pytest.raises(errors.Conflict):
        await objects.delete(kube, kind="Secret", namespace=namespace, name="d", uid="not-the-uid")
    assert await objects.delete(
        kube, kind="Secret", namespace=namespace, name="d", uid=applied["metadata"]["uid"]
    )
    assert not await objects.delete(kube, kind="Secret", namespace=namespace, name="d")
    assert await objects.get(kube, kind="Secret", namespace=namespace, name="d") is None


async def test_apply_rejects_incomplete_manifests(kube: client.Kube) -> None:
    with pytest.raises(ValueError, match="namespace"):
        await objects.apply(
            kube, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}, force=True
        )
    with pytest.raises(ValueError, match="Deployment"):
        await objects.apply(kube, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}}, force=True)

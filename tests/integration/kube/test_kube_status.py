"""Status subresource merge patches on custom resources."""

from __future__ import annotations

import pytest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.kube import client, errors, status

pytestmark = pytest.mark.integration


async def test_patch_status_namespaced(
    kube: client.Kube, control_plane: ControlPlane, namespace: str, test_crds: str
) -> None:
    control_plane.apply(
        {
            "apiVersion": f"{test_crds}/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "namespace": namespace},
            "spec": {"size": 1},
        }
    )
    where = {"group": test_crds, "version": "v1", "plural": "widgets", "namespace": namespace, "name": "w"}
    await status.patch_status(
        kube, **where, status={"conditions": [{"type": "Ready", "status": "True"}], "keys": 3}
    )
    await status.patch_status(kube, **where, status={"keys": 4})
    got = await kube.request("GET", f"/apis/{test_crds}/v1/namespaces/{namespace}/widgets/w")
    assert got["status"] == {"conditions": [{"type": "Ready", "status": "True"}], "keys": 4}
    assert got["metadata"]["generation"] == 1  # status writes never bump the generation
    assert got["spec"] == {"size": 1}


async def test_patch_status_cluster_scoped(
    kube: client.Kube, control_plane: ControlPlane, test_crds: str
) -> None:
    control_plane.apply({"apiVersion": f"{test_crds}/v1", "kind": "Gadget", "metadata": {"name": "g-status"}})
    try:
        await status.patch_status(
            kube,
            group=test_crds,
            version="v1",
            plural="gadgets",
            namespace=None,
            name="g-status",
            status={"ok": True},
        )
        got = await kube.request("GET", f"/apis/{test_crds}/v1/gadgets/g-status")
        assert got["status"] == {"ok": True}
    finally:
        control_plane.kubectl("delete", f"gadgets.{test_crds}", "g-status", check=False)


async def test_patch_status_missing_object(kube: client.Kube, namespace: str, test_crds: str) -> None:
    with pytest.raises(errors.NotFound):
        await status.patch_status(
            kube, group=test_crds, version="v1", plural="widgets", namespace=namespace, name="gone", status={}
        )


def test_core_group_paths() -> None:
    assert (
        status.resource_path(group="", version="v1", plural="secrets", namespace="n", name="s")
        == "/api/v1/namespaces/n/secrets/s"
    )

"""A ServiceAccount's annotations (the opt-in read before a TokenRequest)."""

from __future__ import annotations

import pytest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.kube import client, errors, serviceaccounts

pytestmark = pytest.mark.integration


async def test_read_annotations(kube: client.Kube, control_plane: ControlPlane, namespace: str) -> None:
    control_plane.kubectl("create", "serviceaccount", "deployer", "-n", namespace)
    assert await serviceaccounts.read_annotations(kube, namespace=namespace, name="deployer") == {}
    control_plane.kubectl(
        "annotate", "serviceaccount", "deployer", "-n", namespace, "secretferry.io/allowed-identities=ferry"
    )
    annotations = await serviceaccounts.read_annotations(kube, namespace=namespace, name="deployer")
    assert annotations == {"secretferry.io/allowed-identities": "ferry"}
    with pytest.raises(errors.NotFound, match=f"ServiceAccount {namespace}/nope not found"):
        await serviceaccounts.read_annotations(kube, namespace=namespace, name="nope")

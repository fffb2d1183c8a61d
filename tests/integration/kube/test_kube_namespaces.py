"""Namespace labels from the apiserver, fed to the selector matcher."""

from __future__ import annotations

import pytest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.kube import client, errors, namespaces

pytestmark = pytest.mark.integration


async def test_labels(kube: client.Kube, control_plane: ControlPlane, namespace: str) -> None:
    control_plane.kubectl("label", "namespace", namespace, "team=payments")
    labels = await namespaces.labels(kube, namespace)
    assert labels["team"] == "payments"
    assert labels["kubernetes.io/metadata.name"] == namespace
    assert namespaces.matches_selector(labels, {"matchLabels": {"team": "payments"}})
    with pytest.raises(errors.NotFound):
        await namespaces.labels(kube, "no-such-namespace")

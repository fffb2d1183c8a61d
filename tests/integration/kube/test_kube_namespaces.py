"""Namespace labels from the apiserver, as the allowedNamespaces selector reads them."""

from __future__ import annotations

import pytest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.kube import client, errors, namespaces
from secretferry.models import base as models_base

pytestmark = pytest.mark.integration


async def test_labels(kube: client.Kube, control_plane: ControlPlane, namespace: str) -> None:
    control_plane.kubectl("label", "namespace", namespace, "team=payments")
    labels = await namespaces.labels(kube, namespace)
    assert labels["team"] == "payments"
    assert labels["kubernetes.io/metadata.name"] == namespace
    assert models_base.LabelSelector.model_validate({"matchLabels": {"team": "payments"}}).matches(labels)
    with pytest.raises(errors.NotFound):
        await namespaces.labels(kube, "no-such-namespace")

"""Fixtures for the kube layer against the real local control plane: a connected ``Kube`` and
two throwaway CRDs (namespaced ``widgets``, cluster-scoped ``gadgets``) to stand in for ours."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.kube import client

TEST_GROUP = "kubetest.secretferry.io"


def _crd(plural: str, kind: str, scope: str) -> dict[str, object]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{TEST_GROUP}"},
        "spec": {
            "group": TEST_GROUP,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            },
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture(scope="session")
def test_crds(control_plane: ControlPlane) -> str:
    """Install the test CRDs once; returns their group."""
    control_plane.apply(_crd("widgets", "Widget", "Namespaced"))
    control_plane.apply(_crd("gadgets", "Gadget", "Cluster"))
    control_plane.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        f"crd/widgets.{TEST_GROUP}",
        f"crd/gadgets.{TEST_GROUP}",
    )
    return TEST_GROUP


@pytest.fixture
async def kube(control_plane: ControlPlane) -> AsyncIterator[client.Kube]:
    connected = await client.connect(kubeconfig=str(control_plane.kubeconfig))
    try:
        yield connected
    finally:
        await connected.close()

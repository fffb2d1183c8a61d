"""events.k8s.io/v1 Events on a real apiserver; failures are swallowed."""

from __future__ import annotations

import logging

import pytest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.kube import client, events

pytestmark = pytest.mark.integration


async def test_post_event(kube: client.Kube, control_plane: ControlPlane, namespace: str) -> None:
    control_plane.kubectl("create", "configmap", "target", "-n", namespace)
    cm = await kube.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/target")
    regarding: events.ObjectRef = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "target",
        "namespace": namespace,
        "uid": cm["metadata"]["uid"],
    }
    await events.post(
        kube,
        regarding=regarding,
        reason="Synced",
        note="3 keys synced",
        type="Normal",
        action="Sync",
        reporting_instance="test-pod",
    )
    listed = await kube.request("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    [event] = listed["items"]
    assert event["reason"] == "Synced"
    assert event["regarding"]["uid"] == cm["metadata"]["uid"]
    assert event["reportingController"] == "secretferry.io/operator"
    assert event["reportingInstance"] == "test-pod"
    assert event["eventTime"]


async def test_failures_are_logged_not_raised(kube: client.Kube, caplog: pytest.LogCaptureFixture) -> None:
    regarding: events.ObjectRef = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "x",
        "namespace": "no-such-namespace",
        "uid": "u",
    }
    with caplog.at_level(logging.WARNING, logger="secretferry.kube.events"):
        await events.post(
            kube,
            regarding=regarding,
            reason="R",
            note="n",
            type="Warning",
            action="A",
            reporting_instance="i",
        )
    assert "could not post event R" in caplog.text

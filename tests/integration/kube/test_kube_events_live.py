"""events.k8s.io/v1 Events on a real apiserver; failures are swallowed."""

from __future__ import annotations

import logging

import pytest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.kube import client, events

pytestmark = pytest.mark.integration


def _configmap(name: str, namespace: str, uid: str = "u") -> events.ObjectRef:
    """What an Event is about: a ConfigMap (any kind would do)."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "namespace": namespace, "uid": uid}


async def _post_warning(
    kube: client.Kube, regarding: events.ObjectRef, *, namespaces: events.TerminatingNamespaces | None = None
) -> bool:
    """A Warning whose words do not matter to the test: reason R, note n, action A."""
    return await events.post(
        kube,
        regarding=regarding,
        reason="R",
        note="n",
        type="Warning",
        action="A",
        reporting_instance="i",
        namespaces=namespaces,
    )


async def test_post_event(kube: client.Kube, control_plane: ControlPlane, namespace: str) -> None:
    control_plane.kubectl("create", "configmap", "target", "-n", namespace)
    cm = await kube.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/target")
    regarding = _configmap("target", namespace, cm["metadata"]["uid"])
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


async def test_failures_are_logged_not_raised(
    kube: client.Kube, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The Event's name is the object's name plus a timestamp: a name that is no DNS subdomain makes
    # the apiserver refuse the Event (422), a failure that is not about the namespace.
    with caplog.at_level(logging.WARNING, logger="secretferry.kube.events"):
        posted = await _post_warning(kube, _configmap("Not A Name", namespace))
    assert posted is False
    assert "could not post event R" in caplog.text


async def test_a_missing_namespace_is_remembered_not_warned_about(
    kube: client.Kube, caplog: pytest.LogCaptureFixture
) -> None:
    regarding = _configmap("x", "no-such-namespace")
    memory = events.TerminatingNamespaces()
    with caplog.at_level(logging.DEBUG, logger="secretferry.kube.events"):
        for _ in range(2):
            posted = await _post_warning(kube, regarding, namespaces=memory)
            assert posted is False
    assert "no-such-namespace" in memory
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == []
    assert sum("is being deleted" in r.getMessage() for r in caplog.records) == 1

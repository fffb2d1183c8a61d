"""Rollout planning: one workload listing per namespace and batch, however many Secrets changed.

On virtual loop time (``looptime``): the fake apiserver's latency costs no wall time.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from secretferry.kube import workloads
from secretferry.models import secretsync as sync_models
from secretferry.reconcile import rollouts

REF = {
    "apiVersion": "secretferry.io/v1alpha1",
    "kind": "SecretSync",
    "name": "app",
    "namespace": "team",
    "uid": "u",
}
LATENCY_SECONDS = 0.02  # per fake apiserver call: long enough for changes to pile up behind a listing

pytestmark = pytest.mark.looptime


def _deployment(name: str, secret: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "annotations": {"secretferry.io/auto-reload": "true"} if annotations is None else annotations,
            "resourceVersion": "7",
        },
        "spec": {"template": {"spec": {"containers": [{"envFrom": [{"secretRef": {"name": secret}}]}]}}},
    }


class FakeKube:
    """Answers workload listings (each call takes ``LATENCY_SECONDS``) and records every call;
    a listing with a field selector (``workloads.read``) is recorded as ``READ``."""

    def __init__(
        self, deployments: list[dict[str, Any]], statefulsets: list[dict[str, Any]] | None = None
    ) -> None:
        self.deployments = deployments
        self.statefulsets = statefulsets or []
        self.cache: dict[str, tuple[float, bool]] = {"rollouts-supported": (1e18, False)}
        self.calls: list[tuple[str, str]] = []
        self.bodies: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []

    async def request(
        self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None, **_: Any
    ) -> dict[str, Any]:
        selected = (query or {}).get("fieldSelector")
        self.calls.append(("READ" if selected else method, path))
        await asyncio.sleep(LATENCY_SECONDS)
        if method == "GET":
            items = {"deployments": self.deployments, "statefulsets": self.statefulsets}.get(
                path.rsplit("/", 1)[-1], []
            )
            if selected:
                items = [i for i in items if f"metadata.name={i['metadata']['name']}" == selected]
            return {"items": items}
        if method == "PATCH":
            self.bodies.append(body)
        if method == "POST":
            self.events.append(body)
        return {}


def _sync(namespace: str, name: str, **spec: Any) -> sync_models.SecretSync:
    return sync_models.SecretSync.from_body(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "SecretSync",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {
                "identityRef": {"name": "id"},
                "sources": [{"projectId": "p", "environment": "dev", "path": "/"}],
                **spec,
            },
        }
    )


async def test_a_burst_of_changes_in_one_namespace_lists_workloads_once_per_kind() -> None:
    db = _deployment("db", "unrelated", {"secretferry.io/restart-on": "other, extra"})
    kube = FakeKube([_deployment(f"web-{i}", f"s{i}") for i in range(3)], [db])
    manager = rollouts.RolloutManager(kube, cooldown_seconds=0.0, instance="test")  # type: ignore[arg-type]
    ref: Any = REF
    for i in range(50):
        manager.data_changed(_sync("team", f"app{i}"), f"s{i}", f"hmac-{i}", ref)
    explicit = _sync("team", "extra", rolloutRestartTargets=[{"kind": "StatefulSet", "name": "db"}])
    manager.data_changed(explicit, "s-extra", "hmac-x", ref)
    await asyncio.sleep(10)  # virtual: far more than 51 calls' latency
    assert manager.restarts == 4
    gets = [path for method, path in kube.calls if method == "GET"]
    patches = sorted(
        path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1] for m, path in kube.calls if m == "PATCH"
    )
    await manager.close()
    assert len(gets) == 3  # deployments, statefulsets, daemonsets: once for all 51 changes
    assert len([m for m, _ in kube.calls if m == "READ"]) == 4  # each workload read before its patch
    assert patches == ["deployments/web-0", "deployments/web-1", "deployments/web-2", "statefulsets/db"]
    assert len([m for m, _ in kube.calls if m == "POST"]) == 4  # one RolloutRestarted Event each


async def test_a_change_during_a_listing_gets_a_listing_of_its_own() -> None:
    """A workload created after a listing started may hold old data: changes that arrive while a
    listing runs are planned with the next one, never with the one already under way."""
    kube = FakeKube([])
    manager = rollouts.RolloutManager(kube, cooldown_seconds=0.0, instance="test")  # type: ignore[arg-type]
    ref: Any = REF
    manager.data_changed(_sync("team", "a"), "s0", "h0", ref)
    await asyncio.sleep(LATENCY_SECONDS / 2)  # the first listing is under way now
    assert len(kube.calls) == 1
    kube.deployments = [_deployment("late", "s1")]
    manager.data_changed(_sync("team", "b"), "s1", "h1", ref)
    await asyncio.sleep(10)  # virtual: far more than both listings' latency
    assert manager.restarts == 1
    await manager.close()
    assert len([c for c in kube.calls if c[0] == "GET"]) == 6
    assert len([c for c in kube.calls if c[0] == "READ"]) == 1
    assert [path for m, path in kube.calls if m == "PATCH"] == [
        "/apis/apps/v1/namespaces/team/deployments/late"
    ]


async def test_rollouts_disabled_plan_nothing() -> None:
    """SECRETFERRY_ROLLOUTS_ENABLED=false: the chart grants no workload rights, so no call at all."""
    kube = FakeKube([_deployment("web", "s0")])
    manager = rollouts.RolloutManager(kube, cooldown_seconds=0.0, instance="test", enabled=False)  # type: ignore[arg-type]
    ref: Any = REF
    explicit = _sync("team", "a", rolloutRestartTargets=[{"kind": "Deployment", "name": "web"}])
    manager.data_changed(explicit, "s0", "h0", ref)
    await asyncio.sleep(10)  # virtual: far more than any listing's latency
    await manager.close()
    assert manager.restarts == 0
    assert kube.calls == []


@pytest.mark.parametrize(
    ("annotations", "secret", "admitted"),
    [
        ({"secretferry.io/restart-on": "app"}, "s", True),
        ({"secretferry.io/restart-on": " other , app "}, "s", True),
        ({"secretferry.io/restart-on": "other"}, "s", False),
        ({"secretferry.io/restart-on": "*"}, "s", False),  # no wildcard
        ({"secretferry.io/restart-on": "ap"}, "s", False),  # exact names only
        ({"secretferry.io/restart-on": ""}, "s", False),
        ({}, "s", False),
        ({"secretferry.io/auto-reload": "true"}, "s", True),  # reads Secret s, opted in to reloads
        ({"secretferry.io/auto-reload": "true"}, "t", False),  # does not read Secret t
        ({"secretferry.io/auto-reload": "false"}, "s", False),
        ({"secretferry.io/restart-on-app": "true"}, "s", False),
    ],
)
def test_refusal(annotations: dict[str, str], secret: str, admitted: bool) -> None:
    workload = workloads.Workload(
        kind="Deployment",
        name="web",
        annotations=annotations,
        pod_spec={"containers": [{"envFrom": [{"secretRef": {"name": "s"}}]}]},
        resource_version="1",
    )
    why = rollouts.refusal(workload, sync_name="app", secret_name=secret)
    assert (why is None) is admitted
    if why is not None:
        assert "secretferry.io/restart-on" in why and "'app'" in why and "Deployment web" in why


async def test_an_explicit_target_that_did_not_opt_in_is_not_restarted() -> None:
    """``rolloutRestartTargets`` names a workload its author cannot patch: without the workload's
    ``restart-on`` listing the SecretSync nothing is patched, and a Warning Event says why."""
    kube = FakeKube([_deployment("web", "unrelated", {}), _deployment("api", "unrelated", {})])
    manager = rollouts.RolloutManager(kube, cooldown_seconds=0.0, instance="test")  # type: ignore[arg-type]
    ref: Any = REF
    targets = [{"kind": "Deployment", "name": n} for n in ("web", "api", "ghost")]
    manager.data_changed(_sync("team", "app", rolloutRestartTargets=targets), "s0", "h0", ref)
    await asyncio.sleep(10)  # virtual
    assert manager.restarts == 0
    assert [m for m, _ in kube.calls if m == "PATCH"] == []
    assert [e["reason"] for e in kube.events] == ["RolloutNotOptedIn"] * 3
    assert all(e["type"] == "Warning" and "secretferry.io/restart-on" in e["note"] for e in kube.events)
    # A workload that does not exist reads the same as one that did not opt in: no existence oracle.
    notes = {e["note"].split(" ", 2)[1]: e["note"] for e in kube.events}  # workload name → note
    assert notes["api"].replace("Deployment api", "X") == notes["ghost"].replace("Deployment ghost", "X")
    kube.events.clear()
    kube.deployments[0]["metadata"]["annotations"] = {"secretferry.io/restart-on": "app"}
    targets = targets[:2]
    manager.data_changed(_sync("team", "app", rolloutRestartTargets=targets), "s0", "h1", ref)
    await asyncio.sleep(10)  # virtual
    await manager.close()
    assert manager.restarts == 1
    assert [p for m, p in kube.calls if m == "PATCH"] == ["/apis/apps/v1/namespaces/team/deployments/web"]
    # The patch carries the version the opt-in was read at: taken back meanwhile, it conflicts.
    assert kube.bodies[0]["metadata"] == {"resourceVersion": "7"}
    assert kube.bodies[0]["spec"]["template"]["metadata"]["annotations"] == {
        "secretferry.io/restart-s0": "h1"
    }

"""Rollout planning: one workload listing per namespace and batch, however many Secrets changed.

On virtual loop time (``looptime``): the fake apiserver's latency costs no wall time.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

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


def _deployment(name: str, secret: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": {"secretferry.io/auto-reload": "true"}},
        "spec": {"template": {"spec": {"containers": [{"envFrom": [{"secretRef": {"name": secret}}]}]}}},
    }


class FakeKube:
    """Answers workload listings (each call takes ``LATENCY_SECONDS``) and records every call."""

    def __init__(self, deployments: list[dict[str, Any]]) -> None:
        self.deployments = deployments
        self.cache: dict[str, tuple[float, bool]] = {"rollouts-supported": (1e18, False)}
        self.calls: list[tuple[str, str]] = []

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self.calls.append((method, path))
        await asyncio.sleep(LATENCY_SECONDS)
        if method == "GET":
            return {"items": self.deployments if path.endswith("/deployments") else []}
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
    kube = FakeKube([_deployment(f"web-{i}", f"s{i}") for i in range(3)])
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

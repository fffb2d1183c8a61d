"""Rolling restarts of the workloads that consume a synced Secret.

A restart is what ``kubectl rollout restart`` does: change an annotation on the pod template so the
controller rolls out new pods, which read the new Secret. We patch our own annotation (e.g. a data
HMAC), so restarting twice for the same data is a no-op write the apiserver drops.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal
from urllib.parse import quote

from secretferry.kube import client, errors
from secretferry.kube.client import Kube

WorkloadKind = Literal["Deployment", "StatefulSet", "DaemonSet", "Rollout"]
AUTO_RELOAD_ANNOTATION = "secretferry.io/auto-reload"
MERGE_PATCH = "application/merge-patch+json"

_ROLLOUTS_GROUP_VERSION = "argoproj.io/v1alpha1"
# Argo Rollouts can be installed while we run; a "no" is re-checked after this long.
_DISCOVERY_TTL_SECONDS = 300.0
_COLLECTIONS: dict[str, str] = {
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "StatefulSet": "/apis/apps/v1/namespaces/{ns}/statefulsets",
    "DaemonSet": "/apis/apps/v1/namespaces/{ns}/daemonsets",
    "Rollout": f"/apis/{_ROLLOUTS_GROUP_VERSION}/namespaces/{{ns}}/rollouts",
}


def _collection(kind: str, namespace: str) -> str:
    try:
        template = _COLLECTIONS[kind]
    except KeyError:
        raise ValueError(
            f"unsupported workload kind {kind!r}; expected one of {sorted(_COLLECTIONS)}"
        ) from None
    return template.format(ns=quote(namespace, safe=""))


async def rollouts_supported(kube: Kube) -> bool:
    """Whether the apiserver serves Argo Rollouts (``argoproj.io/v1alpha1`` ``rollouts``); cached."""
    key = "rollouts-supported"
    known = client.cached(kube, key, ttl_seconds=_DISCOVERY_TTL_SECONDS)
    if known is not None:
        return known
    try:
        discovery = await kube.request("GET", f"/apis/{_ROLLOUTS_GROUP_VERSION}")
    except errors.NotFound:
        supported = False
    else:
        supported = any(r.get("name") == "rollouts" for r in discovery.get("resources") or ())
    client.remember(kube, key, supported)
    return supported


async def restart(
    kube: Kube, *, kind: WorkloadKind, namespace: str, name: str, annotations: dict[str, str]
) -> None:
    """Set ``annotations`` on the workload's pod template, which rolls its pods.

    A merge patch (not strategic): it works the same on Argo Rollouts, a custom resource.
    ``NotFound`` if the workload — or, for ``Rollout``, the Argo Rollouts API — does not exist.
    """
    if kind == "Rollout" and not await rollouts_supported(kube):
        raise errors.NotFound(
            404, "NotFound", "Argo Rollouts (argoproj.io/v1alpha1 rollouts) is not installed"
        )
    await kube.request(
        "PATCH",
        f"{_collection(kind, namespace)}/{quote(name, safe='')}",
        body={"spec": {"template": {"metadata": {"annotations": annotations}}}},
        content_type=MERGE_PATCH,
    )


def _containers(pod_spec: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        yield from pod_spec.get(field) or ()


def references_secret(pod_spec: Mapping[str, Any], name: str) -> bool:
    """Whether a pod spec reads Secret ``name``: env/envFrom of any container, secret or projected volumes."""
    for container in _containers(pod_spec):
        for env in container.get("env") or ():
            if ((env.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name") == name:
                return True
        for source in container.get("envFrom") or ():
            if (source.get("secretRef") or {}).get("name") == name:
                return True
    for volume in pod_spec.get("volumes") or ():
        if (volume.get("secret") or {}).get("secretName") == name:
            return True
        for projected in (volume.get("projected") or {}).get("sources") or ():
            if (projected.get("secret") or {}).get("name") == name:
                return True
    return False


async def consumers(
    kube: Kube,
    *,
    namespace: str,
    secret_names: Iterable[str],
    annotation: str = AUTO_RELOAD_ANNOTATION,
) -> dict[str, list[tuple[WorkloadKind, str]]]:
    """Per Secret name: the workloads in ``namespace`` that opted in (``annotation: "true"``) and
    whose pods read that Secret, sorted. One listing per workload kind serves every name, so a
    change that rewrote 50 Secrets of a namespace costs 3 LISTs, not 150.

    Deployments, StatefulSets, DaemonSets, and Argo Rollouts when that API is served.
    """
    names = set(secret_names)
    kinds: list[WorkloadKind] = ["Deployment", "StatefulSet", "DaemonSet"]
    if await rollouts_supported(kube):
        kinds.append("Rollout")
    found: dict[str, list[tuple[WorkloadKind, str]]] = {name: [] for name in names}
    for kind in kinds:
        answer = await kube.request("GET", _collection(kind, namespace))
        for item in answer.get("items") or ():
            metadata = item.get("metadata") or {}
            if (metadata.get("annotations") or {}).get(annotation) != "true":
                continue
            pod_spec = ((item.get("spec") or {}).get("template") or {}).get("spec") or {}
            for name in names:
                if references_secret(pod_spec, name):
                    found[name].append((kind, str(metadata.get("name"))))
    return {name: sorted(workloads) for name, workloads in found.items()}

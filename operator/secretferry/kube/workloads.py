"""Rolling restarts of the workloads that consume a synced Secret.

A restart is what ``kubectl rollout restart`` does: change an annotation on the pod template so the
controller rolls out new pods, which read the new Secret. We patch our own annotation (e.g. a data
HMAC), so restarting twice for the same data is a no-op write the apiserver drops.

Whether a workload may be restarted is the workload owner's choice, read from its own annotations
(``AUTO_RELOAD_ANNOTATION``, ``RESTART_ON_ANNOTATION``; decided in ``reconcile.rollouts``): the
operator may patch every workload of a served namespace, the author of a SecretSync may not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from secretferry.kube import client, errors
from secretferry.kube.client import Kube

WorkloadKind = Literal["Deployment", "StatefulSet", "DaemonSet", "Rollout"]
AUTO_RELOAD_ANNOTATION = "secretferry.io/auto-reload"
"""On a workload: ``"true"`` restarts it when a Secret its pods read changes."""
RESTART_ON_ANNOTATION = "secretferry.io/restart-on"
"""On a workload: the SecretSyncs of its namespace (comma-separated names) whose
``spec.rolloutRestartTargets`` may restart it. Only who can write the workload can set it."""
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


@dataclass(frozen=True)
class Workload:
    """What deciding a restart needs of a workload: its own annotations (the owner's opt-in),
    the Secrets its pods read, and the version those were read at."""

    kind: WorkloadKind
    name: str
    annotations: Mapping[str, str]
    pod_spec: Mapping[str, Any]
    resource_version: str


def _workload(kind: WorkloadKind, item: Mapping[str, Any]) -> Workload:
    metadata = item.get("metadata") or {}
    return Workload(
        kind=kind,
        name=str(metadata.get("name", "")),
        annotations={str(k): str(v) for k, v in (metadata.get("annotations") or {}).items()},
        pod_spec=((item.get("spec") or {}).get("template") or {}).get("spec") or {},
        resource_version=str(metadata.get("resourceVersion", "")),
    )


async def _argo_installed(kube: Kube, kind: WorkloadKind) -> None:
    if kind == "Rollout" and not await rollouts_supported(kube):
        raise errors.NotFound(
            404, "NotFound", "Argo Rollouts (argoproj.io/v1alpha1 rollouts) is not installed"
        )


async def read(kube: Kube, *, kind: WorkloadKind, namespace: str, name: str) -> Workload:
    """One workload as it is now; ``NotFound`` if it (or the Argo Rollouts API) does not exist.

    A LIST narrowed by a field selector, not a GET: the chart grants ``list`` and ``patch`` on
    workloads, and a GET would need a rule of its own for the same information.
    """
    await _argo_installed(kube, kind)
    answer = await kube.request(
        "GET", _collection(kind, namespace), query={"fieldSelector": f"metadata.name={name}"}
    )
    for item in answer.get("items") or ():
        if (item.get("metadata") or {}).get("name") == name:
            return _workload(kind, item)
    raise errors.NotFound(404, "NotFound", f"{kind} {namespace}/{name} does not exist")


async def restart(
    kube: Kube,
    *,
    kind: WorkloadKind,
    namespace: str,
    name: str,
    annotations: dict[str, str],
    resource_version: str | None = None,
) -> None:
    """Set ``annotations`` on the workload's pod template, which rolls its pods.

    A merge patch (not strategic): it works the same on Argo Rollouts, a custom resource.
    ``NotFound`` if the workload — or, for ``Rollout``, the Argo Rollouts API — does not exist.
    With ``resource_version`` the apiserver refuses (``Conflict``) a workload changed since it was
    read at that version: its opt-in, checked on what was read, may have been taken back.
    """
    await _argo_installed(kube, kind)
    body: dict[str, Any] = {"spec": {"template": {"metadata": {"annotations": annotations}}}}
    if resource_version:
        body["metadata"] = {"resourceVersion": resource_version}
    await kube.request(
        "PATCH",
        f"{_collection(kind, namespace)}/{quote(name, safe='')}",
        body=body,
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

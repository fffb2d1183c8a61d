"""What the plugin reads and writes, each call answering a value or a :class:`Denied` saying why not.

Why not raise: the plugin runs with whatever RBAC its user has. A namespace user may read their
SecretSyncs but not a ClusterMachineIdentity, nor Events; ``why`` must still show what it can,
and say plainly what it could not read ("forbidden"), instead of stopping at the first refusal
or printing a traceback. Only the apiserver is asked, never the operator's endpoints.

Nothing here reads a Secret or a ConfigMap: SecretSyncs, identities and Events carry no values
(the operator keeps them out of status and Event notes), so neither can the plugin's output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from secretferry.kube import client, customresources, errors, status, watching
from secretferry.models import base as models_base

SECRET_SYNCS: Final = "secretsyncs"
MACHINE_IDENTITIES: Final = "machineidentities"
CLUSTER_MACHINE_IDENTITIES: Final = "clustermachineidentities"
_MERGE_PATCH: Final = "application/merge-patch+json"


@dataclass(frozen=True, slots=True)
class Denied:
    """A read or write the apiserver refused or could not answer: what, and its short reason."""

    what: str
    why: str

    def __str__(self) -> str:
        return f"cannot {self.what}: {self.why}"


def _why(exc: errors.KubeError) -> str:
    if isinstance(exc, errors.Forbidden):
        return "forbidden (your RBAC does not allow it)"
    if isinstance(exc, errors.ExecCredentialRefused):
        return f"unauthorized: {exc.message}"
    if isinstance(exc, errors.Unauthorized):
        return "unauthorized (your credentials were refused)"
    if isinstance(exc, errors.NotFound):
        return "not found"
    return f"{exc.reason} ({exc.status}): {exc.message}" if exc.status else exc.message


def _path(plural: str, *, namespace: str | None, name: str) -> str:
    return status.resource_path(
        group=models_base.GROUP, version=models_base.VERSION, plural=plural, namespace=namespace, name=name
    )


async def list_syncs(kube: client.Kube, *, namespace: str | None) -> list[dict[str, Any]] | Denied:
    """Every SecretSync in ``namespace`` (all namespaces when None)."""
    where = f"in namespace {namespace}" if namespace else "in all namespaces"
    found: list[dict[str, Any]] = []
    try:
        # Paged (the operator's 1,000 a page): -A over 10,000 SecretSyncs is 10 answers, not one.
        path = customresources.collection_path(SECRET_SYNCS, namespace=namespace)
        async for items, _ in watching.list_pages(kube, path=path):
            found.extend(items)
        return found
    except errors.KubeError as exc:
        return Denied(f"list SecretSyncs {where}", _why(exc))


async def get_sync(kube: client.Kube, *, namespace: str, name: str) -> dict[str, Any] | Denied:
    try:
        return await kube.request("GET", _path(SECRET_SYNCS, namespace=namespace, name=name))
    except errors.KubeError as exc:
        return Denied(f"get SecretSync {namespace}/{name}", _why(exc))


async def get_identity(kube: client.Kube, *, kind: str, namespace: str, name: str) -> dict[str, Any] | Denied:
    """The MachineIdentity (in ``namespace``) or ClusterMachineIdentity a SecretSync names."""
    cluster = kind == "ClusterMachineIdentity"
    plural = CLUSTER_MACHINE_IDENTITIES if cluster else MACHINE_IDENTITIES
    shown = name if cluster else f"{namespace}/{name}"
    try:
        return await kube.request("GET", _path(plural, namespace=None if cluster else namespace, name=name))
    except errors.KubeError as exc:
        return Denied(f"get {kind} {shown}", _why(exc))


async def events_about(
    kube: client.Kube, *, namespace: str, kind: str, name: str
) -> list[dict[str, Any]] | Denied:
    """The Events regarding one object (core/v1, which shows events.k8s.io's too), oldest first."""
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/events"
    selector = f"involvedObject.kind={kind},involvedObject.name={name}"
    try:
        listing = await kube.request("GET", path, query={"fieldSelector": selector})
    except errors.KubeError as exc:
        return Denied(f"list Events in namespace {namespace}", _why(exc))
    items = list(listing.get("items") or [])
    return sorted(items, key=event_time)


def event_time(event: dict[str, Any]) -> str:
    """When an Event last happened, as RFC 3339 text (sortable): series, last timestamp, event time."""
    series = event.get("series") or {}
    return str(
        series.get("lastObservedTime")
        or event.get("lastTimestamp")
        or event.get("eventTime")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


async def annotate(kube: client.Kube, *, namespace: str, name: str, key: str, value: str) -> Denied | None:
    """Set one annotation on a SecretSync (a merge patch of metadata only: spec is not touched)."""
    try:
        await kube.request(
            "PATCH",
            _path(SECRET_SYNCS, namespace=namespace, name=name),
            body={"metadata": {"annotations": {key: value}}},
            content_type=_MERGE_PATCH,
        )
    except errors.KubeError as exc:
        return Denied(f"patch SecretSync {namespace}/{name}", _why(exc))
    return None


CLUSTER_SECRET_SYNCS: Final = "clustersecretsyncs"
CLUSTER_EVENTS_NAMESPACE: Final = "default"
"""Where Events about a cluster-scoped object are (the operator posts them there, as kubectl's
``describe`` looks for them)."""


async def list_cluster_syncs(kube: client.Kube) -> list[dict[str, Any]] | Denied:
    """Every ClusterSecretSync (cluster-scoped: an admin's read)."""
    found: list[dict[str, Any]] = []
    try:
        path = customresources.collection_path(CLUSTER_SECRET_SYNCS, namespace=None)
        async for items, _ in watching.list_pages(kube, path=path):
            found.extend(items)
        return found
    except errors.KubeError as exc:
        return Denied("list ClusterSecretSyncs", _why(exc))


async def get_cluster_sync(kube: client.Kube, *, name: str) -> dict[str, Any] | Denied:
    try:
        return await kube.request("GET", _path(CLUSTER_SECRET_SYNCS, namespace=None, name=name))
    except errors.KubeError as exc:
        return Denied(f"get ClusterSecretSync {name}", _why(exc))

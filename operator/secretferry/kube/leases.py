"""Leader election with a coordination.k8s.io Lease, for replicas > 1.

Why our own and not kopf's peering: the SecretSync intake, scheduler, streams and rollouts are
our own tasks, which kopf's peering does not pause, so two replicas would both write. One Lease
decides who runs them; the others stay warm and take over when its renewals stop.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from secretferry.kube import errors
from secretferry.kube.client import Kube


def _micro(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def expired(spec: dict[str, Any], now: datetime) -> bool:
    """Whether the holder stopped renewing (pure, for tests)."""
    renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
    duration = int(spec.get("leaseDurationSeconds") or 0)
    return renewed is None or renewed + timedelta(seconds=duration) < now


async def acquire_or_renew(
    kube: Kube, *, namespace: str, name: str, identity: str, lease_seconds: int, now: datetime | None = None
) -> bool:
    """Try to hold the Lease for ``identity``; True when we hold it after this call.

    Optimistic concurrency (resourceVersion) makes two candidates' takeovers race safely: the
    loser gets 409 and simply is not the leader this round.
    """
    moment = now or datetime.now(UTC)
    path = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace, safe='')}/leases"
    try:
        lease = await kube.request("GET", f"{path}/{quote(name, safe='')}")
    except errors.NotFound:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "holderIdentity": identity,
                "leaseDurationSeconds": lease_seconds,
                "acquireTime": _micro(moment),
                "renewTime": _micro(moment),
                "leaseTransitions": 0,
            },
        }
        try:
            await kube.request("POST", path, body=body)
        except errors.Conflict:
            return False
        return True
    spec = dict(lease.get("spec") or {})
    if spec.get("holderIdentity") != identity:
        if not expired(spec, moment):
            return False
        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec["acquireTime"] = _micro(moment)
    spec.update(holderIdentity=identity, leaseDurationSeconds=lease_seconds, renewTime=_micro(moment))
    lease["spec"] = spec
    try:
        await kube.request("PUT", f"{path}/{quote(name, safe='')}", body=lease)
    except errors.Conflict:
        return False
    return True

"""Leader election on a real Lease: one holder at a time, takeover only after expiry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from secretferry.kube import leases
from secretferry.kube.client import Kube

pytestmark = pytest.mark.integration


async def test_one_holder_and_takeover_after_expiry(kube: Kube, namespace: str) -> None:
    t0 = datetime.now(UTC)
    args = {"namespace": namespace, "name": "secretferry-leader", "lease_seconds": 15}
    assert await leases.acquire_or_renew(kube, identity="a", now=t0, **args)
    assert not await leases.acquire_or_renew(kube, identity="b", now=t0 + timedelta(seconds=5), **args)
    assert await leases.acquire_or_renew(kube, identity="a", now=t0 + timedelta(seconds=10), **args)  # renew
    assert not await leases.acquire_or_renew(kube, identity="b", now=t0 + timedelta(seconds=20), **args)
    # a stopped renewing at t0+10; 15 s later the Lease is b's to take
    assert await leases.acquire_or_renew(kube, identity="b", now=t0 + timedelta(seconds=26), **args)
    assert not await leases.acquire_or_renew(kube, identity="a", now=t0 + timedelta(seconds=27), **args)
    lease = await kube.request(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/secretferry-leader"
    )
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1


@pytest.mark.parametrize(
    ("renewed_seconds_ago", "duration", "expired"),
    [(1, 15, False), (14, 15, False), (16, 15, True)],
)
def test_expiry(renewed_seconds_ago: int, duration: int, expired: bool) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    spec = {
        "renewTime": (now - timedelta(seconds=renewed_seconds_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "leaseDurationSeconds": duration,
    }
    assert leases.expired(spec, now) is expired

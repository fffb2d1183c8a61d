"""Leader election on a real Lease: one holder at a time, takeover only after the holder's renewals
stop for a lease duration (on the taker's own clock), and a released Lease taken at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from secretferry.kube import leases
from secretferry.kube.client import Kube

pytestmark = pytest.mark.integration

# Short, real-time timings: the rule is the same at any scale (unit tests cover the defaults).
TIMINGS = leases.Timings(lease_duration_seconds=3, renew_deadline_seconds=2.0, retry_period_seconds=0.5)


def _elector(kube: Kube, namespace: str, identity: str) -> leases.Elector:
    return leases.Elector(
        kube, namespace=namespace, name="secretferry-leader", identity=identity, timings=TIMINGS
    )


async def _noop() -> None:
    return None


async def test_one_holder_a_takeover_after_the_lease_ran_out_and_a_release(
    kube: Kube, namespace: str
) -> None:
    loop = asyncio.get_running_loop()
    a, b = _elector(kube, namespace, "a"), _elector(kube, namespace, "b")
    led: dict[str, float] = {}

    def started(who: str) -> Callable[[], Awaitable[None]]:
        async def record() -> None:
            led[who] = loop.time()

        return record

    ta = asyncio.create_task(a.run(on_started_leading=started("a"), on_stopped_leading=_noop))
    await asyncio.sleep(1)
    tb = asyncio.create_task(b.run(on_started_leading=started("b"), on_stopped_leading=_noop))
    await asyncio.sleep(5)
    assert "a" in led and "b" not in led
    ta.cancel()  # a crashes: no release
    killed = loop.time()
    await asyncio.sleep(6)
    assert "b" in led and led["b"] - killed >= TIMINGS.lease_duration_seconds - TIMINGS.retry_period_seconds
    lease = await kube.request(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/secretferry-leader"
    )
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1
    tb.cancel()
    assert await b.release()
    c = _elector(kube, namespace, "c")
    tc = asyncio.create_task(c.run(on_started_leading=started("c"), on_stopped_leading=_noop))
    await asyncio.sleep(1)
    assert "c" in led  # a released Lease is taken without waiting
    tc.cancel()
    await asyncio.gather(ta, tb, tc, return_exceptions=True)

"""The HMAC key Secret: created once, the same for concurrent callers, clear errors otherwise."""

from __future__ import annotations

import asyncio

import pytest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.kube import client, errors, hmackey, objects

pytestmark = pytest.mark.integration


async def test_get_or_create_is_stable(kube: client.Kube, namespace: str) -> None:
    first = await hmackey.get_or_create(kube, namespace=namespace, name="hmac")
    assert len(first) == 32
    assert await hmackey.get_or_create(kube, namespace=namespace, name="hmac") == first
    secret = await objects.get(kube, kind="Secret", namespace=namespace, name="hmac")
    assert secret is not None and secret["immutable"] is True


async def test_concurrent_creators_agree(kube: client.Kube, namespace: str) -> None:
    keys = await asyncio.gather(
        *(hmackey.get_or_create(kube, namespace=namespace, name="race") for _ in range(8))
    )
    assert len(set(keys)) == 1


async def test_missing_namespace(kube: client.Kube) -> None:
    with pytest.raises(errors.NotFound, match="namespace 'no-such-ns'"):
        await hmackey.get_or_create(kube, namespace="no-such-ns", name="hmac")


async def test_malformed_existing_secret(
    kube: client.Kube, control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.kubectl("create", "secret", "generic", "bad", "-n", namespace, "--from-literal=key=short")
    with pytest.raises(errors.Invalid, match="32 bytes"):
        await hmackey.get_or_create(kube, namespace=namespace, name="bad")

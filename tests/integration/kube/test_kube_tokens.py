"""TokenRequest, verified the way the secrets service will: with a TokenReview."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.kube import client, errors, tokens

pytestmark = pytest.mark.integration


async def test_request_token_and_review(
    kube: client.Kube, control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.kubectl("create", "serviceaccount", "app", "-n", namespace)
    token, expires = await tokens.request_token(
        kube,
        namespace=namespace,
        service_account="app",
        audiences=["secretferry-test"],
        expiration_seconds=900,
    )
    now = datetime.now(UTC)
    assert now + timedelta(seconds=800) < expires < now + timedelta(seconds=1000)
    review = await kube.request(
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": ["secretferry-test"]},
        },
    )
    assert review["status"]["authenticated"] is True
    assert review["status"]["user"]["username"] == f"system:serviceaccount:{namespace}:app"
    assert review["status"]["audiences"] == ["secretferry-test"]


async def test_missing_service_account(kube: client.Kube, namespace: str) -> None:
    with pytest.raises(errors.NotFound):
        await tokens.request_token(
            kube, namespace=namespace, service_account="nobody", audiences=["a"], expiration_seconds=600
        )

"""Reading one key of a referenced Secret; errors name the Secret and key, never the value."""

from __future__ import annotations

import pytest

from secretferry.devcluster.cluster import ControlPlane
from secretferry.kube import client, errors, secretrefs

pytestmark = pytest.mark.integration


async def test_values_are_read_and_what_is_missing_is_named_never_the_value(
    kube: client.Kube, control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.kubectl(
        "create", "secret", "generic", "creds", "-n", namespace, "--from-literal=clientSecret=s3cr3t-välue"
    )
    creds = await secretrefs.read(kube, namespace=namespace, name="creds")
    assert creds.value("clientSecret") == "s3cr3t-välue"
    with pytest.raises(errors.SecretKeyMissing) as missing:
        creds.value("clientId")
    assert f"Secret {namespace}/creds" in str(missing.value) and "'clientId'" in str(missing.value)
    assert "s3cr3t" not in str(missing.value)
    with pytest.raises(errors.NotFound) as gone:
        await secretrefs.read(kube, namespace=namespace, name="nope")
    assert f"Secret {namespace}/nope not found" in str(gone.value)


async def test_binary_value_is_refused_without_quoting_it(
    kube: client.Kube, control_plane: ControlPlane, namespace: str, tmp_path: pytest.TempPathFactory
) -> None:
    await kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/secrets",
        body={"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bin"}, "data": {"k": "/w=="}},
    )
    binary = await secretrefs.read(kube, namespace=namespace, name="bin")
    with pytest.raises(errors.SecretValueUndecodable) as caught:
        binary.value("k")
    assert caught.value.__cause__ is None
    assert "xff" not in str(caught.value).lower()


async def test_read_keeps_annotations_and_hides_data_from_repr(
    kube: client.Kube, control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.kubectl(
        "create", "secret", "generic", "opted", "-n", namespace, "--from-literal=token=r3pr-h1dden-value"
    )
    control_plane.kubectl(
        "annotate", "secret", "opted", "-n", namespace, "secretferry.io/allowed-identities=a,b"
    )
    secret = await secretrefs.read(kube, namespace=namespace, name="opted")
    assert secret.annotations["secretferry.io/allowed-identities"] == "a,b"
    assert secret.value("token") == "r3pr-h1dden-value"
    assert "r3pr" not in repr(secret) and "cjNwci" not in repr(secret)  # neither plain nor base64

"""Connecting: admin client certs, ServiceAccount tokens, in-cluster config, $KUBECONFIG; error mapping."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from secretferry.devcluster.cluster import ControlPlane, free_port
from secretferry.kube import client, errors

pytestmark = pytest.mark.integration


def _pointed_at(kubeconfig: Path, server: str) -> Path:
    """The same kubeconfig, with its one cluster's address replaced by ``server``."""
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = server
    kubeconfig.write_text(yaml.safe_dump(config))
    return kubeconfig


def _reader_token(cp: ControlPlane, namespace: str) -> str:
    """A ServiceAccount allowed to read Secrets in ``namespace`` and nothing else."""
    cp.kubectl("create", "serviceaccount", "reader", "-n", namespace)
    cp.kubectl("create", "role", "read-secrets", "--verb=get,list", "--resource=secrets", "-n", namespace)
    cp.kubectl(
        "create",
        "rolebinding",
        "reader",
        "--role=read-secrets",
        f"--serviceaccount={namespace}:reader",
        "-n",
        namespace,
    )
    return cp.token_for(namespace, "reader")


async def test_admin_kubeconfig(kube: client.Kube, control_plane: ControlPlane) -> None:
    version = await kube.request("GET", "/version")
    assert version["major"] == "1"
    assert kube.server == control_plane.server


async def test_errors_are_mapped(kube: client.Kube, namespace: str) -> None:
    with pytest.raises(errors.NotFound) as caught:
        await kube.request("GET", f"/api/v1/namespaces/{namespace}/secrets/nope")
    assert caught.value.status == 404
    assert caught.value.reason == "NotFound"
    with pytest.raises(errors.Invalid):
        await kube.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/configmaps",
            body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_Valid"}},
        )


async def test_service_account_token_kubeconfig(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    token = _reader_token(control_plane, namespace)
    kube = await client.connect(kubeconfig=str(control_plane.token_kubeconfig(token, tmp_path / "kc")))
    try:
        listed = await kube.request("GET", f"/api/v1/namespaces/{namespace}/secrets")
        assert listed["items"] == []
        with pytest.raises(errors.Forbidden):
            await kube.request("GET", "/api/v1/namespaces")
    finally:
        await kube.close()


async def test_bad_token_is_unauthorized(control_plane: ControlPlane, tmp_path: Path) -> None:
    kube = await client.connect(kubeconfig=str(control_plane.token_kubeconfig("garbage", tmp_path / "kc")))
    try:
        with pytest.raises(errors.Unauthorized):
            await kube.request("GET", "/api/v1/namespaces")
    finally:
        await kube.close()


async def test_in_cluster_config(
    control_plane: ControlPlane, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file, ca_file = tmp_path / "token", tmp_path / "ca.crt"
    token_file.write_text(_reader_token(control_plane, namespace))
    ca_file.write_text(control_plane.ca_pem)
    server = urlsplit(control_plane.server)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", str(server.hostname))
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    kube = await client.connect(service_account_dir=tmp_path)
    try:
        listed = await kube.request("GET", f"/api/v1/namespaces/{namespace}/secrets")
        assert listed["kind"] == "SecretList"
    finally:
        await kube.close()


async def test_kubeconfig_env_fallback(control_plane: ControlPlane, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(control_plane.kubeconfig))
    kube = await client.connect()
    try:
        assert (await kube.request("GET", "/version"))["major"] == "1"
    finally:
        await kube.close()


async def test_no_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(errors.NotConfigured):
        await client.connect()


async def test_connection_refused_is_unavailable(control_plane: ControlPlane, tmp_path: Path) -> None:
    dead = f"https://127.0.0.1:{free_port()}"
    kube = await client.connect(
        kubeconfig=str(_pointed_at(control_plane.token_kubeconfig("t", tmp_path / "kc"), dead))
    )
    try:
        with pytest.raises(errors.Unavailable) as caught:
            await kube.request("GET", "/version")
        assert caught.value.status == 0
        assert isinstance(caught.value.__cause__, Exception)
        json.dumps(str(caught.value))  # printable
    finally:
        await kube.close()

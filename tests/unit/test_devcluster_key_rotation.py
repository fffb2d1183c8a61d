"""``ControlPlane.restart_apiserver``: the ServiceAccount key flags change, nothing else does.

The rotation itself (JWKS, logins, refusals) is proven on a real apiserver in
``tests/integration/operator/test_operator_oidc_rotation.py``; here, with the process functions
replaced, only the argv and the bookkeeping the restart leaves behind.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from secretferry.devcluster import certs, cluster

ARGV = [
    "/bin/kube-apiserver",
    "--etcd-servers=http://127.0.0.1:1",
    "--service-account-key-file=/pki/sa.pub",
    "--service-account-signing-key-file=/pki/sa.key",
    "--authorization-mode=RBAC",
]


class _Proc:
    pid = 4242


def _plane(tmp_path: Path) -> cluster.ControlPlane:
    (tmp_path / "logs").mkdir()
    return cluster.ControlPlane(
        workdir=tmp_path,
        bin_dir=tmp_path,
        server="https://127.0.0.1:1",
        pki=certs.generate(tmp_path / "pki"),
        kubeconfig=tmp_path / "kubeconfig",
        pids={"etcd": 1, "kube-apiserver": 2, "kube-controller-manager": 3},
        apiserver_argv=list(ARGV),
    )


def test_a_restart_swaps_only_the_key_flags_and_keeps_the_stop_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stopped: list[int] = []
    spawned: list[list[str]] = []

    def spawn(name: str, argv: list[str], logdir: Path) -> subprocess.Popen[bytes]:
        spawned.append(list(argv))
        return _Proc()  # type: ignore[return-value]

    monkeypatch.setattr(cluster, "_terminate", lambda pid, name: stopped.append(pid))
    monkeypatch.setattr(cluster, "_spawn", spawn)
    monkeypatch.setattr(cluster, "_wait_ready", lambda cp, procs: None)
    cp = _plane(tmp_path)

    cp.restart_apiserver(
        verification_keys=[Path("/pki/sa.pub"), Path("/k/2.pub")], signing_key=Path("/k/2.key")
    )

    assert stopped == [2]
    assert spawned == [
        [
            "/bin/kube-apiserver",
            "--service-account-key-file=/pki/sa.pub",
            "--service-account-key-file=/k/2.pub",
            "--service-account-signing-key-file=/k/2.key",
            "--etcd-servers=http://127.0.0.1:1",
            "--authorization-mode=RBAC",
        ]
    ]
    assert cp.apiserver_argv == spawned[0]
    # The new process replaces the old one in place: stop() still ends it after the controller
    # manager and before etcd.
    assert list(cp.pids.items()) == [("etcd", 1), ("kube-apiserver", 4242), ("kube-controller-manager", 3)]


def test_a_control_plane_started_elsewhere_is_not_restarted(tmp_path: Path) -> None:
    cp = _plane(tmp_path)
    cp.apiserver_argv = []
    with pytest.raises(RuntimeError, match="not started here"):
        cp.restart_apiserver(verification_keys=[cp.pki.sa_pub], signing_key=cp.pki.sa_key)


def test_a_new_service_account_pair_matches(tmp_path: Path) -> None:
    key_path, pub_path = tmp_path / "k" / "sa-2.key", tmp_path / "k" / "sa-2.pub"
    certs.write_service_account_pair(key_path, pub_path)
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert (
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        == pub_path.read_bytes()
    )
    assert key_path.stat().st_mode & 0o077 == 0  # the private key is the owner's only

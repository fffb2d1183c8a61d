"""Control-plane profiles: ``tuned`` (tests, the README's figures) and ``production`` (defaults).

Checked against the constants and against the argv ``start`` builds, with the process spawner
replaced so that nothing is started.
"""

from __future__ import annotations

import inspect
import subprocess
from pathlib import Path
from typing import get_args

import pytest

from secretferry.devcluster import cluster

TUNED_ETCD = ("--unsafe-no-fsync",)
TUNED_APISERVER = (
    "--enable-priority-and-fairness=false",
    "--max-requests-inflight=2000",
    "--max-mutating-requests-inflight=1000",
)
# Flag names a production control plane leaves at the binaries' defaults.
PRODUCTION_OMITS = (
    "--unsafe-no-fsync",
    "--enable-priority-and-fairness",
    "--max-requests-inflight",
    "--max-mutating-requests-inflight",
)


def test_every_profile_has_its_flags() -> None:
    assert set(cluster.PROFILES) == set(get_args(cluster.Profile)) == {"tuned", "production"}


def test_tuned_skips_fsync_and_request_shaping() -> None:
    assert cluster.PROFILES["tuned"] is cluster.TUNED
    assert cluster.TUNED.etcd == TUNED_ETCD
    assert cluster.TUNED.kube_apiserver == TUNED_APISERVER


def test_production_keeps_the_defaults() -> None:
    assert cluster.PROFILES["production"] is cluster.PRODUCTION
    assert cluster.PRODUCTION.etcd == ()
    assert cluster.PRODUCTION.kube_apiserver == ()


def test_tuned_is_the_default_so_tests_are_unchanged() -> None:
    assert inspect.signature(cluster.start).parameters["profile"].default == "tuned"


class _Stop(Exception):
    """Raised by the fake spawner once it has seen the kube-apiserver's argv."""


class _NoProcess:
    pid = 0  # never signalled: _terminate is replaced too


@pytest.mark.parametrize("profile", get_args(cluster.Profile))
def test_start_passes_exactly_the_profile_flags(
    profile: cluster.Profile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv: dict[str, list[str]] = {}

    def spawn(name: str, args: list[str], logdir: Path) -> subprocess.Popen[bytes]:
        argv[name] = list(args)
        if name == "kube-apiserver":
            raise _Stop
        return _NoProcess()  # type: ignore[return-value]

    monkeypatch.setattr(cluster, "_spawn", spawn)
    monkeypatch.setattr(cluster, "_terminate", lambda pid, name: None)
    with pytest.raises(_Stop):
        cluster.start(tmp_path, bin_dir=tmp_path / "bin", profile=profile)

    flags = cluster.PROFILES[profile]
    for name, expected in (("etcd", flags.etcd), ("kube-apiserver", flags.kube_apiserver)):
        profile_args = [a for a in argv[name] if a.split("=", 1)[0] in PRODUCTION_OMITS]
        assert tuple(profile_args) == expected, name
    assert "--log-level=warn" in argv["etcd"]  # the flags every profile shares stay
    assert "--authorization-mode=RBAC" in argv["kube-apiserver"]

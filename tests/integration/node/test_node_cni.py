"""The isolated CNI plugin, run as containerd runs it, against a throwaway network namespace.

The namespace belongs to an ``unshare -n sleep`` process, so it disappears with that process and
the host's own interfaces are never touched; the test checks exactly that.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from secretferry.devcluster import cni_isolated

pytestmark = pytest.mark.integration

SUBNET = "10.244.0.0/24"


@pytest.fixture
def netns() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    proc = subprocess.Popen(["unshare", "-n", "sleep", "60"])
    try:
        path = f"/proc/{proc.pid}/ns/net"
        for _ in range(100):
            if os.readlink(path) != os.readlink("/proc/self/ns/net"):
                break
            subprocess.run(["sleep", "0.02"], check=True)
        yield path
    finally:
        proc.kill()
        proc.wait()


def _plugin(command: str, netns: str, data_dir: Path, container: str, name: str = "sf-isolated") -> Any:
    config = {"cniVersion": "0.4.0", "name": "t", "type": name, "subnet": SUBNET, "dataDir": str(data_dir)}
    proc = subprocess.run(
        [sys.executable, cni_isolated.__file__],
        input=json.dumps(config),
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "CNI_COMMAND": command,
            "CNI_NETNS": netns,
            "CNI_IFNAME": "eth0",
            "CNI_CONTAINERID": container,
            "CNI_PATH": "/nonexistent",
        },
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout) if proc.stdout.strip() else None


def _links(netns: str | None = None) -> str:
    prefix = ["nsenter", f"--net={netns}"] if netns else []
    return subprocess.run([*prefix, "ip", "-o", "addr"], capture_output=True, text=True, check=True).stdout


def test_add_gives_the_pod_an_address_inside_its_namespace_only(netns: str, tmp_path: Path) -> None:
    host_before = _links()
    result = _plugin("ADD", netns, tmp_path, "c1")
    assert result["ips"][0]["address"] == "10.244.0.2/24"
    assert "10.244.0.2/24" in _links(netns)
    assert _links() == host_before  # nothing appeared on the host
    assert netns in (tmp_path / "netns.list").read_text()  # recorded for a forced teardown


def test_an_address_is_kept_per_container_and_released_on_del(netns: str, tmp_path: Path) -> None:
    (tmp_path / "10.244.0.2").parent.mkdir(exist_ok=True)
    (tmp_path / "10.244.0.2").write_text("another-container")  # taken: the next one is chosen
    _plugin("ADD", netns, tmp_path, "c1")
    assert (tmp_path / "10.244.0.3").read_text() == "c1"
    _plugin("DEL", netns, tmp_path, "c1")
    assert sorted(p.name for p in tmp_path.glob("10.*")) == ["10.244.0.2"]
    (tmp_path / "10.244.0.2").unlink()
    _plugin("DEL", netns, tmp_path, "c1")
    assert list(tmp_path.glob("10.*")) == []
    _plugin("DEL", netns, tmp_path, "c1")  # DEL is idempotent, as CNI requires


def test_loopback_and_version(netns: str, tmp_path: Path) -> None:
    assert "0.4.0" in _plugin("VERSION", netns, tmp_path, "c1")["supportedVersions"]
    result = _plugin("ADD", netns, tmp_path, "c1", name="loopback")
    assert result["interfaces"][0]["name"] == "lo"
    assert "127.0.0.1/8" in _links(netns)

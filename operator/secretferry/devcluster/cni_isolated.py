#!/usr/bin/env python3
"""``sf-isolated``: a CNI plugin that gives each pod an interface and an address, and nothing else.

Why not bridge/ptp: they add interfaces, routes and iptables rules to the *host's* network
namespace, and the local node runs on a shared machine that must be left as it was found. The
CNI ``dummy`` plugin needs a kernel driver these machines lack. containerd 1.6 still insists on
an ``eth0`` with an IP in every pod, so this plugin creates a veth pair with *both* ends inside
the pod's own namespace and gives ``eth0`` an address from a private /24. Such pods can mount
Secrets and run, but have no route out (the operator pod itself uses the host network).

The same file answers as ``loopback`` (containerd's CRI always runs a loopback network first), so
no other plugin binary is needed. It records every network namespace it configured, so that a
forced teardown of the node can unmount the ones containerd had no chance to remove.

Standalone on purpose: containerd runs it with the host's ``python3``, outside the project's
virtualenv, so it imports only the standard library.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

CNI_VERSION = "0.4.0"
SUPPORTED = ["0.3.0", "0.3.1", "0.4.0"]
PEER_NAME = "sf-peer0"  # the veth's other end; inside the pod's namespace, so the name never clashes


def _ip(netns: str, *args: str) -> None:
    subprocess.run(["nsenter", f"--net={netns}", "ip", *args], check=True, capture_output=True)


def _error(code: int, msg: str, details: str = "") -> None:
    json.dump({"cniVersion": CNI_VERSION, "code": code, "msg": msg, "details": details}, sys.stdout)
    sys.exit(1)


def _allocate(data_dir: Path, subnet: ipaddress.IPv4Network, container_id: str) -> ipaddress.IPv4Address:
    """One file per address, named by the address and holding the container id; under a lock."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for existing in data_dir.glob("10.*"):
            if existing.read_text() == container_id:
                return ipaddress.IPv4Address(existing.name)
        for host in list(subnet.hosts())[1:]:  # .1 is left for a gateway nobody runs
            path = data_dir / str(host)
            if not path.exists():
                path.write_text(container_id)
                return host
    _error(11, "sf-isolated: no free address", str(subnet))
    raise AssertionError("unreachable")


def _release(data_dir: Path, container_id: str) -> None:
    if not data_dir.is_dir():
        return
    with (data_dir / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for existing in data_dir.glob("10.*"):
            if existing.read_text() == container_id:
                existing.unlink()


def _record_netns(data_dir: Path, netns: str) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir / "netns.list").open("a") as f:
        f.write(netns + "\n")


def _loopback(command: str, config: dict[str, Any]) -> None:
    netns = os.environ.get("CNI_NETNS", "")
    if command == "ADD":
        _ip(netns, "link", "set", "lo", "up")
        result = {
            "cniVersion": config.get("cniVersion", CNI_VERSION),
            "interfaces": [{"name": "lo", "mac": "00:00:00:00:00:00", "sandbox": netns}],
            "ips": [
                {"version": "4", "address": "127.0.0.1/8", "interface": 0},
            ],
        }
        json.dump(result, sys.stdout)


def _isolated(command: str, config: dict[str, Any]) -> None:
    netns = os.environ.get("CNI_NETNS", "")
    ifname = os.environ.get("CNI_IFNAME", "eth0")
    container_id = os.environ.get("CNI_CONTAINERID", "")
    data_dir = Path(config["dataDir"])
    subnet = ipaddress.IPv4Network(config["subnet"])
    if command == "ADD":
        _record_netns(data_dir, netns)
        address = _allocate(data_dir, subnet, container_id)
        _ip(netns, "link", "add", ifname, "type", "veth", "peer", "name", PEER_NAME)
        _ip(netns, "addr", "add", f"{address}/{subnet.prefixlen}", "dev", ifname)
        _ip(netns, "link", "set", PEER_NAME, "up")
        _ip(netns, "link", "set", ifname, "up")
        mac = ""
        if netns:
            out = subprocess.run(
                ["nsenter", f"--net={netns}", "cat", f"/sys/class/net/{ifname}/address"],
                capture_output=True,
                text=True,
                check=False,
            )
            mac = out.stdout.strip()
        json.dump(
            {
                "cniVersion": config.get("cniVersion", CNI_VERSION),
                "interfaces": [{"name": ifname, "mac": mac, "sandbox": netns}],
                "ips": [{"version": "4", "address": f"{address}/{subnet.prefixlen}", "interface": 0}],
                "dns": {},
            },
            sys.stdout,
        )
    elif command == "DEL":
        _release(data_dir, container_id)
        if netns and Path(netns).exists():
            subprocess.run(
                ["nsenter", f"--net={netns}", "ip", "link", "del", ifname], capture_output=True, check=False
            )


def main() -> None:
    command = os.environ.get("CNI_COMMAND", "")
    if command == "VERSION":
        json.dump({"cniVersion": CNI_VERSION, "supportedVersions": SUPPORTED}, sys.stdout)
        return
    raw = sys.stdin.read()
    config: dict[str, Any] = json.loads(raw) if raw.strip() else {}
    try:
        if Path(sys.argv[0]).name == "loopback" or config.get("type") == "loopback":
            _loopback(command, config)
        else:
            _isolated(command, config)
    except subprocess.CalledProcessError as exc:
        _error(999, f"sf-isolated: {' '.join(exc.cmd)} failed", exc.stderr.decode(errors="replace"))


if __name__ == "__main__":
    main()

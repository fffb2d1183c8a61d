"""A real kubelet node beside the local control plane: containerd + runc, kubelet, kube-scheduler.

Why: the operator's promise ends with "consumed by pods as mounted secrets", and the chart's
image has to run as a pod to be trusted. There is no container engine on these machines, so the
node is built from parts (see README, "The local node"):

- a **private containerd** (root under the cluster's work dir, state and socket under
  ``/run/secretferry-node-<id>``) with the CRI settings this kind of host needs:
  ``restrict_oom_score_adj`` (no CAP_SYS_RESOURCE), cgroupfs, overlayfs, a locally built pause
  image, and ``sf-isolated`` as the only CNI network (no host interface, route or iptables rule);
- the **kubelet** as node ``localhost`` with a node identity (``system:node:localhost``), its
  own cgroup subtree ``/secretferry-node-<id>``, loopback-only ports and ``syncFrequency: 1s``,
  so a Secret change reaches a mounted file in about two seconds;
- **kube-scheduler**, so Deployments get placed.

Leaving the host as it was found is part of the contract: ``stop()`` (and ``stop_from_state`` for
``make cluster-down``) ends every process, container and shim, unmounts everything mounted under
the node's directories and the network namespaces the CNI plugin made, removes the cgroup subtree
and restores the kernel settings the kubelet changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from secretferry.devcluster import certs, cni_isolated, net

NODE_NAME = "localhost"  # the apiserver prefers the Hostname address: logs/exec reach 127.0.0.1
KUBELET_SYNC_SECONDS = 1  # how often the kubelet re-syncs pods: a Secret change reaches files in ~2 s
_READY_TIMEOUT_SECONDS = 120.0  # measured ~11 s; a loaded 2-core host needs more headroom
_STOP_GRACE_SECONDS = 10.0
# The kubelet sets these at start-up (container_manager_linux.go); they are restored on stop.
_KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
# v1 hierarchies, plus the hybrid layout's cgroup2 mount (runc mirrors pod cgroups there too).
_V1_CONTROLLERS = (
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "devices",
    "freezer",
    "blkio",
    "pids",
    "systemd",
    "unified",
)
_CGROUP_FS = Path("/sys/fs/cgroup")
# containerd 1.6 shims put their sockets and fifos here, whatever the configured state directory.
_SHIM_DIRS = (Path("/run/containerd/s"), Path("/run/containerd/fifo"))
_RUN_DIRS = ("netns", "mount")
REQUIRED_COMMANDS = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "nsenter", "ip")


def unavailable_reason() -> str | None:
    """Why this host cannot run the local node, in one line; None when it can.

    Checked before anything starts, so the demo and the tests can fall back to the out-of-process
    operator instead of half-starting a node.
    """
    if os.environ.get("SECRETFERRY_NO_NODE"):
        return "SECRETFERRY_NO_NODE is set"
    if os.geteuid() != 0:
        return "the local node needs root (containerd, mounts, cgroups); not root here"
    missing = [c for c in REQUIRED_COMMANDS if shutil.which(c) is None]
    if missing:
        return f"the local node needs {', '.join(missing)}: run 'make node-deps'"
    with contextlib.suppress(OSError):
        if "overlay" not in Path("/proc/filesystems").read_text():
            return "the local node needs overlayfs, which this kernel does not offer"
    if not _CGROUP_FS.is_dir() or not (
        (_CGROUP_FS / "cgroup.controllers").exists() or (_CGROUP_FS / "memory").is_dir()
    ):
        return "the local node needs cgroups (v1 or v2) mounted at /sys/fs/cgroup"
    if not os.access(_CGROUP_FS / "memory" if (_CGROUP_FS / "memory").is_dir() else _CGROUP_FS, os.W_OK):
        return "the local node needs a writable /sys/fs/cgroup"
    return None


def _cgroup_dirs(name: str) -> list[Path]:
    if (_CGROUP_FS / "cgroup.controllers").exists():  # unified (v2)
        return [_CGROUP_FS / name]
    return [_CGROUP_FS / c / name for c in _V1_CONTROLLERS if (_CGROUP_FS / c).is_dir()]


def _make_cgroups(name: str) -> None:
    for d in _cgroup_dirs(name):
        d.mkdir(exist_ok=True)
        if d.parent.name == "cpuset":  # a new cpuset is empty until told which cpus and mems
            for f in ("cpuset.cpus", "cpuset.mems"):
                (d / f).write_text((d.parent / f).read_text())


def _cgroup_pids(name: str) -> set[int]:
    pids: set[int] = set()
    for d in _cgroup_dirs(name):
        for procs in d.rglob("cgroup.procs") if d.is_dir() else ():
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in procs.read_text().split())
    return pids


def _remove_cgroups(name: str) -> None:
    for d in _cgroup_dirs(name):
        if not d.is_dir():
            continue
        for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                sub.rmdir()
        with contextlib.suppress(OSError):
            d.rmdir()


def _read_sysctls() -> dict[str, str]:
    values = {}
    for key in _KUBELET_SYSCTLS:
        with contextlib.suppress(OSError):
            values[key] = (Path("/proc/sys") / key).read_text().strip()
    return values


def _restore_sysctls(saved: dict[str, str]) -> None:
    for key, value in saved.items():
        path = Path("/proc/sys") / key
        with contextlib.suppress(OSError):
            if path.read_text().strip() != value:
                path.write_text(value)


def _mounts_under(prefixes: Sequence[str]) -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point == p or point.startswith(p.rstrip("/") + "/") for p in prefixes):
            points.append(point)
    return points


def _unmount_all(prefixes: Sequence[str]) -> None:
    """Deepest first; a lazy unmount for whatever is still busy."""
    for _ in range(3):
        points = _mounts_under(prefixes)
        if not points:
            return
        for point in sorted(points, key=lambda p: -len(p)):
            if subprocess.run(["umount", point], capture_output=True, check=False).returncode != 0:
                subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def _processes_mentioning(needle: str) -> list[int]:
    """Processes whose command line names ``needle`` (the shims name our containerd socket)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                found.append(int(entry.name))
    return found


def _kill(pids: set[int] | list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _terminate(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    if not _wait_gone(pid, _STOP_GRACE_SECONDS):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        _wait_gone(pid, _STOP_GRACE_SECONDS)


@dataclass
class NodeState:
    """Everything ``stop`` needs, JSON-serialisable for the control plane's state file."""

    workdir: str
    run_dir: str
    cgroup: str
    ctr: str
    sysctls: dict[str, str] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    created_shim_dir: bool = False
    created_run_dirs: list[str] = field(default_factory=list)

    @property
    def socket(self) -> str:
        return f"{self.run_dir}/containerd.sock"


@dataclass
class Node:
    """A running node; ``stop()`` leaves the host as ``start()`` found it."""

    state: NodeState
    kubeconfig: Path
    kubectl: Callable[..., str]

    def ctr(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(
            [self.state.ctr, "--address", self.state.socket, "--namespace", "k8s.io", *args],
            capture_output=True,
            text=True,
            check=False,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def load_image(self, archive: Path) -> None:
        """Import an OCI archive into the node's containerd (what ``make image`` does for a rebuild)."""
        self.ctr("images", "import", "--no-unpack=false", str(archive))

    def images(self) -> list[str]:
        return self.ctr("images", "ls", "-q").split()

    def stop(self) -> None:
        stop(self.state)


def _write_config(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False) if path.suffix == ".yaml" else str(data))
    return path


def _containerd_config(state: NodeState, workdir: Path) -> str:
    root, cni = workdir / "containerd-root", workdir / "cni"
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{root}"
state = "{state.run_dir}/state"
[grpc]
  address = "{state.socket}"
[ttrpc]
  address = "{state.socket}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{workdir}/containerd-opt"
[{cri}]
  sandbox_image = "localhost/pause:local"
  # no CAP_SYS_RESOURCE here: the kubelet's -998 for the sandbox would fail runc create
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "{state.run_dir}/runc"
[{cri}.cni]
  bin_dir = "{cni}/bin"
  conf_dir = "{cni}/net.d"
  max_conf_num = 1
"""


def _install_cni(workdir: Path) -> None:
    bin_dir, conf_dir = workdir / "cni" / "bin", workdir / "cni" / "net.d"
    bin_dir.mkdir(parents=True, exist_ok=True)
    conf_dir.mkdir(parents=True, exist_ok=True)
    # containerd runs plugins outside our virtualenv: the host's python3 and the standard library.
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    source = Path(cni_isolated.__file__).read_text().split("\n", 1)[1]
    plugin = bin_dir / "sf-isolated"
    plugin.write_text(f"#!{python}\n{source}")
    plugin.chmod(0o755)
    with contextlib.suppress(FileExistsError):
        (bin_dir / "loopback").symlink_to("sf-isolated")
    conflist = {
        "cniVersion": cni_isolated.CNI_VERSION,
        "name": "sf-isolated",
        "plugins": [
            {"type": "sf-isolated", "subnet": "10.244.0.0/24", "dataDir": str(workdir / "cni-state")}
        ],
    }
    (conf_dir / "10-sf-isolated.conflist").write_text(json.dumps(conflist))


def _kubelet_config(workdir: Path, state: NodeState, *, ports: tuple[int, int]) -> dict[str, object]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",  # loopback only: nothing of the node listens on the host's network
        "port": ports[0],
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": ports[1],
        "containerRuntimeEndpoint": f"unix://{state.socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{state.cgroup}",
        "failSwapOn": False,
        "failCgroupV1": False,  # these hosts are cgroup v1 (hybrid); v1.34 only warns
        "makeIPTablesUtilChains": False,  # no KUBE-* chains on a shared host
        # The apiserver has no kubelet client certificate; the kubelet listens on loopback only.
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "syncFrequency": f"{KUBELET_SYNC_SECONDS}s",
        "podLogsDir": str(workdir / "pod-logs"),
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,  # never collect the locally imported images
        "enforceNodeAllocatable": [],
        "rotateCertificates": False,
        "clusterDomain": "cluster.local",
    }


def _wait(what: str, check: Callable[[], bool], *, timeout: float, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    raise RuntimeError(f"{what} not reached in {timeout:.0f} s\n{tail}")


def start(
    *,
    workdir: Path,
    bin_dir: Path,
    pki: certs.Pki,
    server: str,
    admin_kubeconfig: Path,
    kubectl: Callable[..., str],
    images: Sequence[Path],
    spawn: Callable[[str, Sequence[str]], subprocess.Popen[bytes]],
    on_state: Callable[[NodeState], None] = lambda _: None,
) -> Node:
    """Start containerd, kubelet and kube-scheduler; return once the node is Ready and untainted.

    ``images`` (OCI archives) are imported while the kubelet registers. Raises with the reason
    and stops whatever it started if any step fails.
    """
    reason = unavailable_reason()
    if reason:
        raise RuntimeError(reason)
    workdir.mkdir(parents=True, exist_ok=True)
    ident = secrets.token_hex(5)
    state = NodeState(
        workdir=str(workdir),
        run_dir=f"/run/secretferry-node-{ident}",
        cgroup=f"secretferry-node-{ident}",
        ctr=shutil.which("ctr") or "ctr",
        created_shim_dir=not _SHIM_DIRS[0].parent.exists(),
        created_run_dirs=[d for d in _RUN_DIRS if not (Path("/run") / d).exists()],
    )
    node = Node(state=state, kubeconfig=workdir / "kubelet.kubeconfig", kubectl=kubectl)
    try:
        Path(state.run_dir).mkdir(mode=0o700)
        state.sysctls = _read_sysctls()
        _make_cgroups(state.cgroup)
        _install_cni(workdir)
        config = workdir / "containerd.toml"
        config.write_text(_containerd_config(state, workdir))
        containerd = spawn(
            "containerd", [shutil.which("containerd") or "containerd", "--config", str(config)]
        )
        state.pids["containerd"] = containerd.pid
        on_state(state)
        _wait(
            "containerd socket", lambda: Path(state.socket).exists() and containerd.poll() is None, timeout=30
        )
        node.ctr("version")

        # Import the images while the kubelet starts; the pause image is needed by the first pod only.
        with ThreadPoolExecutor(max_workers=2) as pool:
            imports = [pool.submit(node.load_image, image) for image in images]
            _node_identity(workdir, pki=pki, server=server, kubectl=kubectl, out=node.kubeconfig)
            kubelet_config = workdir / "kubelet-config.yaml"
            _write_config(
                kubelet_config, _kubelet_config(workdir, state, ports=(net.free_port(), net.free_port()))
            )
            kubelet = spawn(
                "kubelet",
                [
                    str(bin_dir / "kubelet"),
                    f"--config={kubelet_config}",
                    f"--kubeconfig={node.kubeconfig}",
                    f"--root-dir={workdir / 'kubelet'}",
                    f"--cert-dir={workdir / 'kubelet-pki'}",
                    f"--hostname-override={NODE_NAME}",
                    "--v=1",
                ],
            )
            state.pids["kubelet"] = kubelet.pid
            scheduler = spawn(
                "kube-scheduler",
                [
                    str(bin_dir / "kube-scheduler"),
                    f"--kubeconfig={admin_kubeconfig}",
                    f"--authentication-kubeconfig={admin_kubeconfig}",
                    f"--authorization-kubeconfig={admin_kubeconfig}",
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={net.free_port()}",
                    "--v=1",
                ],
            )
            state.pids["kube-scheduler"] = scheduler.pid
            on_state(state)
            for done in imports:
                done.result()

        def ready() -> bool:
            for name, proc in (
                ("kubelet", kubelet),
                ("kube-scheduler", scheduler),
                ("containerd", containerd),
            ):
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode} during start-up")
            out = kubectl("get", "node", NODE_NAME, "-o", "json", check=False)
            if not out:
                return False
            conditions = json.loads(out).get("status", {}).get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        _wait(
            f"node {NODE_NAME} Ready",
            ready,
            timeout=_READY_TIMEOUT_SECONDS,
            log=workdir.parent / "logs" / "kubelet.log",
        )
        # The not-ready taint is added at registration and removed by the node-lifecycle
        # controller, which this control plane does not run (it would also evict pods whenever
        # the loaded host makes the kubelet late). Taken off once, as that controller would.
        kubectl("taint", "nodes", NODE_NAME, "node.kubernetes.io/not-ready:NoSchedule-", check=False)
    except BaseException:
        stop(state)
        raise
    return node


def _node_identity(
    workdir: Path, *, pki: certs.Pki, server: str, kubectl: Callable[..., str], out: Path
) -> None:
    """The kubelet logs in as ``system:node:localhost`` (group ``system:nodes``), not as admin."""
    cert, key = certs.issue_client(
        pki, directory=workdir / "node-pki", cn=f"system:node:{NODE_NAME}", org="system:nodes"
    )
    kubectl(
        "create",
        "clusterrolebinding",
        "secretferry-dev-nodes",
        "--clusterrole=system:node",
        "--group=system:nodes",
        check=False,
    )
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": server, "certificate-authority": str(pki.ca_cert)}}
        ],
        "users": [{"name": "node", "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": "node", "context": {"cluster": "local", "user": "node"}}],
        "current-context": "node",
    }
    out.write_text(yaml.safe_dump(config))
    out.chmod(0o600)


def stop(state: NodeState) -> None:
    """End the node and undo everything it did to the host; safe to call twice."""
    for name in ("kube-scheduler", "kubelet"):
        pid = state.pids.pop(name, None)
        if pid:
            _terminate(pid)
    containerd_pid = state.pids.get("containerd")
    if containerd_pid and Path(state.socket).exists():
        _remove_containers(state)
    # Whatever is left in the pods' cgroups (a container whose task would not die) goes now.
    _kill(_cgroup_pids(state.cgroup))
    pid = state.pids.pop("containerd", None)
    if pid:
        _terminate(pid)
    _kill(_processes_mentioning(state.socket))  # shims outlive containerd
    time.sleep(0.2)
    netns_list = Path(state.workdir) / "cni-state" / "netns.list"
    recorded = netns_list.read_text().split() if netns_list.exists() else []
    netns = sorted({os.path.realpath(n) for n in recorded})  # containerd says /var/run/netns/…
    _unmount_all([state.workdir, state.run_dir, *netns])
    for n in netns:
        with contextlib.suppress(OSError):
            os.unlink(n)
    _remove_cgroups(state.cgroup)
    _restore_sysctls(state.sysctls)
    shutil.rmtree(state.run_dir, ignore_errors=True)
    if state.created_shim_dir:  # /run/containerd was not there before: whatever is left is ours
        for directory in _SHIM_DIRS:
            shutil.rmtree(directory, ignore_errors=True)
        with contextlib.suppress(OSError):
            _SHIM_DIRS[0].parent.rmdir()
    # Directories containerd (netns) and util-linux's umount (mount/utab) create under /run when
    # they are missing; removed again if they were not there before and hold nothing else now.
    for name in state.created_run_dirs:
        path = Path("/run") / name
        with contextlib.suppress(OSError):
            for child in path.iterdir():
                if child.name == "utab" and child.stat().st_size == 0:
                    child.unlink()
            path.rmdir()


def leftovers(state: NodeState) -> list[str]:
    """What of this node is still on the host (empty after a clean ``stop``): processes, mounts,
    cgroups, network namespaces, kernel settings, directories. The node tests assert it."""
    found = [f"process {pid}" for pid in _processes_mentioning(state.socket)]
    netns_list = Path(state.workdir) / "cni-state" / "netns.list"
    netns = {os.path.realpath(n) for n in (netns_list.read_text().split() if netns_list.exists() else [])}
    found += [f"mount {m}" for m in _mounts_under([state.workdir, state.run_dir, *netns])]
    found += [f"network namespace {n}" for n in netns if os.path.exists(n)]
    found += [f"cgroup {d}" for d in _cgroup_dirs(state.cgroup) if d.is_dir()]
    now = _read_sysctls()
    found += [f"sysctl {k}={now.get(k)} (was {v})" for k, v in state.sysctls.items() if now.get(k) != v]
    found += [f"directory {d}" for d in (state.run_dir,) if os.path.exists(d)]
    found += [f"directory /run/{d}" for d in state.created_run_dirs if (Path("/run") / d).exists()]
    if state.created_shim_dir and _SHIM_DIRS[0].parent.exists():
        found.append(f"directory {_SHIM_DIRS[0].parent}")
    return found


def _remove_containers(state: NodeState) -> None:
    """Kill and delete every task and container, so the shims unmount root filesystems and exit."""

    def ctr(*args: str) -> str:
        proc = subprocess.run(
            [state.ctr, "--address", state.socket, "--namespace", "k8s.io", *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        return proc.stdout

    with contextlib.suppress(subprocess.TimeoutExpired):
        tasks = ctr("tasks", "ls", "-q").split()
        for task in tasks:
            ctr("tasks", "kill", "--signal", "SIGKILL", task)
        for task in tasks:
            ctr("tasks", "delete", "--force", task)
        for container in ctr("containers", "ls", "-q").split():
            ctr("containers", "delete", container)


def state_dict(state: NodeState) -> dict[str, object]:
    return asdict(state)


def state_from_dict(data: dict[str, object]) -> NodeState:
    return NodeState(**data)  # type: ignore[arg-type]

"""``python -m secretferry.devcluster up|down|build|load-image`` — the local cluster for humans.

``up`` leaves the processes running in the background and prints the KUBECONFIG to export; it
joins a kubelet node when the host can run one (``--no-node`` skips it) and otherwise says why in
one line. ``down`` stops exactly the processes recorded by ``up`` and undoes what the node did to
the host. ``load-image`` imports an OCI archive into the running node (``make image`` uses it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from secretferry.devcluster import binaries, cluster, node

DEFAULT_DIR = Path(".devcluster")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m secretferry.devcluster")
    parser.add_argument("command", choices=["up", "down", "build", "load-image"])
    parser.add_argument("archive", nargs="?", type=Path, help="OCI archive (load-image)")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="work directory (default .devcluster)")
    parser.add_argument("--no-node", action="store_true", help="control plane only, no kubelet node")
    args = parser.parse_args(argv)
    workdir: Path = args.dir.resolve()
    if args.command == "build":
        print(binaries.ensure(node=not args.no_node))
        return 0
    if args.command == "load-image":
        return _load_image(workdir, args.archive)
    if args.command == "down":
        stopped = cluster.stop_from_state(workdir)
        print("control plane stopped" if stopped else f"no control plane recorded in {workdir}")
        return 0
    if (workdir / "state.json").exists():
        print(
            f"a control plane is already recorded in {workdir}; run 'make cluster-down' first",
            file=sys.stderr,
        )
        return 1
    t0 = time.monotonic()
    cp = cluster.start(workdir)
    cp.save_state()
    print(f"control plane ready in {time.monotonic() - t0:.1f} s at {cp.server}")
    reason = "--no-node given" if args.no_node else node.unavailable_reason()
    if reason:
        print(f"no local node: {reason}")
    else:
        try:
            cp.start_node()
        except Exception:
            cp.stop()
            raise
        took = time.monotonic() - t0
        print(f"node {node.NODE_NAME} Ready after {took:.1f} s (kubelet, containerd, kube-scheduler)")
    print(f"export KUBECONFIG={cp.kubeconfig}")
    return 0


def _load_image(workdir: Path, archive: Path | None) -> int:
    state_file = workdir / "state.json"
    if archive is None:
        print("load-image needs the path of an OCI archive", file=sys.stderr)
        return 2
    data = json.loads(state_file.read_text()) if state_file.exists() else {}
    if "node" not in data:
        print(f"no local node recorded in {workdir}; the image is only built")
        return 0
    state = node.state_from_dict(data["node"])
    started = time.monotonic()
    node.Node(state=state, kubeconfig=Path(), kubectl=lambda *a, **k: "").load_image(archive)
    print(f"loaded {archive.name} into the local node in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

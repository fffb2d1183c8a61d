"""``python -m secretferry.devcluster up|down|build`` — the control plane for humans.

``up`` leaves the processes running in the background and prints the KUBECONFIG to export;
``down`` stops exactly the processes recorded by ``up``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from secretferry.devcluster import binaries, cluster

DEFAULT_DIR = Path(".devcluster")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m secretferry.devcluster")
    parser.add_argument("command", choices=["up", "down", "build"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="work directory (default .devcluster)")
    args = parser.parse_args(argv)
    workdir: Path = args.dir.resolve()
    if args.command == "build":
        print(binaries.ensure())
        return 0
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
    print(f"export KUBECONFIG={cp.kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

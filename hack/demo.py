"""`make demo`: the whole product on the local control plane, start to finish.

Stage one of the demo (the foundation issue): start the real control plane, show that it is
ready, list namespaces, and tear it down. Later stages add the dev server, the operator and a
live secret update.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from secretferry.devcluster import cluster

DEMO_DIR = Path(".demo")


def step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo")
    parser.add_argument("--down", action="store_true", help="stop what an interrupted demo left running")
    args = parser.parse_args(argv)
    workdir = DEMO_DIR.resolve() / "cluster"
    if args.down:
        stopped = cluster.stop_from_state(workdir)
        print("demo stopped" if stopped else "nothing to stop")
        return 0
    cluster.stop_from_state(workdir)  # a previous interrupted run
    step("starting the local control plane (etcd, kube-apiserver, kube-controller-manager)")
    t0 = time.monotonic()
    cp = cluster.start(workdir)
    try:
        print(f"ready in {time.monotonic() - t0:.1f} s at {cp.server}")
        step("kubectl get --raw /readyz")
        print(cp.kubectl("get", "--raw", "/readyz"))
        step("kubectl get namespaces")
        print(cp.kubectl("get", "namespaces"))
    finally:
        step("tearing down")
        cp.stop()
    print("demo finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())

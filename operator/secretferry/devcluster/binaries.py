"""Where the control-plane binaries come from.

The versions live in one place, ``hack/build-control-plane.sh``; it builds on a cold cache and
prints the cached ``bin`` directory on a warm one in well under a second. ``SECRETFERRY_CONTROL_PLANE_BIN``
points at a ready directory instead (for machines that built elsewhere).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REQUIRED = ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "helm")
NODE_REQUIRED = ("kubelet", "kube-scheduler")


def repo_root() -> Path:
    """The checkout this package was installed from (editable install): operator/secretferry/devcluster/…"""
    return Path(__file__).resolve().parents[3]


def ensure(*, node: bool = False) -> Path:
    """Return the directory holding every binary in ``REQUIRED`` (and ``NODE_REQUIRED`` with
    ``node``), building what is missing."""
    override = os.environ.get("SECRETFERRY_CONTROL_PLANE_BIN")
    if override:
        bin_dir = Path(override)
    else:
        script = repo_root() / "hack" / "build-control-plane.sh"
        if not script.exists():
            raise RuntimeError(
                f"cannot find {script}; set SECRETFERRY_CONTROL_PLANE_BIN to a directory with {REQUIRED}"
            )
        # stderr (progress) goes straight to the caller's terminal; stdout is the bin directory.
        argv = ["bash", str(script), *(["--node"] if node else [])]
        out = subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True)
        bin_dir = Path(out.stdout.strip().splitlines()[-1])
    missing = [name for name in REQUIRED + (NODE_REQUIRED if node else ()) if not (bin_dir / name).exists()]
    if missing:
        raise RuntimeError(f"control-plane binaries missing in {bin_dir}: {', '.join(missing)}")
    return bin_dir

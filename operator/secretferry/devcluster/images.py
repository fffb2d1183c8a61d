"""The node's container images, built without a container engine and cached by content.

``hack/build-node-images.sh`` does the work (pause compiled from the Kubernetes module's
``pause.c``, busybox from Debian's static build, a debootstrapped Python base, and the project's
own Dockerfile built with buildah); this module runs it and reads back the archive paths. A warm
cache answers in about a second, so callers simply call ``ensure()`` every time.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from secretferry.devcluster import binaries

PAUSE, BUSYBOX, OPERATOR = "pause", "busybox", "secretferry"
REFERENCES = {
    PAUSE: "localhost/pause:local",
    BUSYBOX: "localhost/busybox:local",
    OPERATOR: "localhost/secretferry:dev",
}


def ensure(*names: str) -> dict[str, Path]:
    """Build (or find cached) the named images; every image when no name is given."""
    script = binaries.repo_root() / "hack" / "build-node-images.sh"
    argv = ["bash", str(script)]
    for name in names:
        argv += ["--only", name]
    # stderr (progress, one line before any long build) goes to the caller's terminal.
    out = subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True)
    archives: dict[str, Path] = {}
    for line in out.stdout.splitlines():
        name, sep, path = line.partition("=")
        if sep and name in REFERENCES:
            archives[name] = Path(path.strip())
    missing = [n for n in (names or tuple(REFERENCES)) if n not in archives or not archives[n].exists()]
    if missing:
        raise RuntimeError(f"{script} did not produce the image archives for {', '.join(missing)}")
    return archives

"""Entry of ``secretferry run``; the kopf-specific part lives in ``handlers.runtime``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import ModuleType

# Optional imports of our dependencies that the operator never uses, made to fail as "not installed"
# (a None in sys.modules raises ImportError without touching the disk; both libraries catch it).
_NEVER_USED = (
    # kopf/_cogs/helpers/thirdparty.py imports these client libraries if installed, only to
    # recognise their model classes, which the operator never passes.
    "kubernetes",
    "kubernetes_asyncio",
    "pykube",
    # httpx's command-line client (click, rich, pygments) is imported whenever its extras are
    # installed, as in a dev venv: ~80 modules and ~4 MiB.
    "httpx._main",
)


def load_operator() -> ModuleType:
    """Import the operator (kopf and our handlers), and only what it needs.

    kopf imports the Kubernetes client libraries it finds installed (``kubernetes``,
    ``kubernetes_asyncio``, ``pykube``), only to recognise their model classes; the operator never
    passes those (it sends raw JSON, :mod:`secretferry.kube.client`). None is our dependency, but
    a dev venv or a user's environment may have them: hiding them keeps ~40 MiB (``kubernetes``)
    and ~59 MiB and over a second of start-up (``kubernetes_asyncio``) out of the process.
    """
    for unused in _NEVER_USED:
        sys.modules.setdefault(unused, None)  # type: ignore[arg-type]  # None: "not installed"
    from secretferry.handlers import runtime

    return runtime


def main(argv: Sequence[str] | None = None) -> int:
    code: int = load_operator().main(argv)
    return code

"""Entry of ``secretferry run``; the kopf-specific part lives in ``handlers.runtime``."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from secretferry.handlers import runtime

    return runtime.main(argv)

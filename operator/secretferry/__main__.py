"""``python -m secretferry``: the same as the ``secretferry`` command (where no script is on PATH)."""

from __future__ import annotations

import sys

from secretferry import cli

if __name__ == "__main__":
    sys.exit(cli.main())

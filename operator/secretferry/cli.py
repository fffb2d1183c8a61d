"""The ``secretferry`` command: ``run`` (the operator), ``dev-server`` (reference service), ``crds``.

Sub-commands import their modules lazily so that ``secretferry crds`` does not pay for kopf, and
the operator never loads the dev server.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def _usage() -> int:
    print("usage: secretferry {run,dev-server,crds} [args...]", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"}:
        return _usage()
    command, rest = args[0], args[1:]
    if command == "run":
        from secretferry import runtime

        return runtime.main(rest)
    if command == "dev-server":
        from secretferry.devserver import cli as devserver_cli

        return devserver_cli.main(rest)
    if command == "crds":
        from secretferry import crdgen

        return crdgen.main(rest)
    return _usage()


if __name__ == "__main__":
    sys.exit(main())

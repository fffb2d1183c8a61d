"""The ``secretferry`` command: ``run`` (the operator), ``dev-server`` (reference service), ``crds``.

Sub-commands import their modules lazily so that ``secretferry crds`` does not pay for kopf, and
the operator never loads the dev server.

The dev server and its web stack are an extra (``secretferry[devserver]``) that the operator image
leaves out, so ``dev-server`` says how to get them instead of failing with a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

# What ``dev-server`` needs beyond the operator: the web stack of the ``devserver`` extra (starlette
# comes with fastapi and sse-starlette), and the dev server package itself, which the runtime image
# leaves out (a missing module *inside* it is a bug of ours, not a missing extra).
_WEB_STACK = ("fastapi", "starlette", "sse_starlette", "uvicorn")
_DEVSERVER = "secretferry.devserver"


def _is_devserver_extra(missing: str | None) -> bool:
    """Whether a failed import is the dev server package or its web stack."""
    top = (missing or "").partition(".")[0]
    return missing == _DEVSERVER or top in _WEB_STACK


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
        try:
            from secretferry.devserver import cli as devserver_cli
        except ModuleNotFoundError as exc:
            if not _is_devserver_extra(exc.name):
                raise
            # The runtime image keeps the package but leaves the dev server out of it.
            what = f"{exc.name} is not installed"
            if exc.name == _DEVSERVER:
                what = "this installation has no dev server"
            print(
                f"secretferry dev-server: {what}; get it with: pip install 'secretferry[devserver]'",
                file=sys.stderr,
            )
            return 1
        return devserver_cli.main(rest)
    if command == "crds":
        from secretferry import crdgen

        return crdgen.main(rest)
    return _usage()


if __name__ == "__main__":
    sys.exit(main())

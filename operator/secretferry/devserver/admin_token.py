"""The token that locks ``/_admin``: given, or generated at start and left in a file for the user.

The admin API mints access tokens for any identity and writes secrets, so anyone who reaches the
port must not be able to use it; there is no unlocked mode. ``--admin-token`` sets the token
(tests and the demo, which pass it to their own clients). Without it a random token is generated
at every start and written to a file only the user can read (``<data>.admin-token`` unless
``--admin-token-file`` says otherwise); one log line names the file, never the token.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import secrets
import tempfile
from pathlib import Path

from secretferry.devserver.config import DevServerConfig

log = logging.getLogger(__name__)

HEADER = "X-Admin-Token"
TOKEN_FILE_SUFFIX = ".admin-token"
_TOKEN_BYTES = 32  # 256 random bits: not guessable over HTTP in any number of tries
_IN_MEMORY = ":memory:"


def default_path(data_path: Path) -> Path | None:
    """``<data>.admin-token`` next to the SQLite file; none for an in-memory database."""
    if str(data_path) == _IN_MEMORY:
        return None
    return data_path.with_name(data_path.name + TOKEN_FILE_SUFFIX)


def establish(config: DevServerConfig) -> str:
    """The token this server instance requires; generates and stores one when none is given."""
    if config.admin_token:
        return config.admin_token
    token = secrets.token_hex(_TOKEN_BYTES)
    path = config.admin_token_file or default_path(config.data_path)
    if path is None:
        log.warning(
            "admin API locked with a generated token that is written nowhere (in-memory database, "
            "no admin token file): pass an admin token or a token file to use it"
        )
        return token
    write_private(path, token)
    log.info("admin API token written to %s (send it as header %s)", path, HEADER)
    return token


def write_private(path: Path, token: str) -> None:
    """Replace ``path`` with ``token`` in a file of mode 0600.

    Written to a new temporary file (``mkstemp`` creates it 0600, exclusively) and renamed over
    ``path``: the token never sits in a file others can read, even for an instant, and a file or
    symlink planted at ``path`` is replaced, not written through.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(token + "\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def matches(provided: str | None, expected: str) -> bool:
    """Constant-time comparison, so response timing does not reveal how much of a guess was right.

    Compared as UTF-8 bytes: ``hmac.compare_digest`` refuses non-ASCII ``str``, and a header may
    carry any byte.
    """
    if provided is None:
        return False
    return hmac.compare_digest(provided.encode(), expected.encode())

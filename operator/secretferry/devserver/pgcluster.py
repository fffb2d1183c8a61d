"""A throwaway PostgreSQL cluster from the distribution's packages (``make postgres-deps``).

``throwaway_cluster()`` runs ``initdb`` into a fresh temporary directory, starts ``postgres`` on a
random loopback port with its socket in that directory, yields the superuser's connection inputs,
then stops the server and removes the directory: the host is left as found (no system user
created, no packaged cluster touched, nothing listening afterwards).

PostgreSQL refuses to run as root, and CI runs as root: then the cluster runs as ``nobody`` through
subprocess's own user switch (the directory is handed to ``nobody`` for its lifetime; ``nobody``
exists on every Debian system, so no user is created). Run as anyone else, it runs as that user.

The superuser has a random password and ``scram-sha-256`` authentication, like a real server: the
dev server's SQL provider connects as it, and leased roles log in with SCRAM too, so a test that
"connects with the leased credentials" proves what a real client would see.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

READY_TIMEOUT_SECONDS = 30.0  # initdb + start on a busy 2-core machine takes 2-5 s
_RUN_AS = "nobody"  # when we are root: postgres refuses to run as root


@dataclass(frozen=True)
class PgCluster:
    """Superuser connection inputs of a running throwaway cluster (the provider's ``inputs``)."""

    host: str
    port: int
    username: str
    password: str
    database: str
    data_dir: Path

    def inputs(self) -> dict[str, object]:
        """The SQL provider's connection fields, as a dynamic secret definition holds them."""
        return {
            "client": "postgres",
            "host": self.host,
            "port": self.port,
            "database": self.database,
            "username": self.username,
            "password": self.password,
        }


def bin_dir() -> Path | None:
    """The newest installed server's binaries, or None when ``postgresql`` is not installed."""
    root = Path("/usr/lib/postgresql")
    versions = sorted(
        (p for p in root.glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if versions:
        return versions[-1]
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def unavailable_reason() -> str | None:
    """Why no throwaway cluster can run here, or None when one can (tests skip with the reason)."""
    if bin_dir() is None:
        return "PostgreSQL server binaries not installed: run `make postgres-deps` (as root)"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _user() -> str | None:
    """Whom the server runs as: ``nobody`` when we are root (subprocess switches user itself, so
    the Popen is postgres, not a wrapper that might not relay signals), else ourselves."""
    return _RUN_AS if os.geteuid() == 0 else None


def _wait_ready(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"postgres exited with {proc.returncode}: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            # Accepting TCP is not yet accepting logins (startup recovery); the log says when.
            if "ready to accept connections" in log.read_text(errors="replace"):
                return
        time.sleep(0.1)
    raise RuntimeError(f"postgres not ready after {READY_TIMEOUT_SECONDS} s: {log.read_text()[-2000:]}")


@contextlib.contextmanager
def throwaway_cluster(*, max_connections: int = 100) -> Iterator[PgCluster]:
    """Start a fresh cluster; stop it and remove every file on exit, whatever happened."""
    binaries = bin_dir()
    if binaries is None:
        raise RuntimeError("PostgreSQL server binaries not installed: run `make postgres-deps`")
    root = Path(tempfile.mkdtemp(prefix="secretferry-pg-"))
    password = secrets.token_urlsafe(24)
    proc: subprocess.Popen[bytes] | None = None
    try:
        if os.geteuid() == 0:
            shutil.chown(root, user=_RUN_AS)
        root.chmod(0o700)
        pwfile = root / "pw"
        pwfile.write_text(password + "\n")
        if os.geteuid() == 0:
            shutil.chown(pwfile, user=_RUN_AS)
        data = root / "data"
        subprocess.run(
            [
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--auth=scram-sha-256",
                f"--pwfile={pwfile}",
            ],
            user=_user(),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        pwfile.unlink()
        port = _free_port()
        log = root / "postgres.log"
        log.touch()
        if os.geteuid() == 0:
            shutil.chown(log, user=_RUN_AS)
        with log.open("ab") as sink:
            proc = subprocess.Popen(
                [
                    str(binaries / "postgres"),
                    "-D",
                    str(data),
                    "-p",
                    str(port),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    f"unix_socket_directories={root}",
                    "-c",
                    f"max_connections={max_connections}",
                    "-c",
                    "fsync=off",  # throwaway data: durability only costs time
                ],
                user=_user(),
                stdout=sink,
                stderr=sink,
            )
        _wait_ready(port, proc, log)
        yield PgCluster(
            host="127.0.0.1",
            port=port,
            username="postgres",
            password=password,
            database="postgres",
            data_dir=data,
        )
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # "fast" shutdown: sessions are cut, not waited for
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        shutil.rmtree(root, ignore_errors=True)

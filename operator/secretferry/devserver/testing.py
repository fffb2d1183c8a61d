"""Run the dev server as a subprocess for tests anywhere in the repo.

``run_dev_server`` starts ``python -m secretferry.devserver`` on a free loopback port, waits for it
to answer, and yields a ``DevServer`` handle with sync admin helpers. A subprocess (not an in-process
app) so tests exercise real sockets, real restarts on the same SQLite file, and cannot share state
with the code under test. Only httpx and the standard library are imported here: no control plane.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

READY_TIMEOUT_SECONDS = 30.0  # a cold interpreter importing FastAPI on a busy 2-core box
STOP_TIMEOUT_SECONDS = 10.0
RESTART_TRIES = 5  # same-port attempts before moving to a fresh port
_OPERATOR_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class TLSFiles:
    """What the dev server serves HTTPS with, and the CA bundle (PEM) that verifies it.

    Rotation at the server: write new files (or name others) and ``restart`` with them
    (``DevServer.tls``); the admin client trusts ``ca_pem`` of the pair in use.
    """

    cert: Path
    key: Path
    ca_pem: str


class DevServer:
    """A running dev server subprocess and its admin API."""

    def __init__(
        self,
        *,
        seed_path: Path,
        data_dir: Path,
        port: int,
        extra_args: Sequence[str],
        tls: TLSFiles | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.data_path = data_dir / "devserver.sqlite"
        self.seed_path = seed_path
        self.port = port
        self.extra_args = list(extra_args)
        self.admin_token_file: Path | None = None
        if "--admin-token" in self.extra_args:
            self.admin_token = self.extra_args[self.extra_args.index("--admin-token") + 1]
        else:
            # The server's own generated token, read from its 0600 file after every start (a
            # restart makes a new one); never on the command line, where `ps` shows it.
            self.admin_token = ""
            self.admin_token_file = data_dir / "admin-token"
            self.extra_args += [f"--admin-token-file={self.admin_token_file}"]
        self.log_path = data_dir / "devserver.log"
        self._process: subprocess.Popen[bytes] | None = None
        self.tls = tls
        self.base_url = self._url(port)
        self._admin = self._admin_client()

    def _url(self, port: int) -> str:
        return f"{'https' if self.tls is not None else 'http'}://127.0.0.1:{port}"

    def _verify(self) -> ssl.SSLContext | bool:
        return ssl.create_default_context(cadata=self.tls.ca_pem) if self.tls is not None else True

    def _admin_client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url,
            headers={"X-Admin-Token": self.admin_token},
            timeout=10.0,
            verify=self._verify(),
        )

    def use_tls(self, tls: TLSFiles | None) -> None:
        """Serve with ``tls`` from the next start on (a rotation: ``use_tls(new)``, ``restart()``)."""
        self.tls = tls
        self.base_url = self._url(self.port)
        self._admin.close()
        self._admin = self._admin_client()

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_OPERATOR_ROOT), env.get("PYTHONPATH")]))
        command = [
            sys.executable,
            "-m",
            "secretferry.devserver",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--data",
            str(self.data_path),
            "--seed",
            str(self.seed_path),
            "--log-level",
            "warning",
            *self.extra_args,
        ]
        if self.tls is not None:
            command += ["--tls-cert", str(self.tls.cert), "--tls-key", str(self.tls.key)]
        if self.admin_token_file is not None:
            self.admin_token_file.unlink(missing_ok=True)
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        self._wait_ready()
        if self.admin_token_file is not None:
            self.admin_token = self.admin_token_file.read_text().strip()
            self._admin.headers["X-Admin-Token"] = self.admin_token

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None and self._process.poll() is None else None

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"dev server exited with {self._process.returncode}: {self._log_tail()}")
            try:
                health = httpx.get(f"{self.base_url}/_admin/health", timeout=1.0, verify=self._verify())
                if health.status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"dev server not ready after {READY_TIMEOUT_SECONDS}s: {self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def restart(self) -> None:
        """Stop and start again on the same SQLite file, on the same port when it can be had.

        Another process on this shared machine may grab the port in between; after a few tries the
        server moves to a fresh port, so read ``base_url`` again after a restart.
        """
        self.stop()
        self.start_with_retries(allow_new_port=True)

    def start_with_retries(self, *, allow_new_port: bool) -> None:
        for _ in range(RESTART_TRIES):
            try:
                self.start()
                return
            except RuntimeError:
                if "address already in use" not in self._log_tail().lower():
                    raise
                time.sleep(0.5)
        if not allow_new_port:
            raise RuntimeError(f"port {self.port} stays in use")
        self.port = free_port()
        self.base_url = self._url(self.port)
        self._admin.base_url = httpx.URL(self.base_url)
        self.start()

    def close(self) -> None:
        self.stop()
        self._admin.close()

    # -- admin helpers --------------------------------------------------------------------------
    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._admin.request(method, f"/_admin{path}", **kwargs)
        response.raise_for_status()
        return response.json()

    def set_secret(
        self, project_id: str, env: str, path: str, key: str, value: str, **extra: Any
    ) -> dict[str, Any]:
        """Create or update a secret (emits events); ``extra``: secretComment, tags, metadata."""
        body = {
            "projectId": project_id,
            "environment": env,
            "secretPath": path,
            "secretKey": key,
            "secretValue": value,
            **extra,
        }
        result: dict[str, Any] = self._call("PUT", "/secrets", json=body)
        return result

    def delete_secret(self, project_id: str, env: str, path: str, key: str) -> dict[str, Any]:
        body = {"projectId": project_id, "environment": env, "secretPath": path, "secretKey": key}
        result: dict[str, Any] = self._call("DELETE", "/secrets", json=body)
        return result

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/stats")
        return result

    def live_tokens(self, identity_id: str) -> int:
        """Access tokens of the identity the server would accept now (not expired, not revoked)."""
        live: dict[str, int] = self.stats().get("liveTokens") or {}
        return live.get(identity_id, 0)

    def reset_stats(self) -> None:
        self._call("POST", "/stats/reset")

    def set_faults(self, faults: dict[str, Any]) -> None:
        """Replace the fault document (format in ``secretferry.devserver.faults``)."""
        self._call("POST", "/faults", json=faults)

    def clear_faults(self) -> None:
        self._call("DELETE", "/faults")

    def drop_streams(self) -> int:
        dropped: int = self._call("POST", "/streams/drop")["dropped"]
        return dropped

    def expire_tokens(self, identity_id: str) -> int:
        expired: int = self._call("POST", f"/identities/{identity_id}/expire-tokens")["expired"]
        return expired

    def add_seed(self, seed: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/seed", json=seed)
        return result

    def issue_token(self, identity_id: str, **limits: int) -> str:
        """A ready access token for the identity (``accessTokenTTL`` etc. as keyword arguments)."""
        token: str = self._call("POST", "/tokens", json={"identityId": identity_id, **limits})["accessToken"]
        return token


def kubernetes_auth(
    *, host: str, ca_pem: str, reviewer_token: str, audience: str = "", **overrides: Any
) -> dict[str, Any]:
    """A seed ``kubernetesAuth`` block whose TokenReview goes to the apiserver at ``host``.

    Tests, benchmarks and the demo all point the dev server at the local control plane this way.
    """
    return {
        "kubernetesHost": host,
        "caCert": ca_pem,
        "tokenReviewerJwt": reviewer_token,
        "allowedNamespaces": "",
        "allowedNames": "",
        "allowedAudience": audience,
        **overrides,
    }


@contextlib.contextmanager
def run_dev_server(
    *,
    seed: dict[str, Any] | Path,
    data_dir: Path,
    port: int | None = None,
    extra_args: Sequence[str] = (),
    tls: TLSFiles | None = None,
) -> Iterator[DevServer]:
    """Start the dev server subprocess; stop it on exit (even when the test fails)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    if isinstance(seed, dict):
        seed_path = data_dir / "seed.yaml"
        seed_path.write_text(yaml.safe_dump(seed, sort_keys=False))
    else:
        seed_path = seed
    server = DevServer(
        seed_path=seed_path, data_dir=data_dir, port=port or free_port(), extra_args=extra_args, tls=tls
    )
    try:
        server.start_with_retries(allow_new_port=port is None)
        yield server
    finally:
        server.close()

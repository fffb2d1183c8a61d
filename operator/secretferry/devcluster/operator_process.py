"""Run ``secretferry run`` as a real process against the local control plane.

Tests, benchmarks and the demo use it; running the operator as its own process (not in the
test's event loop) is what users run, lets a test restart it, and lets a test scan its complete
log output for secret values.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

from secretferry.devcluster.net import free_port


class OperatorProcess:
    def __init__(self, *, kubeconfig: Path, log_path: Path, env: Mapping[str, str] | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.extra_env = dict(env or {})
        self.metrics_port = free_port()
        self.liveness_port = free_port()
        # Its own port, like the others: several operators run side by side in tests (replicas under
        # leader election, and other test runs on a shared machine), never on the default 8082.
        self.readiness_port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, *, wait_seconds: float = 60.0) -> None:
        env = {
            **os.environ,
            "SECRETFERRY_KUBECONFIG": str(self.kubeconfig),
            "KUBECONFIG": str(self.kubeconfig),
            "SECRETFERRY_METRICS_PORT": str(self.metrics_port),
            "SECRETFERRY_LIVENESS_PORT": str(self.liveness_port),
            "SECRETFERRY_READINESS_PORT": str(self.readiness_port),
            "SECRETFERRY_LOG_FORMAT": "json",
            **self.extra_env,
        }
        log = self.log_path.open("ab")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "secretferry.cli", "run"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            self._wait_live(self._proc, wait_seconds)
        except BaseException:
            # The caller gets no handle to stop it with: a process that did not become live must
            # not stay behind and go on reconciling the whole cluster under later tests.
            self.stop()
            raise

    def _wait_live(self, proc: subprocess.Popen[bytes], wait_seconds: float) -> None:
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the operator exited with {proc.returncode}:\n{self.log_tail()}")
            url = f"http://127.0.0.1:{self.liveness_port}/healthz"
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"the operator did not become live in {wait_seconds:.0f} s:\n{self.log_tail()}")

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text: str = r.read().decode()
            return text

    def readiness(self) -> str:
        """What /readyz answers, as ``"<status> <state>"`` (``"200 serving"``), or ``"down"``."""
        url = f"http://127.0.0.1:{self.readiness_port}/readyz"
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return f"{r.status} {r.read().decode().strip()}"
        except urllib.error.HTTPError as exc:
            return f"{exc.code} {exc.read().decode().strip()}"
        except OSError:
            return "down"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_text()[-chars:]

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()


@contextlib.contextmanager
def running(
    *, kubeconfig: Path, log_path: Path, env: Mapping[str, str] | None = None
) -> Iterator[OperatorProcess]:
    op = OperatorProcess(kubeconfig=kubeconfig, log_path=log_path, env=env)
    op.start()
    try:
        yield op
    finally:
        op.stop()

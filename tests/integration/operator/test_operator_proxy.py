"""Egress through a real forward proxy (``proxy.py``, a dev dependency), started here.

The operator is given the dev server as ``http://secrets.proxied.invalid:<port>``: a name only the
proxy can resolve (``proxy_plugins.ProxiedNames``), so every service call that succeeds went through
the proxy, and the proxy's own access log names each one. ``HTTPS_PROXY`` is set too and ``NO_PROXY``
is empty: the Kubernetes apiserver (https on loopback) would go through the proxy if our client
honoured the variables, and the proxy's log proves it never saw it. A proxy that refuses (403) or is
down is a clear reason in status, and the synced Secret stays as it was.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import harness
import pytest
from harness import PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.net import free_port
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent
HOURS = "3h"  # refresh interval far beyond any test: only the stream can explain a sync


class Proxy:
    """One ``proxy.py`` process on a free loopback port, logging every request it relays."""

    def __init__(self, log_path: Path, *plugins: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._plugins = plugins
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [sys.executable, "-m", "proxy", "--hostname", "127.0.0.1", "--port", str(self.port)]
        args += ["--num-acceptors", "1", "--num-workers", "1", "--log-level", "INFO"]
        for plugin in self._plugins:
            args += ["--plugins", f"proxy_plugins.{plugin}"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

        def accepting() -> bool:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
            return False

        eventually(accepting, timeout=30, what="the proxy accepting connections")

    def stop(self) -> None:
        # proxy.py runs acceptor and worker processes: signal its whole session (its own group).
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()

    def relayed(self) -> list[str]:
        """Every request relayed, as ``METHOD host:port/path?query`` (``proxy_plugins`` logs each one
        as it arrives; CONNECT tunnels show up in proxy.py's own access log)."""
        text = self.log_path.read_text(errors="replace")
        return [line.split("RELAYED ", 1)[1] for line in text.splitlines() if "RELAYED " in line]


@contextlib.contextmanager
def running(proxy: Proxy) -> Iterator[Proxy]:
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    with running(Proxy(tmp_path_factory.mktemp("proxy") / "proxy.log", "ProxiedNames")) as p:
        yield p


def _proxied_url(service: DevServer) -> str:
    return f"http://secrets.proxied.invalid:{urlsplit(service.base_url).port}"


def _proxy_env(proxy_url: str) -> dict[str, str]:
    # Both schemes and no NO_PROXY at all: the apiserver (https://127.0.0.1:<port>) is kept off the
    # proxy by our Kubernetes client itself, not by an exemption the installer has to remember.
    return {
        "HTTP_PROXY": proxy_url,
        "HTTPS_PROXY": proxy_url,
        "http_proxy": proxy_url,
        "https_proxy": proxy_url,
        "NO_PROXY": "",
        "no_proxy": "",
    }


def _start(cp: ControlPlane, service: DevServer, log_path: Path, proxy_url: str) -> OperatorProcess:
    return harness.start_operator(
        cp,
        service,
        log_path,
        SECRETFERRY_DEFAULT_HOST_API=_proxied_url(service),
        # Plain http to a name that is not loopback (the dev server speaks http): an explicit opt-in.
        SECRETFERRY_ALLOW_INSECURE_HTTP="true",
        **_proxy_env(proxy_url),
    )


def _streaming(cp: ControlPlane, namespace: str, name: str = "app") -> bool:
    obj = harness.get(cp, "secretsync", name, namespace) or {}
    return (obj.get("status") or {}).get("updateMode") == "Streaming"


def _value(cp: ControlPlane, namespace: str) -> str | None:
    return (secret_data(cp, namespace, "app") or {}).get("K")


def test_every_service_call_and_the_stream_go_through_the_proxy_and_the_apiserver_does_not(
    control_plane: ControlPlane,
    crds: None,
    service: DevServer,
    proxy: Proxy,
    namespace: str,
    tmp_path: Path,
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "proxied-value-1")
    op = _start(control_plane, service, tmp_path / "operator.log", proxy.url)
    try:
        harness.universal_identity(control_plane, namespace)
        harness.secret_sync(
            control_plane, namespace, "app", identity="uni", sources=[source(path)], refreshInterval=HOURS
        )
        eventually(lambda: _value(control_plane, namespace) == "proxied-value-1", what="the first sync")
        eventually(lambda: _streaming(control_plane, namespace), what="updateMode Streaming")

        # A change at the service reaches the Secret through the proxy while streaming: the proxy
        # relays the event as it comes (a buffering proxy would hold it until the stream ends).
        latencies = []
        for i in range(2, 7):
            service.set_secret(PROJECT_ID, "dev", path, "K", f"proxied-value-{i}")
            started = time.monotonic()
            eventually(
                lambda i=i: _value(control_plane, namespace) == f"proxied-value-{i}",  # type: ignore[misc]
                timeout=20,
                interval=0.02,
                what=f"change {i} through the proxied stream",
            )
            latencies.append(time.monotonic() - started)
        latencies.sort()
        print(
            f"\nchange → Secret through the proxy while streaming: min {latencies[0] * 1000:.0f} ms,"
            f" median {latencies[len(latencies) // 2] * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms"
            " (includes kubectl polling)"
        )
        assert _streaming(control_plane, namespace)
    finally:
        op.stop()  # closes the stream: the proxy logs an exchange when it ends
    harness.assert_no_values_leaked(control_plane, op)

    proxied_host = urlsplit(_proxied_url(service)).netloc
    api = urlsplit(control_plane.server)
    apiserver = f"{api.hostname}:{api.port}"

    requests = proxy.relayed()
    print("proxy saw:", *sorted(set(re.sub(r"\?.*", "", r) for r in requests)), sep="\n  ")
    assert any(r.startswith("POST " + proxied_host) and "/auth/universal-auth/login" in r for r in requests)
    assert any(r.startswith("GET " + proxied_host) and "/secrets" in r for r in requests)
    assert any(proxied_host in r and "subscribe" in r for r in requests)
    assert not any(apiserver in r for r in requests), "the apiserver was reached through the proxy"
    assert apiserver not in proxy.log_path.read_text(errors="replace")


def _not_ready(cp: ControlPlane, namespace: str) -> dict[str, object] | None:
    cond = harness.ready(cp, namespace, "app")
    return cond if cond and cond.get("status") == "False" else None


@pytest.mark.parametrize("kind", ["refuses", "down"])
def test_a_proxy_that_refuses_or_is_down_is_a_clear_reason_and_deletes_nothing(
    control_plane: ControlPlane,
    crds: None,
    service: DevServer,
    proxy: Proxy,
    namespace: str,
    tmp_path: Path,
    kind: str,
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "kept-value")
    op = _start(control_plane, service, tmp_path / "operator-1.log", proxy.url)
    try:
        harness.universal_identity(control_plane, namespace)
        harness.secret_sync(
            control_plane, namespace, "app", identity="uni", sources=[source(path)], refreshInterval="2s"
        )
        eventually(lambda: _value(control_plane, namespace) == "kept-value", what="the first sync")
    finally:
        op.stop()

    with contextlib.ExitStack() as stack:
        if kind == "refuses":
            refusing = stack.enter_context(running(Proxy(tmp_path / "refusing.log", "RefuseAll")))
            url = refusing.url
        else:
            url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
        op = _start(control_plane, service, tmp_path / "operator-2.log", url)
        try:
            cond = eventually(lambda: _not_ready(control_plane, namespace), timeout=60, what="Ready False")
            print(f"\nproxy {kind}: reason {cond.get('reason')}: {cond.get('message')}")
            assert cond.get("reason") == ("ProxyRefused" if kind == "refuses" else "ProxyUnreachable")
            assert "egress proxy" in str(cond.get("message"))
            assert _value(control_plane, namespace) == "kept-value"

            def identity_reason() -> object:  # the identity names the proxy too
                return (harness.ready(control_plane, namespace, "uni", kind="machineidentity") or {}).get(
                    "reason"
                )

            eventually(lambda: identity_reason() == cond.get("reason"), what="the identity's reason")
        finally:
            op.stop()
    harness.assert_no_values_leaked(control_plane, op)

    # Behind a proxy that relays again, the same SecretSync syncs the next change.
    service.set_secret(PROJECT_ID, "dev", path, "K", "after-the-proxy")
    op = _start(control_plane, service, tmp_path / "operator-3.log", proxy.url)
    try:
        eventually(lambda: _value(control_plane, namespace) == "after-the-proxy", what="sync once relayed")
    finally:
        op.stop()


@pytest.mark.skip(
    reason="unfinished: the dev server cannot serve HTTPS on main yet (the tls helper's work, issue 24);"
    " CONNECT tunnelling through proxy.py to an https:// service is proven only by the unit test"
    " tests/unit/service/test_proxy_errors.py (a refused CONNECT), not end to end"
)
def test_an_https_service_is_reached_through_a_connect_tunnel() -> None:
    """To do once the dev server serves HTTPS: the operator syncs from https://<name>.proxied.invalid
    through the proxy (a CONNECT in its access log), with the service's certificate checked end to
    end (the CA in spec.tls), and the proxy never sees a secret value in clear."""

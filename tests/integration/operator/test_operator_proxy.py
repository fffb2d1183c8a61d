"""Egress through a real forward proxy (``proxy.py``, a dev dependency), started here.

The operator is given the dev server as ``http://secrets.proxied.invalid:<port>``: a name only the
proxy can resolve (``proxy_plugins.ProxiedNames``), so every service call that succeeds went through
the proxy, and the proxy's own access log names each one. ``HTTPS_PROXY`` is set too and ``NO_PROXY``
is empty: the Kubernetes apiserver (https on loopback) would go through the proxy if our client
honoured the variables, and the proxy's log proves it never saw it. A proxy that refuses (403) or is
down is a clear reason in status, and the synced Secret stays as it was.

HTTPS: the dev server serves a certificate from a CA generated here (``tlsca``) for that same
private name, and the identity trusts that CA (``spec.tls.caSecretRef``): the operator asks the
proxy for a ``CONNECT`` tunnel and verifies the service's certificate end to end through it, so the
proxy sees the tunnel and nothing inside it. A proxy that requires authentication (``--basic-auth``)
relays with the credentials in the proxy URL and answers 407 without them; the credentials never
reach a log line, an Event or a status.

Nothing here changes the test process itself: the proxy variables go only into the environment of
the operator processes started here, and every proxy started here is stopped (its whole process
group) even when it never became ready.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import harness
import pytest
import tlsca
from harness import PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.net import free_port
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer, run_dev_server

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent
HOURS = "3h"  # refresh interval far beyond any test: only the stream can explain a sync
PROXIED_HOST = "secrets.proxied.invalid"  # resolved by proxy_plugins.ProxiedNames only
CA_KEY = "ca.crt"


class Proxy:
    """One ``proxy.py`` process on a free loopback port, logging every request it relays."""

    def __init__(self, log_path: Path, *plugins: str, basic_auth: str | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._plugins = plugins
        self._basic_auth = basic_auth  # "user:password": the proxy answers 407 without it
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [sys.executable, "-m", "proxy", "--hostname", "127.0.0.1", "--port", str(self.port)]
        args += ["--num-acceptors", "1", "--num-workers", "1", "--log-level", "INFO"]
        # proxy.py creates its data and cache directories at start (default ~/.proxy): keep them
        # in the test's temporary directory, not in the home directory of whoever runs the tests.
        data_dir = self.log_path.parent / f"proxy-data-{self.port}"
        args += ["--data-dir", str(data_dir), "--cache-dir", str(data_dir / "cache")]
        if self._basic_auth is not None:
            args += ["--basic-auth", self._basic_auth]
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
        # proxy.py runs acceptor and worker processes: signal its whole session (its own group),
        # even when the main process is gone already (its children may still hold the port).
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        with contextlib.suppress(ProcessLookupError):  # a straggler of the group
            os.killpg(proc.pid, signal.SIGKILL)

    def relayed(self) -> list[str]:
        """Every request relayed, as ``METHOD host:port/path?query`` (``proxy_plugins`` logs each one
        as it arrives; CONNECT tunnels show up in proxy.py's own access log)."""
        text = self.log_path.read_text(errors="replace")
        return [line.split("RELAYED ", 1)[1] for line in text.splitlines() if "RELAYED " in line]


@contextlib.contextmanager
def running(proxy: Proxy) -> Iterator[Proxy]:
    try:
        proxy.start()  # inside: a proxy that never became ready is stopped too
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    with running(Proxy(tmp_path_factory.mktemp("proxy") / "proxy.log", "ProxiedNames")) as p:
        yield p


def _proxied_url(service: DevServer) -> str:
    base = urlsplit(service.base_url)
    return f"{base.scheme}://{PROXIED_HOST}:{base.port}"


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
    env = _proxy_env(proxy_url)
    if service.tls is None:
        # Plain http to a name that is not loopback (the dev server speaks http): an explicit opt-in.
        env["SECRETFERRY_ALLOW_INSECURE_HTTP"] = "true"
    return harness.start_operator(
        cp, service, log_path, SECRETFERRY_DEFAULT_HOST_API=_proxied_url(service), **env
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


# --- HTTPS through a CONNECT tunnel, and a proxy that requires authentication -------------------


@pytest.fixture(scope="module")
def ca() -> tlsca.CA:
    return tlsca.new_ca("secretferry proxy test CA")


@pytest.fixture(scope="module")
def tls_service(
    control_plane: ControlPlane,
    reviewer_token: str,
    ca: tlsca.CA,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[DevServer]:
    """The dev server on HTTPS with a certificate for ``PROXIED_HOST`` from the test's own CA."""
    pair = tlsca.serving_pair(ca, tmp_path_factory.mktemp("pki"), label="proxied", dns_names=(PROXIED_HOST,))
    with run_dev_server(
        seed=harness.seed(control_plane, reviewer_token=reviewer_token),
        data_dir=tmp_path_factory.mktemp("devserver-tls"),
        extra_args=["--heartbeat-seconds", "1", "--recheck-seconds", "2"],
        tls=pair,
    ) as server:
        harness.record_values(server)
        yield server


def _trusting_identity(cp: ControlPlane, namespace: str, ca_pem: str, name: str = "uni") -> None:
    """The seed's universal-auth identity, trusting ``ca_pem`` through a CA Secret."""
    harness.universal_identity(cp, namespace, name)
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": f"{name}-ca",
                "namespace": namespace,
                "annotations": {harness.ALLOWED_IDENTITIES: name},
            },
            "stringData": {CA_KEY: ca_pem},
        }
    )
    patch = {"spec": {"tls": {"caSecretRef": {"name": f"{name}-ca", "key": CA_KEY}}}}
    cp.kubectl("patch", "machineidentity", name, "-n", namespace, "--type=merge", "-p", json.dumps(patch))


def _identity_for(cp: ControlPlane, namespace: str, service: DevServer, ca: tlsca.CA) -> None:
    if service.tls is None:
        harness.universal_identity(cp, namespace)
    else:
        _trusting_identity(cp, namespace, ca.pem)


def _changes_through_the_stream(
    cp: ControlPlane, service: DevServer, namespace: str, prefix: str
) -> list[float]:
    """Five changes at the service, each awaited in the Secret; their latencies, sorted (seconds)."""
    path = f"/{namespace}"
    latencies = []
    for i in range(2, 7):
        service.set_secret(PROJECT_ID, "dev", path, "K", f"{prefix}-{i}")
        started = time.monotonic()
        eventually(
            lambda i=i: _value(cp, namespace) == f"{prefix}-{i}",  # type: ignore[misc]
            timeout=20,
            interval=0.02,
            what=f"change {i} through the proxied stream",
        )
        latencies.append(time.monotonic() - started)
    return sorted(latencies)


def _cluster_text(cp: ControlPlane) -> str:
    """Every Event and every identity's and SecretSync's status, as kubectl prints them."""
    kinds = ("events.events.k8s.io", "events", "secretsyncs", "machineidentities", "clustermachineidentities")
    return "\n".join(cp.kubectl("get", kind, "-A", "-o", "json", check=False) for kind in kinds)


def test_an_https_service_is_reached_through_a_connect_tunnel(
    control_plane: ControlPlane,
    crds: None,
    tls_service: DevServer,
    ca: tlsca.CA,
    namespace: str,
    tmp_path: Path,
) -> None:
    """The operator syncs from https://secrets.proxied.invalid through the proxy: a CONNECT in its
    log and nothing else (the requests travel inside the tunnel, TLS end to end with the CA from
    spec.tls), the event stream delivers changes through the tunnel, the apiserver never appears."""
    path = f"/{namespace}"
    tls_service.set_secret(PROJECT_ID, "dev", path, "K", "tunnelled-value-1")
    with running(Proxy(tmp_path / "proxy.log", "ProxiedNames")) as proxy:
        op = _start(control_plane, tls_service, tmp_path / "operator.log", proxy.url)
        try:
            _trusting_identity(control_plane, namespace, ca.pem)
            harness.secret_sync(
                control_plane, namespace, "app", identity="uni", sources=[source(path)], refreshInterval=HOURS
            )
            eventually(lambda: _value(control_plane, namespace) == "tunnelled-value-1", what="the first sync")
            eventually(lambda: _streaming(control_plane, namespace), what="updateMode Streaming")
            lists_before = tls_service.stats()["listSecretsByScope"].get(f"dev:{path}", 0)

            latencies = _changes_through_the_stream(control_plane, tls_service, namespace, "tunnelled-value")
            print(
                f"\nchange → Secret through a CONNECT tunnel, streaming: min {latencies[0] * 1000:.0f} ms,"
                f" median {latencies[2] * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms"
                " (includes kubectl polling)"
            )
            assert _streaming(control_plane, namespace)
            lists = tls_service.stats()["listSecretsByScope"].get(f"dev:{path}", 0) - lists_before
            print(f"lists for 5 changes: {lists}")
        finally:
            op.stop()
    harness.assert_no_values_leaked(control_plane, op)

    service_host = f"{PROXIED_HOST}:{tls_service.port}"
    api = urlsplit(control_plane.server)
    apiserver = f"{api.hostname}:{api.port}"
    requests = proxy.relayed()
    print("proxy saw:", *sorted(set(requests)), sep="\n  ")
    assert requests, "the proxy relayed nothing"
    # Only tunnels to the service: no request line in clear (a login, a list, the stream are all
    # inside TLS), so the proxy never saw a path, a token or a value.
    assert all(r.startswith(f"CONNECT {service_host}") for r in requests), requests
    log = proxy.log_path.read_text(errors="replace")
    assert apiserver not in log, "the apiserver was reached through the proxy"
    leaked = [v for v in harness.VALUES if len(v) >= 6 and v in log]
    assert not leaked, "a secret value is in the proxy's log"


@pytest.fixture(params=["https", "http"])
def any_service(request: pytest.FixtureRequest, service: DevServer, tls_service: DevServer) -> DevServer:
    """The dev server over HTTPS (through a CONNECT tunnel) and over plain http (forwarded)."""
    return tls_service if request.param == "https" else service


def _says(log: Path, text: str) -> Callable[[], bool]:
    return lambda: text in log.read_text(errors="replace")


def test_a_proxy_that_requires_authentication(
    control_plane: ControlPlane,
    crds: None,
    any_service: DevServer,
    ca: tlsca.CA,
    namespace: str,
    tmp_path: Path,
) -> None:
    """With the credentials in the proxy URL it relays (and streams); without them, or with a wrong
    password, status is ProxyRefused naming the 407 and where credentials go, the Secret keeps its
    data, and the credentials are nowhere in the operator's log, its Events or any status."""
    service = any_service
    path = f"/{namespace}"
    user, password = "ferry-proxy-user", f"proxy-pw-{uuid.uuid4().hex[:12]}"
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    service.set_secret(PROJECT_ID, "dev", path, "K", "authed-value-1")
    logs = []
    with running(
        Proxy(tmp_path / "auth-proxy.log", "ProxiedNames", basic_auth=f"{user}:{password}")
    ) as proxy:
        with_credentials = proxy.url.replace("http://", f"http://{user}:{password}@")
        logs.append(tmp_path / "operator-authed.log")
        op = _start(control_plane, service, logs[-1], with_credentials)
        try:
            _identity_for(control_plane, namespace, service, ca)
            harness.secret_sync(
                control_plane, namespace, "app", identity="uni", sources=[source(path)], refreshInterval="2s"
            )
            eventually(lambda: _value(control_plane, namespace) == "authed-value-1", what="the first sync")
            eventually(lambda: _streaming(control_plane, namespace), what="updateMode Streaming")
            service.set_secret(PROJECT_ID, "dev", path, "K", "authed-value-2")
            eventually(lambda: _value(control_plane, namespace) == "authed-value-2", what="a streamed change")
        finally:
            op.stop()
        relayed = proxy.relayed()
        host = f"{PROXIED_HOST}:{service.port}"
        assert any(host in r for r in relayed), relayed

        for label, url in [
            ("no credentials", proxy.url),
            ("a wrong password", proxy.url.replace("http://", f"http://{user}:not-the-password@")),
        ]:
            service.set_secret(PROJECT_ID, "dev", path, "K", f"never-relayed-{len(logs)}")
            logs.append(tmp_path / f"operator-{label.replace(' ', '-')}.log")
            op = _start(control_plane, service, logs[-1], url)
            try:
                # This operator's own 407 first: the status may still hold the previous round's.
                eventually(_says(logs[-1], "requires authentication"), timeout=60, what="its own 407")
                cond = eventually(
                    lambda: _not_ready(control_plane, namespace), timeout=60, what="Ready False"
                )
                scheme = urlsplit(service.base_url).scheme
                print(f"\n{scheme} via proxy, {label}: {cond.get('reason')}: {cond.get('message')}")
                assert cond.get("reason") == "ProxyRefused", cond
                message = str(cond.get("message"))
                assert "407" in message and "requires authentication" in message, message
                assert _value(control_plane, namespace) == "authed-value-2"  # kept, not emptied

                def identity_reason() -> object:
                    cond = harness.ready(control_plane, namespace, "uni", kind="machineidentity") or {}
                    return cond.get("reason")

                eventually(lambda: identity_reason() == "ProxyRefused", what="the identity's reason")
            finally:
                op.stop()

    everywhere = "\n".join(p.read_text(errors="replace") for p in logs) + _cluster_text(control_plane)
    for what in (password, basic, f"{user}:"):
        assert what not in everywhere, "the proxy credentials leaked into a log, an Event or a status"

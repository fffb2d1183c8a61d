"""A hostile tenant for the tenant-proof tests: exactly the rights a namespace user has, and a
listener of their own on loopback that records everything sent to it.

The tenant may create/update/get/list/delete MachineIdentities, SecretSyncs and generators in one namespace
and nothing else: no pods, no Secrets (not even get), no ServiceAccount tokens. Everything the
tenant applies goes through the apiserver as that ServiceAccount (a bearer token from
TokenRequest), so RBAC is real. What the operator then does on the tenant's behalf is what the
tests judge.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.net import free_port

TENANT_SA = "tenant"


@dataclass
class Tenant:
    """Acts in ``namespace`` with only the tenant's rights."""

    cp: ControlPlane
    namespace: str
    kubeconfig: Path

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        proc = subprocess.run(
            [str(self.cp.bin_dir / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            check=False,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"tenant: kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def apply(self, manifest: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", input=json.dumps(manifest))

    def can(self, verb: str, resource: str) -> bool:
        out = self.kubectl("auth", "can-i", verb, resource, "-n", self.namespace, check=False)
        return out.strip() == "yes"


def make_tenant(cp: ControlPlane, namespace: str, workdir: Path) -> Tenant:
    """A ServiceAccount in ``namespace`` bound to a Role for our namespaced kinds only."""
    cp.kubectl("create", "serviceaccount", TENANT_SA, "-n", namespace)
    cp.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "tenant", "namespace": namespace},
            "rules": [
                {
                    "apiGroups": ["secretferry.io"],
                    # Generators too: the chart aggregates them into edit like SecretSyncs.
                    "resources": [
                        "machineidentities",
                        "secretsyncs",
                        "passwordgenerators",
                        "uuidgenerators",
                        "dynamicsecretleases",
                        "pushsecrets",
                    ],
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
                }
            ],
        }
    )
    cp.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "tenant", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
            "subjects": [{"kind": "ServiceAccount", "name": TENANT_SA, "namespace": namespace}],
        }
    )
    token = cp.token_for(namespace, TENANT_SA, expiration_seconds=3600)
    path = cp.token_kubeconfig(token, workdir / f"tenant-{namespace}.kubeconfig", namespace=namespace)
    tenant = Tenant(cp, namespace, path)
    # The premise of every tenant test: these rights and no more.
    assert tenant.can("create", "secretsyncs.secretferry.io")
    assert not tenant.can("get", "secrets")
    assert not tenant.can("create", "serviceaccounts/token")
    assert not tenant.can("create", "pods")
    return tenant


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Listener:
    """An HTTP server on loopback that answers every request with ``status`` and records it."""

    status: int = 200
    answer: dict[str, Any] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def text(self) -> str:
        """Everything received, as one string to search for tokens and values."""
        parts = []
        for r in self.received:
            parts.append(f"{r.method} {r.path}\n" + "\n".join(f"{k}: {v}" for k, v in r.headers.items()))
            parts.append(r.body.decode(errors="replace"))
        return "\n".join(parts)


def _handler(listener: Listener) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def _record(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            listener.received.append(Received(self.command, self.path, dict(self.headers.items()), body))
            payload = json.dumps(listener.answer).encode()
            self.send_response(listener.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _record

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextlib.contextmanager
def listening(listener: Listener | None = None) -> Iterator[Listener]:
    """``with tenant.listening() as spy:`` — the tenant's own server; ``spy.text()`` is all it got."""
    listener = listener or Listener()
    listener.port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", listener.port), _handler(listener))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        server.shutdown()
        server.server_close()

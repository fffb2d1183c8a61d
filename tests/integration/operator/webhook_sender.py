"""The service's side of the signed-webhook path, for the webhook tests (test_operator_webhooks.py,
test_operator_webhook_relay.py): register a project webhook at the dev server, build and POST a
``secrets.modified`` request to the operator's receiver as the service would, start an operator
with the receiver on, and read the receiver's request counter.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import harness
import httpx
from harness import PROJECT_ID

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.net import free_port
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer
from secretferry.service import webhook_signature as sig


def body(path: str, **extra: Any) -> tuple[bytes, int]:
    """A ``secrets.modified`` request body for ``path`` in ``dev``, stamped now; and that stamp (ms)."""
    now_ms = time.time_ns() // 1_000_000
    doc = {
        "event": "secrets.modified",
        "project": {"workspaceId": PROJECT_ID, "environment": "dev", "secretPath": path},
        "timestamp": now_ms,
        **extra,
    }
    return json.dumps(doc, separators=(",", ":")).encode(), now_ms


def post(
    url: str, data: bytes, header: str | None, *, timeout: float = 10, forwarded_for: str | None = None
) -> int:
    """POST ``data`` with signature ``header`` (None: unsigned); the receiver's status code.

    ``forwarded_for``: an ``X-Forwarded-For`` as a proxy in front of the receiver would send it."""
    headers = {"Content-Type": "application/json"}
    if forwarded_for is not None:
        headers["X-Forwarded-For"] = forwarded_for
    if header is not None:
        headers[sig.HEADER] = header
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def register(service: DevServer, *, url: str, path: str, key: str) -> None:
    """A project webhook at the dev server for ``path``, signed with ``key``, sent to ``url``."""
    login = httpx.post(
        f"{service.base_url}/api/v1/auth/universal-auth/login",
        json={"clientId": "test-client", "clientSecret": "test-client-secret"},
    )
    token = login.json()["accessToken"]
    created = httpx.post(
        f"{service.base_url}/api/v1/webhooks",
        json={
            "projectId": PROJECT_ID,
            "environment": "dev",
            "secretPath": path,
            "webhookUrl": url,
            "webhookSecretKey": key,
        },
        headers={"Authorization": f"Bearer {token}"},
    )
    assert created.status_code == 200, created.text


def key_file(directory: Path, key: str) -> Path:
    """The signing key as the operator reads it (a mounted Secret's file)."""
    path = directory / "signing-key"
    path.write_text(key + "\n")
    return path


def start_receiving_operator(
    control_plane: ControlPlane, service: DevServer, workdir: Path, *, key: str, **env: str
) -> tuple[OperatorProcess, str]:
    """An operator with the webhook receiver on a free loopback port; and the receiver's URL."""
    port = free_port()
    op = harness.start_operator(
        control_plane,
        service,
        workdir / "operator.log",
        SECRETFERRY_WEBHOOK_PORT=str(port),
        SECRETFERRY_WEBHOOK_SIGNING_KEY_FILE=str(key_file(workdir, key)),
        **env,
    )
    return op, f"http://127.0.0.1:{port}/webhook"


def requests_counted(metrics: str, result: str) -> float:
    """``secretferry_webhook_requests_total`` for ``result`` in a metrics text."""
    prefix = f'secretferry_webhook_requests_total{{result="{result}"}}'
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith(prefix))

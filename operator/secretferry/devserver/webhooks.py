"""Project webhooks, as the real server sends them: ``/api/v1/webhooks`` and signed POSTs.

The real server (webhook service, ``fnTriggerWebhook``/``triggerWebhookRequest``): a webhook is
bound to a project environment and a folder path glob (picomatch); on every secret change at a
path (and, through the secret queue, at every path importing it) each enabled webhook whose glob
matches the path is POSTed ``{"event": "secrets.modified", "project": {"workspaceId", "projectId",
"projectName", "environment", "secretPath"}, "timestamp": <ms>}``, the body being
``JSON.stringify`` of that, signed ``x-infisical-signature: t=<timestamp>;<hex hmac-sha256 of the
body with the webhook's secret key>`` when a key is set. Sending is in the background: a write
never waits for a receiver (the real server queues it).

Kept in memory (not in the dev database): webhooks are test fixtures here, not state to survive a
restart. The signing rule is ``service.webhook_signature``'s — the operator's verifier — so a
mismatch between the two would be a bug in both; the unit test pins it to a known HMAC answer.
"""

from __future__ import annotations

import asyncio
import json
import secrets as secrets_mod
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from secretferry.devserver import globs
from secretferry.service import webhook_signature as sig

# The real server's WEBHOOK_TRIGGER_TIMEOUT (15 s in its constants).
TRIGGER_TIMEOUT_SECONDS = 15.0


@dataclass
class Webhook:
    id: str
    project_id: str
    environment: str
    secret_path: str
    url: str
    secret_key: str | None
    type: str = "general"
    is_disabled: bool = False
    last_status: str | None = None
    last_error: str | None = None
    created_at: float = field(default_factory=time.time)

    def wire(self, env_name: str) -> dict[str, Any]:
        """The real GET shape (the url is shown; the key never is)."""
        return {
            "id": self.id,
            "projectId": self.project_id,
            "environment": {"slug": self.environment, "name": env_name},
            "secretPath": self.secret_path,
            "url": self.url,
            "type": self.type,
            "isDisabled": self.is_disabled,
            "lastStatus": self.last_status,
            "lastRunErrorMessage": self.last_error,
        }


class WebhookStore:
    def __init__(self) -> None:
        self.by_id: dict[str, Webhook] = {}
        self.sent = 0
        self.failed = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, hook: Webhook) -> None:
        self.by_id[hook.id] = hook

    @staticmethod
    def new_id() -> str:
        return secrets_mod.token_hex(12)

    def of_project(self, project_id: str) -> list[Webhook]:
        return [h for h in self.by_id.values() if h.project_id == project_id]

    def fire(self, project_id: str, project_name: str, changes: Iterable[tuple[str, str]]) -> None:
        """Queue one POST per (matching webhook, changed (environment, path)); returns at once."""
        hooks = [h for h in self.of_project(project_id) if not h.is_disabled]
        if not hooks:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a synchronous admin call in a test): nothing can be sent
        for environment, path in sorted(set(changes)):
            for hook in hooks:
                if hook.environment != environment or not globs.glob_match(hook.secret_path, path):
                    continue
                data = {
                    "event": sig.EVENT_SECRETS_MODIFIED,
                    "project": {
                        "workspaceId": project_id,
                        "projectId": project_id,
                        "projectName": project_name,
                        "environment": environment,
                        "secretPath": path,
                    },
                }
                task = loop.create_task(self._send(hook, data))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _send(self, hook: Webhook, data: dict[str, Any]) -> None:
        payload = {**data, "timestamp": time.time_ns() // 1_000_000}
        body = json.dumps(payload, separators=(",", ":")).encode()  # JSON.stringify
        headers = {"Content-Type": "application/json"}
        if hook.secret_key:
            headers[sig.HEADER] = sig.header_value(body, hook.secret_key, payload["timestamp"])
        request = urllib.request.Request(hook.url, data=body, headers=headers, method="POST")
        try:
            await asyncio.to_thread(_post, request)
            hook.last_status, hook.last_error = "success", None
            self.sent += 1
        except Exception as exc:
            hook.last_status, hook.last_error = "failed", type(exc).__name__
            self.failed += 1


def _post(request: urllib.request.Request) -> None:
    with urllib.request.urlopen(request, timeout=TRIGGER_TIMEOUT_SECONDS) as response:
        response.read()

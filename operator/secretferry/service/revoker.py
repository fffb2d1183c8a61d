"""Revoking access tokens we no longer use, in the background and best effort.

Why: a token that was replaced (re-login, a renewal that returned a new one, an identity changed or
removed, the operator stopping) still works at the service until its TTL ends — 30 days by
default (docs/service-contract.md). Left alone, they pile up (82 live tokens for one identity were seen
after an outage). Why in the background: revoking is hygiene, never a reason to delay a sync, so
no caller awaits it; only shutdown waits for what is pending, for a bounded time.

A failed revocation is logged with the error class only and not retried: the token still expires
on its own, and retrying against a service that just failed would only add load.
"""

from __future__ import annotations

import asyncio
import logging

from secretferry import logfields
from secretferry.service import client as service_client
from secretferry.service import errors

logger = logging.getLogger(__name__)


class Revoker:
    """Background ``POST /api/v1/auth/token/revoke`` calls for one session's replaced tokens."""

    def __init__(self, client: service_client.ServiceClient, *, name: str) -> None:
        self._client = client
        self._name = name
        self._fields = {logfields.IDENTITY: name}  # structured log fields (logfields)
        self._pending: set[asyncio.Task[None]] = set()
        self.revoked = 0
        self.failed = 0

    @property
    def pending(self) -> int:
        return len(self._pending)

    def revoke_later(self, token: str, *, why: str) -> None:
        """Start revoking ``token``; returns at once (nothing to do without a running loop)."""
        try:
            task = asyncio.get_running_loop().create_task(self._revoke(token, why))
        except RuntimeError:
            return
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def drain(self, *, timeout_seconds: float) -> None:
        """Wait for pending revocations, at most ``timeout_seconds``; cancel what is left."""
        if not self._pending:
            return
        pending = set(self._pending)
        _, late = await asyncio.wait(pending, timeout=timeout_seconds)
        for task in late:
            task.cancel()
        if late:
            logger.info(
                "gave up revoking %d access token(s) of %s at shutdown",
                len(late),
                self._name,
                extra=self._fields,
            )

    async def _revoke(self, token: str, why: str) -> None:
        try:
            await self._client.revoke_token(token)
        except errors.ServiceError as exc:
            self.failed += 1
            if isinstance(exc, errors.AuthenticationError | errors.NotFound):
                # Already dead (expired, or revoked by the service): nothing left to do.
                logger.debug(
                    "an access token of %s was no longer valid (%s)", self._name, why, extra=self._fields
                )
                return
            logger.info(
                "could not revoke an access token of %s (%s): %s%s",
                self._name,
                why,
                type(exc).__name__,
                f" (status {exc.status_code})" if exc.status_code else "",
                extra=self._fields,
            )
            return
        self.revoked += 1
        logger.debug("revoked an access token of %s (%s)", self._name, why)

"""Auth sessions: one access token per machine identity, logged in, renewed and replaced on demand.

Why a session object rather than a token in each call: every reconcile of every resource that uses
an identity needs its token, and a restart or an expiry must cost ONE login, not one per resource
(the stampede that gets an identity locked out). So the token lives here, behind a lock, and:

- ``token()`` logs in when there is no token, renews it (``renew_token``) once only
  ``renew_margin_fraction`` of its lifetime is left, and logs in afresh when renewal fails or the
  max TTL (counted from the first login) is near. If refreshing fails while the old token is still
  valid, the old token is used and the refresh is retried after a backoff.
- ``call(fn)`` runs ``fn`` with a client view carrying the token; on ``AuthenticationError`` (401,
  or 403 ``TokenError``) it drops that token, logs in again ONCE with fresh credentials (a freshly
  minted ServiceAccount token, never the one used before) and retries; a second failure is raised.
- Failed logins are remembered for a backoff period (full jitter): during it callers get the last
  login error immediately, so a broken credential cannot turn into a tight login loop.

Tokens never reach a log line, an exception message or a ``repr``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import datetime
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from secretferry.service import backoff, errors, events, models
from secretferry.service import client as service_client

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Credentials(Protocol):
    """How an identity logs in; ``kind`` names the method in logs and status."""

    @property
    def kind(self) -> str: ...

    @property
    def can_relogin(self) -> bool:
        """Whether a new login can yield a different (valid) token."""
        ...

    async def login(self, client: service_client.ServiceClient) -> models.LoginResult: ...


@dataclasses.dataclass(frozen=True)
class KubernetesCredentials:
    """Kubernetes auth; ``mint_jwt`` returns a NEW ServiceAccount token and is called at every login."""

    identity_id: str
    mint_jwt: Callable[[], Awaitable[str]]
    organization_slug: str | None = None

    kind = "kubernetes"
    can_relogin = True

    async def login(self, client: service_client.ServiceClient) -> models.LoginResult:
        jwt = await self.mint_jwt()
        return await client.login_kubernetes(
            identity_id=self.identity_id, jwt=jwt, organization_slug=self.organization_slug
        )


@dataclasses.dataclass(frozen=True)
class UniversalCredentials:
    """Universal auth (client id + secret)."""

    client_id: str
    client_secret: str = dataclasses.field(repr=False)

    kind = "universal"
    can_relogin = True

    async def login(self, client: service_client.ServiceClient) -> models.LoginResult:
        return await client.login_universal(client_id=self.client_id, client_secret=self.client_secret)


@dataclasses.dataclass(frozen=True)
class StaticTokenCredentials:
    """A ready access token (development): never renewed, never replaced, never revoked by us."""

    token: str = dataclasses.field(repr=False)

    kind = "accessToken"
    can_relogin = False

    async def login(self, client: service_client.ServiceClient) -> models.LoginResult:
        # Lifetime unknown: 0 means "no expiry known", so the session never tries to renew it.
        return models.LoginResult(access_token=self.token, expires_in=0)


@dataclasses.dataclass(frozen=True)
class _Token:
    value: str = dataclasses.field(repr=False)
    issued_at: float  # monotonic, when the login/renewal request was sent (conservative)
    deadline: float | None  # monotonic; None = no known expiry
    refresh_at: float | None  # monotonic; start renewing from here
    max_deadline: float | None  # monotonic; the max TTL, counted from the first login
    expires_at: datetime.datetime | None  # wall clock, for status
    ttl: float | None  # seconds the service granted


class AuthSession:
    """The token of one identity against one service client (see the module docstring)."""

    def __init__(
        self,
        client: service_client.ServiceClient,
        credentials: Credentials,
        *,
        name: str = "",
        renew_margin_fraction: float = 0.2,
        login_backoff_initial: float = 1.0,
        login_backoff_max: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if not 0 < renew_margin_fraction < 1:
            raise ValueError("renew_margin_fraction must be between 0 and 1")
        self._client = client
        self._credentials = credentials
        self._name = name or credentials.kind
        self._margin = renew_margin_fraction
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = asyncio.Lock()
        self._current: _Token | None = None
        self._login_backoff = backoff.Backoff(login_backoff_initial, login_backoff_max, clock=clock)
        self._last_login_error: errors.ServiceError | None = None
        self._refresh_backoff = backoff.Backoff(login_backoff_initial, login_backoff_max, clock=clock)
        self._last_login_at: datetime.datetime | None = None
        self.logins = 0
        self.renewals = 0
        self.login_failures = 0

    def __repr__(self) -> str:
        token = "set" if self._current else "none"
        return f"AuthSession({self._name!r}, {self._credentials.kind}, token={token})"

    # --- state for status and metrics ----------------------------------------------------------------

    @property
    def expires_at(self) -> datetime.datetime | None:
        """When the current token stops working (UTC), or ``None`` (no token, or no known expiry)."""
        return self._current.expires_at if self._current else None

    @property
    def last_login_at(self) -> datetime.datetime | None:
        return self._last_login_at

    @property
    def has_token(self) -> bool:
        return self._current is not None

    # --- the token -------------------------------------------------------------------------------------

    async def token(self) -> str:
        """A token that is valid now; logs in or renews as needed (one caller does, others wait)."""
        current = self._current
        if current is not None and not self._needs_refresh(current, self._clock()):
            return current.value
        async with self._lock:
            current = self._current
            now = self._clock()
            if current is not None and not self._needs_refresh(current, now):
                return current.value
            return (await self._refresh(current, now)).value

    def invalidate(self, token: str) -> None:
        """The service rejected ``token``: forget it, unless another caller already replaced it."""
        if self._current is not None and self._current.value == token:
            logger.info("access token of %s was rejected; the next call logs in again", self._name)
            self._current = None

    async def call(self, fn: Callable[[service_client.ServiceClient], Awaitable[T]]) -> T:
        """Run ``fn`` with an authenticated client; one re-login and retry on ``AuthenticationError``."""
        token = await self.token()
        try:
            return await fn(self._client.with_token(token))
        except errors.AuthenticationError:
            if not self._credentials.can_relogin:
                raise
            self.invalidate(token)
        token = await self.token()
        return await fn(self._client.with_token(token))

    @contextlib.asynccontextmanager
    async def subscribe(
        self, project_id: str, register: Sequence[events.EventRegistration]
    ) -> AsyncIterator[AsyncIterator[events.StreamMessage]]:
        """``subscribe_project_events`` with this session's token, usable as a ``StreamManager`` opener.

        An ``AuthenticationError`` (refused subscribe, or ``event: error`` while streaming) drops the
        token, so the next connect logs in again with fresh credentials; the error is re-raised for
        the stream loop to decide when to reconnect.
        """
        token = await self.token()
        try:
            async with self._client.with_token(token).subscribe_project_events(project_id, register) as it:
                yield it
        except errors.AuthenticationError:
            self.invalidate(token)
            raise

    async def revoke(self) -> None:
        """Revoke the current token at the service (not for static tokens: they are not ours)."""
        async with self._lock:
            current, self._current = self._current, None
            if current is not None and self._credentials.can_relogin:
                await self._client.revoke_token(current.value)

    async def close(self) -> None:
        """Forget the token without revoking it (other processes may share the identity's tokens)."""
        self._current = None

    # --- internals ------------------------------------------------------------------------------------

    def _needs_refresh(self, token: _Token, now: float) -> bool:
        if token.refresh_at is None or now < token.refresh_at:
            return False
        # Inside the margin; while an earlier refresh failed and the token still works, wait.
        still_valid = token.deadline is None or now < token.deadline
        return not (still_valid and not self._refresh_backoff.ready())

    async def _refresh(self, current: _Token | None, now: float) -> _Token:
        if current is not None and self._renewable(current, now):
            try:
                return self._install(await self._renew(current), now, max_deadline=current.max_deadline)
            except errors.ServiceError as exc:
                logger.info(
                    "renewing the token of %s failed (%s); logging in again", self._name, type(exc).__name__
                )
        try:
            return await self._login()
        except errors.ServiceError:
            if current is not None and (current.deadline is None or self._clock() < current.deadline):
                delay = self._refresh_backoff.next_delay()
                logger.warning(
                    "refreshing the token of %s failed; using the current one, retrying in %.1f s",
                    self._name,
                    delay,
                )
                return current
            raise

    def _renewable(self, token: _Token, now: float) -> bool:
        if not self._credentials.can_relogin or token.deadline is None or now >= token.deadline:
            return False
        if token.max_deadline is not None and token.ttl is not None:
            # Renewal cannot extend past the max TTL: close to it, only a new login helps.
            return token.max_deadline - now > self._margin * token.ttl
        return True

    async def _renew(self, token: _Token) -> models.LoginResult:
        result = await self._client.renew_token(token.value)
        self.renewals += 1
        logger.debug("renewed the token of %s (expires in %s s)", self._name, result.expires_in)
        return result

    async def _login(self) -> _Token:
        if not self._login_backoff.ready() and self._last_login_error is not None:
            raise _fresh_copy(self._last_login_error)
        started = self._clock()
        try:
            result = await self._credentials.login(self._client)
        except errors.ServiceError as exc:
            self.login_failures += 1
            self._last_login_error = exc
            delay = self._login_backoff.next_delay(getattr(exc, "retry_after", None))
            logger.warning(
                "login of %s (%s) failed: %s; next attempt in %.1f s",
                self._name,
                self._credentials.kind,
                type(exc).__name__,
                delay,
            )
            raise
        self._login_backoff.reset()
        self._refresh_backoff.reset()
        self._last_login_error = None
        self.logins += 1
        self._last_login_at = datetime.datetime.fromtimestamp(self._wall_clock(), tz=datetime.UTC)
        max_ttl = result.access_token_max_ttl
        max_deadline = started + max_ttl if max_ttl and max_ttl > 0 else None
        logger.info("logged in as %s (%s)", self._name, self._credentials.kind)
        return self._install(result, started, max_deadline=max_deadline)

    def _install(self, result: models.LoginResult, started: float, *, max_deadline: float | None) -> _Token:
        ttl = float(result.expires_in) if result.expires_in > 0 else None
        deadline: float | None = None
        refresh_at: float | None = None
        expires_at: datetime.datetime | None = None
        if ttl is not None:
            deadline = started + ttl
            if max_deadline is not None:
                deadline = min(deadline, max_deadline)
            refresh_at = deadline - self._margin * ttl
            wall = self._wall_clock() + (deadline - self._clock())
            expires_at = datetime.datetime.fromtimestamp(wall, tz=datetime.UTC)
        token = _Token(
            value=result.access_token,
            issued_at=started,
            deadline=deadline,
            refresh_at=refresh_at,
            max_deadline=max_deadline,
            expires_at=expires_at,
            ttl=ttl,
        )
        self._refresh_backoff.reset()
        self._current = token
        return token


def _fresh_copy(exc: errors.ServiceError) -> errors.ServiceError:
    """Re-raise a remembered error without growing its traceback on every raise."""
    clone = copy.copy(exc)
    return clone.with_traceback(None)

"""Auth sessions: one access token per machine identity, logged in, renewed and replaced on demand.

Why a session object rather than a token in each call: every reconcile of every resource that uses
an identity needs its token, and a restart or an expiry must cost ONE login, not one per resource
(the stampede that gets an identity locked out). So the token lives here, behind a lock, and:

- ``token()`` logs in when there is no token, renews it (``renew_token``) once only
  ``renew_margin_fraction`` of its lifetime is left, and logs in afresh when renewal fails or
  cannot succeed. The service refuses (and deletes the token on) a renewal whose new lifetime would
  pass the max TTL: ``now + TTL > createdAt + maxTTL`` (docs/service-contract.md, "Logging in"), so
  with TTL = max TTL, the default, no renewal ever succeeds. A renewal is therefore only tried when
  it can succeed; otherwise the session logs in afresh at the same point. A renewal the service
  refused (401) leaves a dead token: it is dropped, never used again and never revoked (the revoke
  would only earn another 401). If refreshing fails otherwise while the old token is still valid,
  the old token is used and the refresh is retried after a backoff.
- ``call(fn)`` runs ``fn`` with a client view carrying the token; on ``AuthenticationError`` (401,
  or 403 ``TokenError``) it drops that token, logs in again ONCE with fresh credentials (a freshly
  minted ServiceAccount token, never the one used before) and retries; a second failure is raised.
- Failed logins are remembered for a backoff period (full jitter): during it callers get the last
  login error immediately, so a broken credential cannot turn into a tight login loop. When the
  failure was the host not answering and the host has answered since (``health.HostHealth``), the
  next caller logs in at once: after an outage, one login per identity, not one per backoff.
- Every login is logged at INFO with the identity and why it happened (first login, token
  rejected, renewal failed, max TTL near, expired), and reported to ``on_login(method, result)``.
- A token we stop using is revoked at the service in the background (``revoker``): replaced by a
  login, rejected, the identity changed or removed
  (``retire``, after a grace period for calls under way), the operator stopping (``close``).

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
from typing import TypeVar

from secretferry import backoff, logfields
from secretferry.service import client as service_client
from secretferry.service import credentials, errors, events, health, models, revoker

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Why a login happens, for its log line (a fixed vocabulary: no values, no tokens).
FIRST_LOGIN = "first login"
TOKEN_REJECTED = "the service rejected the token"
TOKEN_EXPIRED = "the token expired"
MAX_TTL_NEAR = "a renewal would pass the token's max TTL"
NOT_RENEWABLE = "the token is near expiry and cannot be renewed"
RENEWAL_REFUSED = "the service refused the renewal"

# A retired session (identity changed or removed) keeps its token this long before revoking it:
# reconciles that picked the session up just before finish their calls (each bounded by the
# 10 s call timeout), instead of failing with a token revoked under them.
RETIRE_GRACE_SECONDS = 30.0
# At shutdown, how long revocations may hold up the exit: a few round trips. The kubelet's
# default grace period is 30 s, and a service that does not answer must not use all of it.
CLOSE_TIMEOUT_SECONDS = 3.0
# A renewal is tried only when the renewed lifetime ends this much before the max TTL: our clock
# and the service's differ by the request's time in flight (bounded by the 10 s call timeout) and
# by the login's, already on the safe side since the max TTL is counted from when it was sent.
RENEW_SLACK_SECONDS = 30.0

OnLogin = Callable[[str, str], None]
"""``on_login(method, result)``: ``result`` is ``success`` or the error's class name."""


# The login methods live in ``credentials``; named here too, where sessions are built.
Credentials = credentials.Credentials
KubernetesCredentials = credentials.KubernetesCredentials
OIDCCredentials = credentials.OIDCCredentials
JWTCredentials = credentials.JWTCredentials
UniversalCredentials = credentials.UniversalCredentials
StaticTokenCredentials = credentials.StaticTokenCredentials


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
        on_login: OnLogin | None = None,
        retire_grace_seconds: float = RETIRE_GRACE_SECONDS,
    ) -> None:
        if not 0 < renew_margin_fraction < 1:
            raise ValueError("renew_margin_fraction must be between 0 and 1")
        self._client = client
        self._credentials = credentials
        self._name = name or credentials.kind
        # Structured log fields: the identity this session logs in as (logfields).
        self._fields = {logfields.IDENTITY: self._name}
        self._margin = renew_margin_fraction
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = asyncio.Lock()
        self._current: _Token | None = None
        self._login_backoff = backoff.Backoff(login_backoff_initial, login_backoff_max, clock=clock)
        self._last_login_error: errors.ServiceError | None = None
        self._refresh_backoff = backoff.Backoff(login_backoff_initial, login_backoff_max, clock=clock)
        self._last_login_at: datetime.datetime | None = None
        self._on_login = on_login
        self._retire_grace = retire_grace_seconds
        self._retired = False
        self._retire_handle: asyncio.TimerHandle | None = None
        self._relogin_reason: str | None = None
        self._login_failed_recoveries = 0  # the host's recovery count when a login last failed
        self._revoker = revoker.Revoker(client, name=self._name)
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

    @property
    def host_health(self) -> health.HostHealth:
        return self._client.host_health

    @property
    def api_root(self) -> str:
        """The API root of this session's host (what per-host knowledge is keyed by)."""
        return self._client.api_root

    @property
    def revocations(self) -> int:
        """Replaced tokens the service confirmed revoked."""
        return self._revoker.revoked

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
        """The service rejected ``token``: forget it, unless another caller already replaced it.

        It is revoked too: a stream's re-check can fail on a permission while the token lives on.
        """
        if self._current is not None and self._current.value == token:
            logger.info(
                "access token of %s was rejected; the next call logs in again", self._name, extra=self._fields
            )
            self._current = None
            self._relogin_reason = TOKEN_REJECTED
            self._revoke_later(token, why="rejected by the service")

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
        """Revoke the current token at the service now (not static tokens: they are not ours)."""
        async with self._lock:
            current, self._current = self._current, None
            if current is not None and self._credentials.can_relogin:
                await self._client.revoke_token(current.value)

    def retire(self, *, grace_seconds: float | None = None, why: str = "identity changed or removed") -> None:
        """The identity changed or was removed: no more logins; the token is revoked after
        ``retire_grace_seconds``, so calls already under way finish with it. ``grace_seconds=0``
        when the credential's owner took their consent back: the token goes at once."""
        if self._retired:
            return
        self._retired = True
        grace = self._retire_grace if grace_seconds is None else grace_seconds
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._drop_and_revoke(why)
            return
        self._retire_handle = loop.call_later(grace, self._drop_and_revoke, why)

    async def close(self, *, timeout_seconds: float = CLOSE_TIMEOUT_SECONDS) -> None:
        """Shutdown: revoke the token (each process logs in for itself: nobody else uses it) and
        wait for pending revocations, at most ``timeout_seconds``."""
        self._retired = True
        if self._retire_handle is not None:
            self._retire_handle.cancel()
        self._drop_and_revoke("operator shutdown")
        await self._revoker.drain(timeout_seconds=timeout_seconds)

    def _drop_and_revoke(self, why: str) -> None:
        current, self._current = self._current, None
        if current is not None:
            self._revoke_later(current.value, why=why)

    def _revoke_later(self, token: str, *, why: str) -> None:
        if self._credentials.can_relogin:  # a static token is the user's, not ours to revoke
            self._revoker.revoke_later(token, why=why)

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
                result = await self._renew(current)
                # The same token at the service, even when it comes back as a new string (newer
                # servers re-sign it): the old string is never revoked, that would revoke both.
                return self._install(result, now, max_deadline=current.max_deadline, why=None)
            except errors.AuthenticationError as exc:
                # Refused: the service deleted the token (docs/service-contract.md). It is dead, so
                # it is neither used as a fallback nor revoked.
                logger.info(
                    "the service refused to renew the token of %s (%s); logging in again",
                    self._name,
                    type(exc).__name__,
                    extra=self._fields,
                )
                if self._current is current:
                    self._current = None
                current = None
                reason = RENEWAL_REFUSED
            except errors.ServiceError as exc:
                logger.info(
                    "renewing the token of %s failed (%s); logging in again",
                    self._name,
                    type(exc).__name__,
                    extra=self._fields,
                )
                reason = f"renewal failed ({type(exc).__name__})"
        else:
            reason = self._login_reason(current, now)
        try:
            return await self._login(reason)
        except errors.ServiceError:
            if current is not None and (current.deadline is None or self._clock() < current.deadline):
                delay = self._refresh_backoff.next_delay()
                logger.warning(
                    "refreshing the token of %s failed; using the current one, retrying in %.1f s",
                    self._name,
                    delay,
                    extra=self._fields,
                )
                return current
            raise

    def _login_reason(self, current: _Token | None, now: float) -> str:
        if current is None:
            return self._relogin_reason or (FIRST_LOGIN if self.logins == 0 else "no token")
        if current.deadline is not None and now >= current.deadline:
            return TOKEN_EXPIRED
        if not self._renewal_fits(current, now):
            return MAX_TTL_NEAR
        return NOT_RENEWABLE

    def _renewable(self, token: _Token, now: float) -> bool:
        if not self._credentials.can_relogin or token.deadline is None or now >= token.deadline:
            return False
        return self._renewal_fits(token, now)

    @staticmethod
    def _renewal_fits(token: _Token, now: float) -> bool:
        """Whether the service would renew: ``now + TTL <= createdAt + maxTTL`` (with a slack)."""
        if token.max_deadline is None or token.ttl is None:
            return True
        return now + token.ttl + RENEW_SLACK_SECONDS <= token.max_deadline

    async def _renew(self, token: _Token) -> models.LoginResult:
        result = await self._client.renew_token(token.value)
        self.renewals += 1
        logger.debug(
            "renewed the token of %s (expires in %s s)", self._name, result.expires_in, extra=self._fields
        )
        return result

    async def _login(self, reason: str) -> _Token:
        if self._retired:
            raise errors.AuthenticationError(
                f"{self._name}: this login session was retired (the identity changed or was removed)"
            )
        last_error = self._last_login_error
        if last_error is not None and not self._login_backoff.ready() and not self._host_back(last_error):
            raise _fresh_copy(last_error)
        started = self._clock()
        try:
            try:
                result = await self._credentials.login(self._client)
            except errors.NotFound as exc:
                raise _login_not_found(exc, self._credentials.kind) from exc
        except Exception as exc:  # counted whatever it is; only service errors back off
            self._count_login(type(exc).__name__)
            if not isinstance(exc, errors.ServiceError):
                raise
            self.login_failures += 1
            self._last_login_error = exc
            self._login_failed_recoveries = self.host_health.recoveries
            delay = self._login_backoff.next_delay(getattr(exc, "retry_after", None))
            if isinstance(exc, errors.LoginRejected):
                # Retrying soon cannot help (see LoginRejected): a long pause, whatever the backoff says.
                delay = max(delay, exc.retry_after_seconds)
                self._login_backoff.retry_at = self._clock() + delay
            logger.warning(
                "login of %s (%s, %s) failed: %s; next attempt in %.1f s",
                self._name,
                self._credentials.kind,
                reason,
                type(exc).__name__,
                delay,
                extra=self._fields,
            )
            raise
        self._login_backoff.reset()
        self._refresh_backoff.reset()
        self._last_login_error = None
        self._relogin_reason = None
        self.logins += 1
        self._count_login("success")
        self._last_login_at = datetime.datetime.fromtimestamp(self._wall_clock(), tz=datetime.UTC)
        max_ttl = result.access_token_max_ttl
        max_deadline = started + max_ttl if max_ttl and max_ttl > 0 else None
        logger.info(
            "logged in as %s (%s): %s", self._name, self._credentials.kind, reason, extra=self._fields
        )
        return self._install(result, started, max_deadline=max_deadline, why="replaced by a new login")

    def _host_back(self, error: errors.ServiceError) -> bool:
        """Whether the last login failed because nobody answered, and the host answers again."""
        if not isinstance(error, errors.Unavailable) or isinstance(error, errors.RateLimited):
            return False
        host = self.host_health
        return host.recoveries > self._login_failed_recoveries and host.retry_allowed()

    def _count_login(self, result: str) -> None:
        if self._on_login is None:
            return
        try:
            self._on_login(self._credentials.kind, result)
        except Exception:
            logger.exception("on_login hook failed")

    def _install(
        self, result: models.LoginResult, started: float, *, max_deadline: float | None, why: str | None
    ) -> _Token:
        """Make ``result`` the current token; the one it replaces is revoked with ``why``, unless
        ``why`` is None (a renewal: the same token at the service)."""
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
        previous, self._current = self._current, token
        if why is not None and previous is not None and previous.value != token.value:
            self._revoke_later(previous.value, why=why)
        return token


def _login_not_found(exc: errors.NotFound, kind: str) -> errors.LoginRejected:
    """A 404 at login is no missing source: the service (the 2024-10 self-hosted release) knows no
    such client id or identity, or the identity has no ``kind`` auth method attached."""
    what = "client id" if kind == "universal" else "identity id"
    return errors.LoginRejected(
        f"the service knows no such {what}, or the identity has no {kind} auth method attached "
        f"({exc.message})",
        status_code=exc.status_code,
        req_id=exc.req_id,
    )


def _fresh_copy(exc: errors.ServiceError) -> errors.ServiceError:
    """Re-raise a remembered error without growing its traceback on every raise."""
    clone = copy.copy(exc)
    return clone.with_traceback(None)

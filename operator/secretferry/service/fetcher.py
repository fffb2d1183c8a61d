"""Scope fetcher: one list call per scope per cycle, however many resources read that scope.

Why: the hosted service limits reads per client IP (120 secret reads a minute on the free plan) and
one operator pod is one IP, so calls are budgeted per scope, not per resource:

- single flight: concurrent fetches of one scope share ONE in-flight call;
- freshness: ``fetch(..., not_older_than=t)`` returns the cached result when its call was sent at
  or after ``t`` (so a resync cycle costs one list per scope);
- conditional GET: the last ETag is sent as ``If-None-Match``; a 304 returns the cached list;
- the list route per host (``listroutes``): v4, or v3 raw on a server shown to have no v4 list;
- per-scope backoff (full jitter, ``retry-after`` honoured): while it runs, ``fetch`` raises the last
  error without calling; ``next_attempt_at(scope)`` tells the scheduler when to come back.

A failure never discards the cached good result: callers keep (and the operator never empties) a
Secret because the service had a bad minute. ``force=True`` skips the cache, the ETag and the
backoff (a user asked for a refresh).
"""

from __future__ import annotations

import asyncio
import collections
import copy
import dataclasses
import logging
import math
import random
import time
from collections.abc import Callable

from secretferry import backoff, logfields
from secretferry.service import auth, errors, listroutes, models, pacing, scopes

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class FetchResult:
    """A scope's secrets; ``fetched_at`` is the monotonic time the answering call was SENT.

    ``changed`` says whether that call's answer differed from the one before (a first fetch counts
    as changed); it says nothing about the Kubernetes side, which callers still compare.
    """

    secret_list: models.SecretList
    fetched_at: float
    changed: bool
    etag: str | None


@dataclasses.dataclass
class _Flight:
    started_at: float
    task: asyncio.Task[FetchResult]


@dataclasses.dataclass
class _Entry:
    backoff: backoff.Backoff
    result: FetchResult | None = None
    flight: _Flight | None = None
    last_error: errors.ServiceError | None = None


class ScopeFetcher:
    """Cache, single flight and backoff for list calls, keyed by ``scopes.Scope``."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        backoff_initial: float = 1.0,
        backoff_max: float = 300.0,
        on_call: Callable[[scopes.Scope, str, str], None] | None = None,
        rng: random.Random | None = None,
        routes: listroutes.ListRoutes | None = None,
    ) -> None:
        """``on_call(scope, outcome, endpoint)`` after every list call: ``outcome`` is ``changed``,
        ``unchanged``, ``not_modified`` or the error's class name, ``endpoint`` the route that
        answered (``GET /api/v4/secrets`` or ``GET /api/v3/secrets/raw``). ``routes`` is shared
        by every scope: which list route each host has is learned once."""
        self._rng = rng
        self._clock = clock
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._on_call = on_call
        self.routes = routes if routes is not None else listroutes.ListRoutes()
        self._entries: dict[scopes.Scope, _Entry] = {}
        # Metrics (the lead's collector reads these).
        self.calls = 0
        self.not_modified = 0
        self.cache_hits = 0
        self.joined = 0
        self.failures: collections.Counter[str] = collections.Counter()

    # --- queries for the scheduler -------------------------------------------------------------------

    def cached(self, scope: scopes.Scope) -> FetchResult | None:
        entry = self._entries.get(scope)
        return entry.result if entry else None

    def last_error(self, scope: scopes.Scope) -> errors.ServiceError | None:
        entry = self._entries.get(scope)
        return entry.last_error if entry else None

    def next_attempt_at(self, scope: scopes.Scope) -> float | None:
        """Monotonic time before which ``fetch`` fails fast for ``scope``; ``None`` when not backing off."""
        entry = self._entries.get(scope)
        if entry is None or entry.last_error is None:
            return None
        return entry.backoff.retry_at

    def retry_now(self, scope: scopes.Scope, *, not_before: float | None = None) -> bool:
        """End the backoff of a scope that failed because its host was not answering (the host
        answers again); keeps the failure count and any later ``retry-after``. True if it was waiting."""
        entry = self._entries.get(scope)
        error = entry.last_error if entry else None
        if (
            entry is None
            or not isinstance(error, errors.Unavailable)
            or isinstance(error, errors.RateLimited)
        ):
            return False
        entry.backoff.expedite(not_before)
        return True

    def paced_wait(
        self, scope: scopes.Scope, session: auth.AuthSession, *, not_older_than: float | None = None
    ) -> float:
        """Seconds a routine resync of ``scope`` would wait for rate-limit budget (``pacing``);
        0 for a first fetch, and when it would be answered from the cache, join a call already
        sent, fail fast in backoff, or go at once."""
        entry = self._entries.get(scope)
        if entry is None or entry.result is None:
            # A first fetch keeps its place in the pacer's queue: given back, it would return
            # behind every periodic resync of scopes that are synced already.
            return 0.0
        flight = entry.flight
        if _fresh(entry.result, not_older_than):
            return 0.0
        if flight is not None and flight.started_at != math.inf:
            return 0.0  # sent: joining it costs no budget
        if flight is None and entry.last_error is not None and not entry.backoff.ready():
            return 0.0
        return pacing.wait_estimate(session.api_root, self._endpoint(session), level=pacing.ROUTINE)

    def forget(self, scope: scopes.Scope) -> None:
        """No sync uses ``scope`` any more: drop its cache (an in-flight call finishes unseen)."""
        self._entries.pop(scope, None)

    def __len__(self) -> int:
        return len(self._entries)

    # --- fetching -------------------------------------------------------------------------------------

    async def fetch(
        self,
        scope: scopes.Scope,
        session: auth.AuthSession,
        *,
        not_older_than: float | None = None,
        force: bool = False,
    ) -> FetchResult:
        """The scope's secrets (see the module docstring); raises a ``ServiceError`` on failure."""
        entry = self._entries.get(scope)
        if entry is None:
            entry = self._entries[scope] = _Entry(
                backoff=backoff.Backoff(
                    self._backoff_initial, self._backoff_max, clock=self._clock, rng=self._rng
                )
            )
        while True:
            result = entry.result
            if not force and result is not None and _fresh(result, not_older_than):
                self.cache_hits += 1
                return result
            flight = entry.flight
            if flight is not None:
                if not_older_than is None or flight.started_at >= not_older_than:
                    self.joined += 1
                    return await asyncio.shield(flight.task)
                # That call was sent before the change we must see: wait for it, then call again.
                await asyncio.wait([flight.task])
                continue
            if not force and entry.last_error is not None and not entry.backoff.ready():
                raise _fresh_copy(entry.last_error)
            return await asyncio.shield(self._start(scope, entry, session, force=force).task)

    def _start(
        self, scope: scopes.Scope, entry: _Entry, session: auth.AuthSession, *, force: bool
    ) -> _Flight:
        started = self._clock()
        # A task of its own: a cancelled caller must not cancel the call the others wait for.
        task = asyncio.create_task(self._call(scope, entry, session, started=started, force=force))
        task.add_done_callback(_retrieve)
        # Not sent yet: under a rate limit it may wait minutes for budget (``pacing``), and what
        # it will answer is newer than any change until then, so joiners take it as fresh.
        entry.flight = _Flight(started_at=math.inf, task=task)
        return entry.flight

    async def _call(
        self, scope: scopes.Scope, entry: _Entry, session: auth.AuthSession, *, started: float, force: bool
    ) -> FetchResult:
        previous = entry.result
        etag = previous.etag if previous is not None and not force else None
        query = scope.to_query()
        self.calls += 1
        flight = entry.flight

        def sent() -> None:  # dated by the send (after any wait for rate-limit budget)
            nonlocal started
            started = self._clock()
            if flight is not None:
                flight.started_at = started

        try:
            with pacing.on_send(sent):
                answer = await session.call(lambda client: self.routes.list(client, query, etag=etag))
        except errors.ServiceError as exc:
            self._failed(scope, entry, exc, endpoint=self._endpoint(session))
            raise
        finally:
            entry.flight = None
        entry.backoff.reset()
        entry.last_error = None
        if isinstance(answer, models.NotModified):
            if previous is None:  # we only send an ETag when we hold its list
                raise errors.ProtocolError(f"{self._endpoint(session)}: 304 without a cached list")
            self.not_modified += 1
            result = FetchResult(previous.secret_list, fetched_at=started, changed=False, etag=answer.etag)
            outcome = "not_modified"
        else:
            changed = previous is None or not _same(previous.secret_list, answer)
            result = FetchResult(answer, fetched_at=started, changed=changed, etag=answer.etag)
            outcome = "changed" if changed else "unchanged"
        entry.result = result
        self._notify(scope, outcome, self._endpoint(session))
        return result

    def _endpoint(self, session: auth.AuthSession) -> str:
        return f"GET {self.routes.path_for(session.api_root)}"

    def _failed(self, scope: scopes.Scope, entry: _Entry, exc: errors.ServiceError, *, endpoint: str) -> None:
        name = type(exc).__name__
        self.failures[name] += 1
        entry.last_error = exc
        delay = entry.backoff.next_delay(exc.retry_after if isinstance(exc, errors.Unavailable) else None)
        logger.warning(
            "listing %s failed: %s; retry in %.1f s",
            scope.describe(),
            exc,
            delay,
            extra={logfields.IDENTITY: scope.identity_key, logfields.SCOPE: scope.describe()},
        )
        self._notify(scope, name, endpoint)

    def _notify(self, scope: scopes.Scope, outcome: str, endpoint: str) -> None:
        if self._on_call is None:
            return
        try:
            self._on_call(scope, outcome, endpoint)
        except Exception:
            logger.exception("on_call hook failed")


def _fresh(result: FetchResult, not_older_than: float | None) -> bool:
    return not_older_than is not None and result.fetched_at >= not_older_than


def _same(old: models.SecretList, new: models.SecretList) -> bool:
    return old.secrets == new.secrets and old.imports == new.imports


def _retrieve(task: asyncio.Task[FetchResult]) -> None:
    if not task.cancelled():
        task.exception()


def _fresh_copy(exc: errors.ServiceError) -> errors.ServiceError:
    """The remembered error, without the traceback that grows on every re-raise."""
    return copy.copy(exc).with_traceback(None)

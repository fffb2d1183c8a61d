"""Which list endpoint each host has: ``GET /api/v4/secrets``, or v3 raw on servers older than v4.

Why per host, and remembered: a server has the v4 list or it does not, for every identity and
every scope on it. Asking v4 first on every call would double the calls (and the per-IP read
budget, docs/service-contract.md) against an old server; so the first answer that proves the route
missing switches that host to ``GET /api/v3/secrets/raw`` for as long as the operator runs, and
says so once in the log. Every identity on the host lists through v3 from then on.

What proves it is ``errors.RouteNotFound`` (the web framework's 404 for an endpoint it does not
have, told apart in ``wire.route_missing``). A data 404 (the service's own ``NotFound``, e.g. an
unknown folder) is an answer OF the v4 list and never switches; neither does a v3 route that is
missing too (then the host is not what we took it for, and nothing is remembered). Should a host
that was switched lose its v3 route later (upgraded while we ran), it is forgotten and v4 is asked
again.

A host is its API root (``https://host[/prefix]/api``): the same for every identity, token view
and connection pool pointing there.

One probe per host (single flight): while a host's route is unknown, the first list call probes it
and every other call to that host waits for that probe's outcome instead of sending its own v4
call (at start-up, 12 scopes on one old server used to send 12 v4 probes at once; against a rate
limit of 40 secret reads a minute that is a third of the budget spent on 404s). When the probe
taught the route, the waiters list through it. When it did not, what happens depends on why:
the host did not answer at all, or answered 429 (its limit is per client IP, so ours, not the
prober's) — the waiters fail with that error without calling, and the fetcher's per-scope backoff
brings them back; any other answer (a 5xx, neither route) may be about the prober's own request,
which another tenant's identity may have sent — each waiter then makes its own call (one at a time,
still one probe in flight), so one SecretSync's request never decides another's outcome. The error
a waiter inherits carries none of the prober's text (a Fastify 404 echoes the request's query,
which names the prober's project and path).
"""

from __future__ import annotations

import asyncio
import copy
import logging

from secretferry.service import client as service_client
from secretferry.service import errors, models, wire

logger = logging.getLogger(__name__)

V4 = wire.LIST_PATH_V4
V3 = wire.LIST_PATH_V3
V3_NOTE = f"listing via {V3} (the server has no v4 list)"
"""For an identity's status: why its host is listed differently from the documented API."""


class ListRoutes:
    """The list route of each host, and the fallback from v4 to v3 (see the module docstring)."""

    def __init__(self) -> None:
        self._known: dict[str, str] = {}
        # Host → the running probe's outcome: None once it answered (or was cancelled), else its error.
        self._probes: dict[str, asyncio.Future[errors.ServiceError | None]] = {}

    def known(self, api_root: str) -> str | None:
        """The list path used on ``api_root`` once an answer from there showed it; ``None`` before."""
        return self._known.get(api_root)

    def path_for(self, api_root: str) -> str:
        """The list path the next call to ``api_root`` goes to (v4 until shown otherwise)."""
        return self._known.get(api_root, V4)

    async def list(
        self, client: service_client.ServiceClient, query: models.ListSecretsQuery, *, etag: str | None
    ) -> models.SecretList | models.NotModified:
        """List ``query`` through the host's route; on a host shown to lack v4, through v3."""
        host = client.api_root
        while host not in self._known:
            probe = self._probes.get(host)
            if probe is None:
                return await self._probe(host, client, query, etag=etag)
            failed = await asyncio.shield(probe)
            if host not in self._known and failed is not None and _shared(failed):
                raise _inherited(host, failed)
            # Learned, or nothing that holds for this call too: the next loop probes (or lists).
        if self._known.get(host) == V3:
            try:
                return await client.list_secrets_v3(query, etag=etag)
            except errors.RouteNotFound:
                # Upgraded past v3 while we ran: back to v4 from the next call (after its backoff).
                if self._known.pop(host, None) is not None:
                    logger.info("the service at %s has no v3 list any more; trying GET %s again", host, V4)
                raise
        return await self._v4_then_v3(host, client, query, etag=etag)

    async def _probe(
        self,
        host: str,
        client: service_client.ServiceClient,
        query: models.ListSecretsQuery,
        *,
        etag: str | None,
    ) -> models.SecretList | models.NotModified:
        """The one call that finds out the route of ``host`` while the others wait (module docstring)."""
        probe: asyncio.Future[errors.ServiceError | None] = asyncio.get_running_loop().create_future()
        self._probes[host] = probe
        failed: errors.ServiceError | None = None
        try:
            return await self._v4_then_v3(host, client, query, etag=etag)
        except errors.ServiceError as exc:
            failed = exc
            raise
        finally:
            self._probes.pop(host, None)
            probe.set_result(failed)

    async def _v4_then_v3(
        self,
        host: str,
        client: service_client.ServiceClient,
        query: models.ListSecretsQuery,
        *,
        etag: str | None,
    ) -> models.SecretList | models.NotModified:
        try:
            answer = await client.list_secrets(query, etag=etag)
        except errors.RouteNotFound:
            pass
        except errors.ServiceError as exc:
            self._answered(host, V4, exc)
            raise
        else:
            self._answered(host, V4)
            return answer
        try:
            # No ETag: one from the v4 list (a server downgraded under us) names another answer.
            answer = await client.list_secrets_v3(query)
        except errors.ServiceError as exc:
            self._answered(host, V3, exc)
            raise
        self._answered(host, V3)
        return answer

    def _answered(self, host: str, path: str, error: errors.ServiceError | None = None) -> None:
        """``path`` answered on ``host``: an error shows the route exists unless it says the
        route is missing, or nobody answered (``Unavailable``: it shows nothing either way)."""
        if isinstance(error, errors.RouteNotFound | errors.Unavailable):
            return
        previous = self._known.get(host)
        if path == V4:
            self._known.setdefault(host, V4)  # a concurrent call may have switched it already
            return
        self._known[host] = V3
        if previous != V3:
            logger.warning(
                "the service at %s has no v4 list (GET %s: route not found); listing through GET %s "
                "for every identity on it",
                host,
                V4,
                V3,
            )


def _shared(failed: errors.ServiceError) -> bool:
    """Whether the probe's failure holds for every call to the host: nobody answered, or a 429
    (per client IP). A status code means an answer, which may be about the prober's request."""
    if isinstance(failed, errors.RateLimited):
        return True
    return isinstance(failed, errors.Unavailable) and failed.status_code is None


def _inherited(host: str, failed: errors.ServiceError) -> errors.ServiceError:
    """The probe's error for a call that waited on it: same class and retry hint, none of its text."""
    waiter = copy.copy(failed).with_traceback(None)  # keeps the class and its fields (retry_after)
    message = f"GET {V4} at {host}: {type(failed).__name__} while probing the host's list route"
    errors.ServiceError.__init__(waiter, message, status_code=failed.status_code)
    return waiter

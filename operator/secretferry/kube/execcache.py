"""An exec credential plugin's credential, kept until it expires and renewed after a 401.

Why cached: a plugin is a process start and often a network call (``aws eks get-token`` signs a
request, ``gke-gcloud-auth-plugin`` may refresh an OAuth token); ``kubectl secretferry status -A``
pages through thousands of objects and must not run it per request. client-go keeps the
credential until ``status.expirationTimestamp`` (or for ever without one) and runs the plugin
again when it has passed or when the apiserver answers 401 to it; so do we
(:class:`ExecCredentials`). Unlike client-go, :class:`secretferry.kube.client.Kube` also sends the
refused request once more with the new credential, so a token that expired in flight costs the
user nothing.

Concurrent requests share one run: the first that finds the credential stale runs the plugin
under a lock, the others wait for its result. After a 401 the plugin is run again only if the
refused credential is still the current one (another request may have renewed it already).

A credential holding a client certificate becomes its own TLS context (the kubeconfig's trust
plus that certificate), sent per request: aiohttp keys pooled connections by TLS context, so a
renewed certificate never rides on a connection made with the old one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from secretferry.kube import access, errors, execplugin, incluster

log = logging.getLogger(__name__)

Runner = Callable[[execplugin.ExecPlugin], Awaitable[execplugin.ExecCredential]]


@dataclass(frozen=True, eq=False)
class Presented:
    """One credential as requests present it. Compared by identity: "is the refused one still
    the current one?" must not depend on the plugin printing a different token."""

    authorization: str | None = field(repr=False)  # "Bearer …", or None (certificate only)
    tls: ssl.SSLContext | None  # None: the session's own context (no client certificate)
    expires_at: datetime | None

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and now >= self.expires_at


class ExecCredentials:
    """The credential of one kubeconfig user's exec plugin. ``trust``: the kubeconfig's server
    and CA, which a client certificate from the plugin is combined with. ``clock`` and ``runner``
    are injected so tests can move time and count runs."""

    def __init__(
        self,
        plugin: execplugin.ExecPlugin,
        *,
        trust: access.Access,
        clock: incluster.Clock = incluster.utc_now,
        runner: Runner | None = None,
    ) -> None:
        self.plugin = plugin
        self._trust = trust
        self._clock = clock
        self._runner: Runner = runner or execplugin.run
        self._current: Presented | None = None
        self._lock = asyncio.Lock()
        self.runs = 0  # how often the plugin ran (tests, and --v style diagnostics)

    async def current(self) -> Presented:
        """The credential for the next request: the cached one until it expires, else a new run.
        A run's failure raises :class:`errors.CredentialPluginFailed` (nothing is cached)."""
        found = self._current
        if found is not None and not found.expired(self._clock()):
            return found
        async with self._lock:
            found = self._current
            if found is not None and not found.expired(self._clock()):
                return found  # another request ran the plugin while this one waited
            return await self._renew()

    async def rejected(self, used: Presented) -> Presented:
        """The apiserver answered 401 to ``used``: a new run, unless one already replaced it."""
        async with self._lock:
            if self._current is not used and self._current is not None:
                return self._current
            log.info("the apiserver refused the credential from %s: running it again", self.plugin.shown)
            return await self._renew()

    def bearer_token(self) -> str | None:
        """The cached token, if any (no run): ``Kube.bearer_token``'s answer."""
        found = self._current
        if found is None or found.authorization is None or not found.authorization.startswith("Bearer "):
            return None
        return found.authorization.removeprefix("Bearer ")

    async def _renew(self) -> Presented:
        self._current = None  # a failed run leaves nothing stale behind
        log.debug("running %s", self.plugin.shown)
        credential = await self._runner(self.plugin)
        self.runs += 1
        tls = None
        if credential.cert_pem is not None:
            with_certificate = dataclasses.replace(
                self._trust,
                cert_file=None,
                key_file=None,
                cert_pem=credential.cert_pem,
                key_pem=credential.key_pem,
            )
            try:
                tls = access.ssl_context(with_certificate)
            except errors.NotConfigured:
                raise errors.CredentialPluginFailed(
                    0,
                    "CredentialPluginFailed",
                    f"{self.plugin.shown} printed a client certificate or key that is not usable PEM",
                ) from None
        self._current = Presented(
            authorization=None if credential.token is None else f"Bearer {credential.token}",
            tls=tls,
            expires_at=credential.expires_at,
        )
        return self._current


__all__ = ["ExecCredentials", "Presented", "Runner"]

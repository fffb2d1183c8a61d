"""After an outage: when a service host answers again, what waited only for it retries now.

Without this, each scope, stream and SecretSync sleeps out its own backoff (full jitter up to
``backoff_max_seconds``) and the last of them converges a whole backoff period later.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from secretferry.reconcile import conditions, reasons, scheduler, state
from secretferry.reconcile import identities as ident_mod
from secretferry.service import fetcher as fetcher_mod
from secretferry.service import health as service_health
from secretferry.service import streams as streams_mod

log = logging.getLogger(__name__)


class Recovery:
    def __init__(
        self,
        *,
        identities: ident_mod.IdentityRegistry,
        syncs: Mapping[state.SyncKey, state.SyncEntry],
        scopes: state.ScopeIndex,
        fetcher: fetcher_mod.ScopeFetcher,
        streams: streams_mod.StreamManager,
        queue: scheduler.Scheduler[state.SyncKey],
    ) -> None:
        self._identities = identities
        self._syncs = syncs
        self._scopes = scopes
        self._fetcher = fetcher
        self._streams = streams
        self._queue = queue

    def host_recovered(self, host: service_health.HostHealth) -> None:
        """The service at ``host`` answers again: what waits only because it did not retries now.

        Woken are the streams that failed to connect, the scopes whose list call found nobody
        answering (their backoff is cut short, not reset: should the host fail again, the next
        delay is as long as before) and the SecretSyncs that reported ServiceUnavailable (or
        TLSVerifyFailed) before
        reaching a scope (a login, a slug lookup). A 429's retry-after still holds (``not_before``).
        Bounded: the SecretSyncs go to the backlog, which the worker pool drains ``workers`` at a
        time, the fetcher makes one call per scope, and each identity logs in at most once.
        """
        identity_keys = {
            ident_mod.key_str(e.key)
            for e in self._identities.entries()
            if e.session is not None and e.session.host_health is host
        }
        if not identity_keys:
            return
        streams = self._streams.retry_now(identity_keys)
        keys: set[state.SyncKey] = set()
        scopes = 0
        for scope, st in self._scopes.all().items():
            if scope.identity_key in identity_keys and self._fetcher.retry_now(
                scope, not_before=host.not_before
            ):
                scopes += 1
                keys |= st.keys
        for key, entry in self._syncs.items():
            if _waits_for_service(entry) and _identity_key_str(entry) in identity_keys:
                keys.add(key)
        for key in keys:
            self._queue.enqueue(key, live=False)
        log.info(
            "the service at %s answers again: %d SecretSyncs (%d scopes) and %d event streams retry now",
            host.name,
            len(keys),
            scopes,
            streams,
        )


def _waits_for_service(entry: state.SyncEntry) -> bool:
    """Whether the last reconcile failed because the service was unavailable (not rate limited);
    an egress proxy in the way counts: the host answering again means the proxy relays again."""
    cond = conditions.find(entry.status.get("conditions") or [], reasons.READY)
    return cond is not None and cond.get("status") == "False" and cond.get("reason") in _WAITING_REASONS


# TLSVerifyFailed: the server may now show a certificate that verifies (rotated).
_WAITING_REASONS = frozenset(
    {reasons.SERVICE_UNAVAILABLE, reasons.PROXY_REFUSED, reasons.PROXY_UNREACHABLE, reasons.TLS_VERIFY_FAILED}
)


def _identity_key_str(entry: state.SyncEntry) -> str:
    """The ``key_str`` of the identity a SecretSync names (from the kept body: no parse needed)."""
    ref = (entry.body.get("spec") or {}).get("identityRef") or {}
    kind, name = ref.get("kind", ident_mod.MACHINE), ref.get("name", "")
    return ident_mod.key_str((kind, entry.key[0] if kind == ident_mod.MACHINE else "", name))

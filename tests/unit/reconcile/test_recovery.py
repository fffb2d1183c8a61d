"""After an outage: when a host answers again, exactly what waited for it retries now.

No apiserver is involved; the service is an ``httpx.MockTransport`` that is down, and the work
queue records what was queued.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from reconcile_fakes import FakeKube, RecordingQueue

from secretferry import settings as settings_mod
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import reasons, recovery, state, streaming, tasks
from secretferry.service import auth, client, errors, fetcher, scopes

HOST = "http://127.0.0.1:9"


def _identity(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": 1},
        "spec": {"auth": {"accessToken": {"secretRef": {"name": "tok", "key": "token"}}}},
    }


def _sync(name: str, identity: str, *, reason: str | None) -> state.SyncEntry:
    status: dict[str, Any] = {}
    if reason is not None:
        ok = "True" if reason == reasons.SYNCED else "False"
        status = {"conditions": [{"type": reasons.READY, "status": ok, "reason": reason}]}
    body = {"spec": {"identityRef": {"kind": "MachineIdentity", "name": identity}}}
    return state.SyncEntry(key=("ns", name), uid=name, generation=1, body=body, status=status)


def _list_failing(request: httpx.Request) -> httpx.Response:
    return httpx.Response(503, json={"message": "down", "error": "ServiceUnavailable"})


@pytest.fixture
async def api() -> AsyncIterator[client.ServiceClient]:
    async with client.ServiceClient(HOST, transport=httpx.MockTransport(_list_failing)) as c:
        yield c


async def test_recovery_wakes_what_waited_for_that_host_only(
    api: client.ServiceClient,
) -> None:
    cfg = settings_mod.Settings(default_host_api=HOST)
    registry = ident_mod.IdentityRegistry(kube=FakeKube().port(), settings=cfg)
    syncs: dict[state.SyncKey, state.SyncEntry] = {}
    index = state.ScopeIndex(jitter_fraction=0)
    scope_fetcher = fetcher.ScopeFetcher(backoff_initial=1, backoff_max=60)
    queue = RecordingQueue()
    streams = streaming.Streaming(
        settings=cfg,
        identities=registry,
        scopes=index,
        fetcher=scope_fetcher,
        queue=queue.port(),
        background=tasks.Tasks(),
    ).manager
    wake = recovery.Recovery(
        identities=registry,
        syncs=syncs,
        scopes=index,
        fetcher=scope_fetcher,
        streams=streams,
        queue=queue.port(),
    )
    near = registry.upsert(ident_mod.MACHINE, _identity("near"))
    far = registry.upsert(ident_mod.MACHINE, _identity("far"))
    session = auth.AuthSession(api, auth.StaticTokenCredentials("t"))
    near.session = session
    async with client.ServiceClient("http://127.0.0.2:9") as other:
        far.session = auth.AuthSession(other, auth.StaticTokenCredentials("t"))

        down = scopes.Scope(ident_mod.key_str(near.key), "p", "dev", "/down")
        fine = scopes.Scope(ident_mod.key_str(near.key), "p", "dev", "/fine")
        elsewhere = scopes.Scope(ident_mod.key_str(far.key), "p", "dev", "/x")
        entries = [
            (_sync("on-down", "near", reason=reasons.SERVICE_UNAVAILABLE), down),
            (_sync("on-fine", "near", reason=reasons.SYNCED), fine),
            (_sync("login-failed", "near", reason=reasons.SERVICE_UNAVAILABLE), None),
            # The egress proxy was in the way: the host answering again means it relays again.
            (_sync("proxy-refused", "near", reason=reasons.PROXY_REFUSED), None),
            (_sync("proxy-down", "near", reason=reasons.PROXY_UNREACHABLE), None),
            # The server now shows a certificate that verifies (rotated): retried too.
            (_sync("tls-failed", "near", reason=reasons.TLS_VERIFY_FAILED), None),
            (_sync("rate-limited", "near", reason=reasons.RATE_LIMITED), None),
            (_sync("other-host", "far", reason=reasons.SERVICE_UNAVAILABLE), elsewhere),
        ]
        for entry, scope in entries:
            syncs[entry.key] = entry
            if scope is not None:
                index.bind(entry.key, [scope], instant=False, refresh_seconds=300, now=0)
        with pytest.raises(errors.Unavailable):
            await scope_fetcher.fetch(down, session)
        assert scope_fetcher.next_attempt_at(down) is not None

        wake.host_recovered(api.host_health)
        queued = {key[1] for key in queue.queued}

        retry_at = scope_fetcher.next_attempt_at(down)
        assert retry_at is not None and retry_at <= time.monotonic()  # the scope's backoff is over
        # The failed scope's SecretSyncs, and one that failed before reaching a scope; not the
        # healthy one, not a rate-limited one (its retry-after holds), not another host's; those
        # that an egress proxy stopped (ProxyRefused/ProxyUnreachable) as well.
        assert queued == {"on-down", "login-failed", "proxy-refused", "proxy-down", "tls-failed"}

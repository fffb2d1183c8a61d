"""Controller._host_recovered: when a host answers again, exactly what waited for it retries now.

No apiserver is involved: the controller is built with a stand-in for the Kubernetes client (the
constructor only stores it), its scheduler is never started, and what it queued is read back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import httpx
import pytest

from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.reconcile import controller as controller_mod
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import reasons, state
from secretferry.service import auth, client, errors, scopes

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
    api: client.ServiceClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctl = controller_mod.Controller(
        kube=cast(kube_client.Kube, object()),
        settings=settings_mod.Settings(default_host_api=HOST),
        hmac_key=b"k" * 32,
        instance="test",
    )
    near = ctl.identities.upsert(ident_mod.MACHINE, _identity("near"))
    far = ctl.identities.upsert(ident_mod.MACHINE, _identity("far"))
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
            (_sync("rate-limited", "near", reason=reasons.RATE_LIMITED), None),
            (_sync("other-host", "far", reason=reasons.SERVICE_UNAVAILABLE), elsewhere),
        ]
        for entry, scope in entries:
            ctl.syncs[entry.key] = entry
            if scope is not None:
                ctl.scopes.bind(entry.key, [scope], instant=False, refresh_seconds=300, now=0)
        with pytest.raises(errors.Unavailable):
            await ctl.fetcher.fetch(down, session)
        assert ctl.fetcher.next_attempt_at(down) is not None

        queued: set[str] = set()
        monkeypatch.setattr(ctl.queue, "enqueue", lambda key, *, live=True, first=False: queued.add(key[1]))
        ctl._host_recovered(api.host_health)

        retry_at = ctl.fetcher.next_attempt_at(down)
        assert retry_at is not None and retry_at <= ctl.clock()  # the scope's backoff is over
        # The failed scope's SecretSyncs, and one that failed before reaching a scope; not the
        # healthy one, not a rate-limited one (its retry-after holds), not another host's.
        assert queued == {"on-down", "login-failed"}

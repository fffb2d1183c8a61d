"""What the event streams' news means for the SecretSyncs: which resyncs are live work.

No service: the stream manager is built but never opens a stream; the work queue records.
"""

from __future__ import annotations

import pytest
from reconcile_fakes import FakeKube, RecordingQueue

from secretferry import settings as settings_mod
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import reasons, state, streaming, tasks
from secretferry.service import fetcher, scopes
from secretferry.service import streams as streams_mod


def _streaming(index: state.ScopeIndex, queue: RecordingQueue) -> streaming.Streaming:
    cfg = settings_mod.Settings()
    return streaming.Streaming(
        settings=cfg,
        identities=ident_mod.IdentityRegistry(kube=FakeKube().port(), settings=cfg),
        scopes=index,
        fetcher=fetcher.ScopeFetcher(backoff_initial=1, backoff_max=1),
        queue=queue.port(),
        background=tasks.Tasks(),
        clock=lambda: 42.0,
    )


@pytest.mark.parametrize(
    ("reason", "live"),
    [
        (streams_mod.RESYNC_EVENT, True),
        (streams_mod.RESYNC_UNKNOWN, True),
        (streams_mod.RESYNC_RECONNECT, False),
    ],
)
async def test_an_event_resync_is_live_work_and_a_reconnect_resync_waits_in_the_backlog(
    reason: str, live: bool
) -> None:
    index, queue = state.ScopeIndex(jitter_fraction=0), RecordingQueue()
    scope = scopes.Scope("MachineIdentity/ns/id", "p", "dev", "/")
    index.bind(("ns", "app"), [scope], instant=True, refresh_seconds=300, now=0)

    _streaming(index, queue).on_resync({scope}, reason)

    assert queue.queued == {("ns", "app"): live}
    found = index.get(scope)
    assert found is not None and found.fresh_after == 42.0  # what was fetched before is stale


async def test_a_scope_falling_back_to_polling_is_due_sooner_and_its_secretsyncs_report_it() -> None:
    index, queue = state.ScopeIndex(jitter_fraction=0), RecordingQueue()
    scope = scopes.Scope("MachineIdentity/ns/id", "p", "dev", "/")
    index.bind(("ns", "app"), [scope], instant=True, refresh_seconds=300, now=0)
    wiring = _streaming(index, queue)

    wiring.on_mode(scope, reasons.POLLING, "stream refused")
    found = index.get(scope)
    assert found is not None and (found.mode, found.mode_reason) == (reasons.POLLING, "stream refused")
    assert queue.queued == {("ns", "app"): False}

    queue.queued.clear()
    wiring.on_mode(scope, reasons.POLLING, "stream refused")  # no news: nothing queued
    assert queue.queued == {}

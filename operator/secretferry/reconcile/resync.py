"""The periodic resync: every tick, queue the SecretSyncs of each scope that is due; keep gauges.

SecretSyncs without scopes (identity missing, invalid spec) are not here: backoff retries them,
or the watch event that fixes them brings them back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from secretferry import metrics
from secretferry import settings as settings_mod
from secretferry.reconcile import conditions, reasons, scheduler, state
from secretferry.service import streams as streams_mod

# Granularity of the periodic resync: intervals are minutes, jitter covers the rest.
_TICK_SECONDS = 1.0
# A pass over every SecretSync for the readiness gauge: every 10 ticks (10 s) is plenty.
_GAUGE_EVERY_TICKS = 10


class Resync:
    def __init__(
        self,
        *,
        settings: settings_mod.Settings,
        syncs: Mapping[state.SyncKey, state.SyncEntry],
        scopes: state.ScopeIndex,
        streams: streams_mod.StreamManager,
        queue: scheduler.Scheduler[state.SyncKey],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._syncs = syncs
        self._scopes = scopes
        self._streams = streams
        self._queue = queue
        self._clock = clock
        self._reconnects_seen = 0

    async def loop(self) -> None:
        ticks = 0
        while True:
            await asyncio.sleep(_TICK_SECONDS)
            ticks += 1
            now = self._clock()
            for scope in self._scopes.due(
                now, streaming_seconds=self._settings.streaming_refresh_interval_seconds
            ):
                for key in self._scopes.keys_of(scope):
                    self._queue.enqueue(key, live=False)
            metrics.ACTIVE_SCOPES.set(len(self._scopes.all()))
            reconnects = self._streams.stats.reconnects
            metrics.STREAM_RECONNECTS.inc(reconnects - self._reconnects_seen)
            self._reconnects_seen = reconnects
            if ticks % _GAUGE_EVERY_TICKS == 0:
                # SecretSyncs only: a ClusterSecretSync's namespaces have a gauge of their own.
                own = [e for e in self._syncs.values() if e.origin is None]
                ready = sum(1 for e in own if _is_ready(e.status))
                metrics.RESOURCES.labels(ready="true").set(ready)
                metrics.RESOURCES.labels(ready="false").set(len(own) - ready)


def _is_ready(status: Mapping[str, Any]) -> bool:
    cond = conditions.find(status.get("conditions") or [], reasons.READY)
    return cond is not None and cond.get("status") == "True"

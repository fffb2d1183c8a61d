"""Templates that ran into a CPU, memory or time limit are not rendered again for a while.

Why: a bomb costs its whole CPU budget (a second of a core, by default) every time it renders,
and it renders again whenever a secret it reads changes. A bomb reading a busy scope would keep
a core busy for as long as it exists, slowing every process on the node. So the same templates
of the same namespace get the same answer without rendering until their backoff is over: 10 s,
doubling up to 5 minutes, whatever the secret values. Editing the template lifts it at once
(other text, another entry); a render that succeeds forgets it.

Keyed by an HMAC of (namespace, template sources) under a per-process key: template sources are
spec, not secrets, but nothing here needs them readable.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from secretferry import backoff
from secretferry.reconcile.rendering import templating

# Long enough that a bomb reading a scope that changes every second renders about once in ten
# changes at first; 5 minutes is the default refresh interval, the longest anyone waits anyway.
INITIAL_SECONDS: Final = 10.0
MAX_SECONDS: Final = 300.0
# Limits whose hit costs a worker's full budget (the cheap ones fail in microseconds).
COSTLY_LIMITS: Final = frozenset({"cpu", "memory", "timeout"})
# Entries kept (~200 bytes each); beyond it the least recently hit one is dropped.
_REMEMBERED: Final = 1024


@dataclass
class _Entry:
    error: templating.TemplateRenderError
    retry: backoff.Backoff


class Quarantine:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._key = os.urandom(32)
        self._entries: collections.OrderedDict[bytes, _Entry] = collections.OrderedDict()

    def key(self, tenant: str, templates: Mapping[str, str]) -> bytes:
        text = json.dumps([tenant, list(templates.items())], ensure_ascii=False)
        return hmac.new(self._key, text.encode(), hashlib.sha256).digest()

    def held(self, key: bytes) -> templating.TemplateRenderError | None:
        """The remembered failure while the backoff runs, else None (render it)."""
        entry = self._entries.get(key)
        if entry is None or entry.retry.ready():
            return None
        failure = entry.error
        return templating.TemplateRenderError(failure.key, failure.message, limit=failure.limit)

    def record(self, key: bytes, failure: templating.TemplateRenderError | None) -> None:
        """After a render: a costly limit hit starts (or lengthens) the wait; success ends it."""
        if failure is None or failure.limit not in COSTLY_LIMITS:
            self._entries.pop(key, None)
            return
        entry = self._entries.get(key)
        if entry is None:
            # No jitter: this spaces out one template's renders, it does not spread a crowd.
            retry = backoff.Backoff(INITIAL_SECONDS, MAX_SECONDS, jitter=backoff.NO_JITTER, clock=self._clock)
            entry = self._entries[key] = _Entry(failure, retry)
        entry.error = failure
        entry.retry.next_delay()
        self._entries.move_to_end(key)
        while len(self._entries) > _REMEMBERED:
            self._entries.popitem(last=False)

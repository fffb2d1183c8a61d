"""In-memory indexes the controller keeps: SecretSyncs by key, scopes by SecretSync, targets.

Why in memory: every decision ("does this Secret need a write?", "which SecretSyncs does this
event touch?") must be O(1) at 10,000 objects; the apiserver and the service are asked only when
the answer may have changed. All of it is rebuilt from LIST+WATCH after a restart.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pydantic

from secretferry import backoff
from secretferry.models import base as models_base
from secretferry.models import errors as model_errors
from secretferry.models import labels
from secretferry.models import secretsync as sync_models
from secretferry.reconcile import desired, reasons, slim
from secretferry.service import scopes as scope_mod

SyncKey = tuple[str, str]  # (namespace, name)
TargetKey = tuple[str, str, str]  # (kind, namespace, name)
FORCE_SYNC_ANNOTATION = labels.FORCE_SYNC_ANNOTATION
# Only a fallback: ``bind`` records every key's interval before the key joins a scope.
_DEFAULT_REFRESH_SECONDS = models_base.parse_duration(sync_models.DEFAULT_REFRESH_INTERVAL)


# "/" cannot occur in an object name: a key of an expanded ClusterSecretSync never equals a
# SecretSync's, in the same dict, queue and scope index (one fetch per scope for both kinds).
_CLUSTER_KEY_PREFIX = "ClusterSecretSync/"


def cluster_key(namespace: str, name: str) -> SyncKey:
    """The key of ClusterSecretSync ``name``'s entry for ``namespace``."""
    return (namespace, _CLUSTER_KEY_PREFIX + name)


def cluster_name(key: SyncKey) -> str | None:
    """The ClusterSecretSync a key belongs to, or None for a SecretSync's key."""
    return key[1][len(_CLUSTER_KEY_PREFIX) :] if key[1].startswith(_CLUSTER_KEY_PREFIX) else None


@dataclass
class SyncEntry:
    key: SyncKey
    uid: str
    generation: int | None
    body: Mapping[str, Any]
    """The object as ``slim.sync_body`` keeps it; parsed at each reconcile, never kept parsed:
    a pydantic model costs ~5 KB per object, and parsing takes ~20 µs. Not parsing in the intake
    also keeps a new SecretSync from waiting behind 10,000 parses at start-up."""
    status: dict[str, Any]
    """The status as last read or written: the baseline for "does status need a patch?"."""
    model: sync_models.SecretSync | None = None
    """Set only while a reconcile runs."""
    invalid: str | None = None
    """Why the spec does not parse, as of the last reconcile."""
    force_annotation: str | None = None
    force_pending: bool = False
    scopes: tuple[scope_mod.Scope, ...] = ()
    retry: backoff.Backoff | None = None
    """The backoff of a failing SecretSync; None while it succeeds (most never need one)."""
    origin: desired.ClusterOrigin | None = None
    """Set on an entry expanded from a ClusterSecretSync (cluster_syncs.py): ``body`` is then a
    SecretSync that exists only in memory, its key is ``cluster_key``, its status is kept here
    only (``sync_report`` hands it to ``Deps.on_cluster_report`` instead of patching it)."""

    def parse(self) -> None:
        """Parse ``body`` into ``model`` for one pass (or say in ``invalid`` why it does not parse)."""
        try:
            self.model, self.invalid = sync_models.SecretSync.from_body(self.body), None
        except pydantic.ValidationError as exc:
            self.model, self.invalid = None, model_errors.describe_validation_error(exc)


@dataclass
class ScopeState:
    keys: set[SyncKey] = field(default_factory=set)
    fresh_after: float = 0.0
    """A fetch older than this is stale: set by events, reconnects and the resync loop."""
    next_due: float = 0.0
    mode: str = ""
    """Streaming or Polling once the stream manager has decided; empty until then, so that
    status does not flap Polling → Streaming for every SecretSync during start-up."""
    mode_reason: str = ""
    streamed: bool = False
    """Whether any SecretSync on this scope wants instant updates."""
    last_list_at: datetime | None = None
    """When a list call of this scope last ended (time of day), for the identity's status."""
    last_list_result: str = ""
    """How it ended (identity_summary.list_result): Changed, Unchanged, NotModified or the error."""


class ScopeIndex:
    """Which SecretSyncs read which scopes, and when each scope is next due for a resync."""

    def __init__(self, *, jitter_fraction: float, rng: random.Random | None = None) -> None:
        self._scopes: dict[scope_mod.Scope, ScopeState] = {}
        self._by_key: dict[SyncKey, tuple[scope_mod.Scope, ...]] = {}
        self._intervals: dict[SyncKey, float] = {}
        self._instant: dict[SyncKey, bool] = {}
        self._jitter = jitter_fraction
        self._rng = rng or random.Random()

    def bind(
        self,
        key: SyncKey,
        scopes: Iterable[scope_mod.Scope],
        *,
        instant: bool,
        refresh_seconds: float,
        now: float,
    ) -> tuple[set[scope_mod.Scope], set[scope_mod.Scope]]:
        """Point ``key`` at ``scopes``; returns (added, removed) at the index level: scopes that are
        new or whose wish for a stream changed, and scopes nobody reads any more."""
        new = tuple(dict.fromkeys(scopes))
        old = self._by_key.get(key, ())
        shorter = refresh_seconds < self._intervals.get(key, float("inf"))
        self._intervals[key] = refresh_seconds
        self._instant[key] = instant
        added: set[scope_mod.Scope] = set()
        removed: set[scope_mod.Scope] = set()
        for scope in set(old) - set(new):
            state = self._scopes[scope]
            state.keys.discard(key)
            if not state.keys:
                del self._scopes[scope]
                removed.add(scope)
            else:
                state.streamed = any(self._instant.get(k, False) for k in state.keys)
        for scope in new:
            found = self._scopes.get(scope)
            if found is None:
                found = self._scopes[scope] = ScopeState(next_due=now + self._jittered(refresh_seconds))
                added.add(scope)
            found.keys.add(key)
            streamed = any(self._instant.get(k, False) for k in found.keys)
            left_stream = False
            if streamed != found.streamed:
                found.streamed = streamed
                added.add(scope)  # whether it wants a stream changed: the stream plan must follow
                if not streamed:
                    found.mode, found.mode_reason = "", ""  # off the stream: polling from now on
                    left_stream = True
            if shorter or left_stream:
                # A shorter refreshInterval (or leaving the stream's relaxed period) takes effect
                # now, not after the longer period already scheduled.
                found.next_due = min(found.next_due, now + self._jittered(refresh_seconds))
        self._by_key[key] = new
        return added, removed

    def unbind(self, key: SyncKey) -> set[scope_mod.Scope]:
        removed: set[scope_mod.Scope] = set()
        for scope in self._by_key.pop(key, ()):
            state = self._scopes.get(scope)
            if state is None:
                continue
            state.keys.discard(key)
            if not state.keys:
                del self._scopes[scope]
                removed.add(scope)
            else:
                state.streamed = any(self._instant.get(k, False) for k in state.keys)
        self._intervals.pop(key, None)
        self._instant.pop(key, None)
        return removed

    def get(self, scope: scope_mod.Scope) -> ScopeState | None:
        return self._scopes.get(scope)

    def keys_of(self, scope: scope_mod.Scope) -> set[SyncKey]:
        state = self._scopes.get(scope)
        return set(state.keys) if state else set()

    def scopes_of(self, key: SyncKey) -> tuple[scope_mod.Scope, ...]:
        return self._by_key.get(key, ())

    def all(self) -> Mapping[scope_mod.Scope, ScopeState]:
        return self._scopes

    def streamed_by_project(self) -> dict[tuple[str, str], set[scope_mod.Scope]]:
        """Scopes that want a stream, grouped by (identity, project): one stream group each."""
        groups: dict[tuple[str, str], set[scope_mod.Scope]] = defaultdict(set)
        for scope, state in self._scopes.items():
            if state.streamed:
                groups[(scope.identity_key, scope.project_id)].add(scope)
        return groups

    def interval(self, scope: scope_mod.Scope, *, streaming_seconds: float) -> float:
        """Resync period: relaxed while the scope's stream is healthy, else the shortest asked for."""
        state = self._scopes[scope]
        polling = min(
            (self._intervals.get(k, _DEFAULT_REFRESH_SECONDS) for k in state.keys),
            default=_DEFAULT_REFRESH_SECONDS,
        )
        if state.streamed and state.mode == reasons.STREAMING:
            return max(polling, streaming_seconds)
        return polling

    def due(self, now: float, *, streaming_seconds: float) -> list[scope_mod.Scope]:
        """Scopes whose resync is due; their next due time moves on (with jitter)."""
        due: list[scope_mod.Scope] = []
        for scope, state in self._scopes.items():
            if state.next_due <= now:
                due.append(scope)
                state.fresh_after = now
                state.next_due = now + self._jittered(
                    self.interval(scope, streaming_seconds=streaming_seconds)
                )
        return due

    def _jittered(self, seconds: float) -> float:
        return seconds * (1.0 + self._rng.uniform(-self._jitter, self._jitter))


class TargetCache:
    """Managed Secrets/ConfigMaps as the watch last saw them, who owns each, and what we wrote last.

    Kept behind methods named for each job (the watch, the writes, the repair), so that the
    bookkeeping of owners and of writes in flight stays consistent in one place.
    """

    def __init__(self) -> None:
        self._objects: dict[TargetKey, dict[str, Any]] = {}
        self._owners: dict[TargetKey, SyncKey] = {}
        self._owned: dict[SyncKey, set[TargetKey]] = {}
        """The reverse of ``_owners``: deleting 10,000 SecretSyncs must not scan all targets each time."""
        self._written_versions: dict[TargetKey, str] = {}
        self._expected: dict[TargetKey, int] = {}
        """Fingerprint of the data a write in flight will leave (process-internal, never shown)."""

    # --- what the watch saw -------------------------------------------------------------------
    def remember(self, key: TargetKey, obj: Mapping[str, Any]) -> None:
        """Cache the parts of an object the drift checks read (``slim.target``): at 10,000 Secrets
        the rest (``managedFields`` above all) is tens of MiB."""
        self._objects[key] = slim.target(obj)

    def forget(self, key: TargetKey) -> None:
        """The object is gone (a watch DELETED event)."""
        self._objects.pop(key, None)

    def forget_unseen(self, kind: str, *, namespace: str | None, seen: set[TargetKey]) -> list[TargetKey]:
        """After a full listing of ``kind`` (in ``namespace``, or everywhere when None): drop the
        cached objects the listing did not show, and return their keys."""
        gone = [
            k
            for k in self._objects
            if k[0] == kind and k not in seen and (namespace is None or k[1] == namespace)
        ]
        for key in gone:
            del self._objects[key]
        return gone

    def last_seen(self, key: TargetKey) -> dict[str, Any] | None:
        """The object as the watch last saw it (slimmed), or None when it is not known to exist."""
        return self._objects.get(key)

    def count(self) -> int:
        """How many managed objects are cached."""
        return len(self._objects)

    # --- ownership ------------------------------------------------------------------------------
    def own(self, target: TargetKey, owner: SyncKey) -> None:
        previous = self._owners.get(target)
        if previous == owner:
            return
        if previous is not None:
            self._owned.get(previous, set()).discard(target)
        self._owners[target] = owner
        self._owned.setdefault(owner, set()).add(target)

    def release(self, owner: SyncKey) -> None:
        for target in self._owned.pop(owner, set()):
            if self._owners.get(target) == owner:
                del self._owners[target]

    def owner_of(self, target: TargetKey) -> SyncKey | None:
        return self._owners.get(target)

    # --- our writes and their echoes -----------------------------------------------------------
    def expect(self, key: TargetKey, manifest: Mapping[str, Any]) -> None:
        """A write of ``manifest`` is about to be sent: its watch echo is not drift."""
        self._expected[key] = fingerprint(manifest)

    def write_failed(self, key: TargetKey) -> None:
        """The write announced by ``expect`` did not happen: expect no echo of it."""
        self._expected.pop(key, None)

    def written(self, key: TargetKey, result: Mapping[str, Any], *, cache: bool) -> None:
        """Remember what a write left (``result``: the object the apiserver returned), so that its
        watch echo is not mistaken for drift; ``cache`` also keeps it as the object last seen."""
        version = (result.get("metadata") or {}).get("resourceVersion")
        if version:
            self._written_versions[key] = str(version)
        self._expected.pop(key, None)
        if cache:
            self.remember(key, result)

    def is_echo(self, key: TargetKey, obj: Mapping[str, Any]) -> bool:
        """A watch event of our own write: nothing to repair. Matched by resourceVersion once the
        write has returned, and by the data written while it is still in flight (the watch event
        often arrives first)."""
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version is not None and self._written_versions.get(key) == version:
            return True
        expected = self._expected.get(key)
        return expected is not None and expected == fingerprint(obj)


def fingerprint(obj: Mapping[str, Any]) -> int:
    """Of an object's ``data`` and (a ConfigMap's) ``binaryData``, as written or read back."""
    data: Mapping[str, str] = obj.get("data") or {}
    binary_data: Mapping[str, str] = obj.get("binaryData") or {}
    return hash((frozenset(data.items()), frozenset(binary_data.items())))

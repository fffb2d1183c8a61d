"""An identity's status.streams and status.scopes: which event streams it holds and which scopes it
lists, and when each was last listed, so that ``kubectl secretferry why`` can show them with the
user's own RBAC (the metrics say it too, but only to whoever may scrape the operator).

Cheap by construction, at 10,000 SecretSyncs:

- a list call only records its time and result on the scope's in-memory state (``list_called``,
  the fetcher's ``on_call`` hook): no write, no allocation beyond two attributes;
- a stream records its state and its last event in the stream manager (``StreamManager.summaries``);
- ``run`` wakes every ``identity_summary_interval_seconds`` (30 s), builds each identity's summary
  from those (one pass over the scope index) and patches the identity's status only when the
  summary differs from what it last wrote. So an identity costs at most one status write per
  interval however many lists it makes, and none while nothing changes;
- bounded: at most ``identity_summary_max_scopes`` scopes (50; failing ones first, then in a fixed
  order, so the list does not churn) with the rest counted in ``scopesOmitted``, and at most 50
  streams: a status stays a few KiB.

What it shows, and to whom (README, "Identity status"). A scope entry names a project (id, and
the slug a SecretSync named it by), an environment and a folder path; never a secret's name or
value, never a namespace or a SecretSync. A MachineIdentity is used only by SecretSyncs of its
own namespace (identityRef is looked up there, and the scope key carries the identity's
namespace), so its status shows only paths that namespace's own SecretSyncs name, to readers of
that namespace: nothing they could not read in those SecretSyncs' specs. A ClusterMachineIdentity
serves many namespaces, and its status shows the paths all of them read, without saying which
namespace reads which; the kind is cluster-scoped and aggregated into no namespace role (chart
``rbac-aggregated.yaml``), so only a cluster admin, or whoever an admin grants it to, reads it. An
admin who grants read on ClusterMachineIdentities to people who should not see other namespaces'
paths sets ``identity_summary_max_scopes`` to 0: the counts and streams stay, the paths go.

Scopes of SecretSyncs with refreshPolicy OnChange or CreatedOnce are held by no index (refresh.py),
so they are not listed here.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, cast

from secretferry import metrics
from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import status as kube_status
from secretferry.models import base as models_base
from secretferry.models import identity as identity_models
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import state
from secretferry.service import scopes as scope_mod
from secretferry.service import streams as streams_mod

log = logging.getLogger(__name__)

# The fetcher's outcomes (``ScopeFetcher`` ``on_call``) as status shows them; any other outcome
# is an error's class name, shown as it is.
_RESULTS: Final = {"changed": "Changed", "unchanged": "Unchanged", "not_modified": "NotModified"}
_OK: Final = frozenset(_RESULTS.values())
_MESSAGE_MAX: Final = 1024  # IdentityStreamStatus.message's bound
_RESULT_MAX: Final = 128  # IdentityScopeStatus.lastListResult's bound

Summary = dict[str, Any]
"""The status fragment of one identity: streamsOpen, streams, scopeCount, scopes, scopesOmitted."""


def list_result(outcome: str) -> str:
    """A fetcher outcome as status shows it: Changed, Unchanged, NotModified, or the error class."""
    return _RESULTS.get(outcome, outcome)[:_RESULT_MAX]


def _filtered(scope: scope_mod.Scope) -> bool:
    return bool(scope.tag_slugs or scope.metadata_filter) or not (
        scope.include_imports and scope.expand_references
    )


def _scope_order(item: tuple[scope_mod.Scope, state.ScopeState]) -> tuple[Any, ...]:
    """Failing scopes first (what a user debugs), then a fixed order: the list churns only when a
    scope starts or stops failing, is added or removed."""
    scope, st = item
    failing = bool(st.last_list_result) and st.last_list_result not in _OK
    return (
        not failing,
        scope.project_id,
        scope.environment,
        scope.path,
        scope.recursive,
        scope.tag_slugs,
        scope.metadata_filter,
        scope.include_imports,
        scope.expand_references,
    )


def build(
    scopes: Iterable[tuple[scope_mod.Scope, state.ScopeState]],
    streams: Sequence[streams_mod.StreamSummary],
    *,
    slugs: Mapping[tuple[str, str], str],
    max_scopes: int,
) -> Summary:
    """One identity's summary, as the JSON its status patch carries (pure: table-tested)."""
    ordered = sorted(scopes, key=_scope_order)
    shown = ordered[:max_scopes]
    stream_items = sorted(streams, key=lambda s: s.project_id)[: identity_models.MAX_STATUS_STREAMS]
    status = identity_models.MachineIdentityStatus(
        streams_open=sum(s.state == streams_mod.OPEN for s in streams),
        streams=[
            identity_models.IdentityStreamStatus(
                project_id=s.project_id,
                state=cast(identity_models.StreamState, s.state),  # one of streams_mod's four
                message=s.message[:_MESSAGE_MAX],
                since=s.since,
                last_event_time=s.last_event_at,
                scopes=s.scopes,
            )
            for s in stream_items
        ],
        scope_count=len(ordered),
        scopes=[
            identity_models.IdentityScopeStatus(
                project_id=scope.project_id,
                project_slug=slugs.get((scope.identity_key, scope.project_id)),
                environment=scope.environment,
                path=scope.path,
                recursive=scope.recursive,
                filtered=_filtered(scope),
                last_list_time=st.last_list_at,
                last_list_result=st.last_list_result,
                secret_syncs=len(st.keys),
            )
            for scope, st in shown
        ],
        scopes_omitted=len(ordered) - len(shown),
    )
    fragment = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    fragment.pop("conditions", None)  # the login check's (identity_status), never this writer's
    return fragment


class IdentitySummary:
    """Records lists as they happen; writes each identity's summary at most once per interval."""

    def __init__(
        self,
        *,
        kube: kube_client.Kube,
        settings: settings_mod.Settings,
        identities: ident_mod.IdentityRegistry,
        scopes: state.ScopeIndex,
        streams: Callable[[], streams_mod.StreamManager],
        slugs: scope_mod.SlugCache,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """``streams``: the stream manager, asked at each tick (it is built after the fetcher whose
        hook ``list_called`` is)."""
        self._kube = kube
        self._interval = settings.identity_summary_interval_seconds
        self._max_scopes = settings.identity_summary_max_scopes
        self._identities = identities
        self._scopes = scopes
        self._streams = streams
        self._slugs = slugs
        self._wall = wall
        self._written: dict[ident_mod.IdentityKey, tuple[str, Summary]] = {}
        """(uid, summary) as last written per identity: a recreated identity (new uid) is written."""

    def list_called(self, scope: scope_mod.Scope, outcome: str, endpoint: str) -> None:
        """The fetcher's ``on_call`` hook: count it (metrics) and note it on the scope. No write."""
        metrics.count_list_call(scope, outcome, endpoint)
        st = self._scopes.get(scope)
        if st is not None:
            st.last_list_at = self._wall()
            st.last_list_result = list_result(outcome)

    async def run(self) -> None:
        """Forever, while leading: a tick every interval (the task is cancelled on step-down)."""
        # Another leader may have written meanwhile: what this replica wrote before says nothing.
        self._written.clear()
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug here must not stop the summaries for good
                log.exception("identity summaries not written")

    async def tick(self) -> int:
        """Write every identity's summary that changed since it was last written; returns how many."""
        by_identity: dict[str, list[tuple[scope_mod.Scope, state.ScopeState]]] = defaultdict(list)
        for scope, st in self._scopes.all().items():
            by_identity[scope.identity_key].append((scope, st))
        streams = self._streams().summaries()
        slugs = self._slugs.known_slugs()
        present: set[ident_mod.IdentityKey] = set()
        writes = 0
        for entry in self._identities.entries():
            present.add(entry.key)
            key = ident_mod.key_str(entry.key)
            summary = build(
                by_identity.get(key, ()), streams.get(key, ()), slugs=slugs, max_scopes=self._max_scopes
            )
            if self._written.get(entry.key) == (entry.uid, summary):
                continue
            if await self._patch(entry, summary):
                self._written[entry.key] = (entry.uid, summary)
                writes += 1
        for gone in set(self._written) - present:
            del self._written[gone]
        return writes

    async def _patch(self, entry: ident_mod.IdentityEntry, summary: Summary) -> bool:
        kind, namespace, name = entry.key
        try:
            await kube_status.patch_status(
                self._kube,
                group=models_base.GROUP,
                version=models_base.VERSION,
                plural=ident_mod.PLURALS[kind],
                namespace=namespace or None,
                name=name,
                status=summary,
            )
        except kube_errors.NotFound:
            return False  # deleted meanwhile: its DELETED event drops the entry
        except kube_errors.KubeError as exc:
            log.warning("stream and scope summary of %s not written: %s", ident_mod.key_str(entry.key), exc)
            return False
        metrics.IDENTITY_SUMMARY_WRITES.inc()
        return True

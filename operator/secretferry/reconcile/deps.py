"""What one reconcile pass needs, handed over in one bag by the composition root (controller.py).

Why a bag and not globals: the pass (sync.py), its writes (target_writes.py) and its status report
(sync_report.py) are plain functions, testable with a fake Kube and a fake service session put in
here; the controller builds the one real instance and keeps it for the life of the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import problems, rollouts, state
from secretferry.reconcile.generators import intake as generator_intake
from secretferry.reconcile.rendering import template_sources
from secretferry.service import fetcher as fetcher_mod
from secretferry.service import scopes as scope_mod


@dataclass
class Deps:
    kube: kube_client.Kube
    settings: settings_mod.Settings
    hmac_key: bytes
    identities: ident_mod.IdentityRegistry
    fetcher: fetcher_mod.ScopeFetcher
    slugs: scope_mod.SlugCache
    scopes: state.ScopeIndex
    targets: state.TargetCache
    rollouts: rollouts.RolloutManager
    on_scopes_changed: Callable[[set[scope_mod.Scope], set[scope_mod.Scope]], None]
    on_identity: Callable[[ident_mod.IdentityEntry, problems.Problem | None], Awaitable[None]]
    """Told after each use of an identity: None when its login worked, else why not."""
    instance: str
    clock: Callable[[], float] = time.monotonic
    step_aside: Callable[[], Awaitable[None]] = lambda: asyncio.sleep(0)
    """Wait until the live work around this reconcile is done (``Scheduler.step_aside``)."""
    off_slot: Callable[[], contextlib.AbstractAsyncContextManager[None]] = contextlib.nullcontext
    """Wait without holding a reconcile slot, inside ``async with`` (``Scheduler.off_slot``)."""
    template_sources: template_sources.Reader | None = None
    """Where templateFrom's ConfigMaps and Secrets are read (template_intake.py); None: a
    SecretSync with templateFrom fails (tests and tools without a watch)."""
    on_cluster_report: Callable[[state.SyncEntry], None] = lambda entry: None
    """Told when the status of an entry expanded from a ClusterSecretSync changed (it has no
    object of its own to patch): its ClusterSecretSync's counts are due (cluster_report.py)."""
    until_decided: Callable[[scope_mod.Scope], Awaitable[None]] = lambda scope: asyncio.sleep(0)
    """Before a scope's list: wait until its stream has subscribed, if it is new and streamed
    (``Streaming.until_decided``), so that first list is not made stale by the connect."""
    generator_sources: generator_intake.GeneratorIntake | None = None
    """Which SecretSyncs read which generators (a new value queues them); None: tests and tools."""

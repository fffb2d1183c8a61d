"""Start-up order: watches at once, identities next, their logins then, the big LISTs last.

Why this order: while the apiserver serves 10,000 SecretSyncs and 10,000 Secrets, every other
request waits for CPU. Measured at 10,000 objects: listing the identities took 0.7 s and the
first login (TokenRequest, then the service's TokenReview) 1 s when made during those LISTs, and
a SecretSync created right after start waited for both; made before them, they take tens of
milliseconds. The watches' early part (watching.py) runs from the start, so what is created
meanwhile is live work, not part of the LIST. The logins get a head start, not a veto: a service
that is down must not hold up the intake.

With a namespace selector (served.py) the namespaces are listed first of all (a few hundred
metadata-only objects): until then no namespace is served, and no identity or SecretSync is
read as ours.
"""

from __future__ import annotations

import asyncio
import logging

from secretferry import settings as settings_mod
from secretferry.kube import objects as kube_objects
from secretferry.reconcile import (
    cluster_report,
    cluster_syncs,
    identity_intake,
    resync,
    scheduler,
    served,
    state,
    sync_intake,
    target_intake,
    tasks,
    template_intake,
)

log = logging.getLogger(__name__)
# How long the start-up waits for the first logins before listing SecretSyncs and Secrets.
_LOGIN_HEAD_START_SECONDS = 2.0


async def boot(
    *,
    settings: settings_mod.Settings,
    background: tasks.Tasks,
    syncs: sync_intake.SyncIntake,
    targets: target_intake.TargetIntake,
    templates: template_intake.TemplateSourceIntake,
    identities: identity_intake.IdentityIntake,
    clusters: cluster_syncs.ClusterSyncs,
    cluster_report_: cluster_report.ClusterReport,
    resync_: resync.Resync,
    queue: scheduler.Scheduler[state.SyncKey],
    served_: served.ServedNamespaces,
) -> None:
    lists_may_start = asyncio.Event()
    namespaces: list[str | None] = list(settings.watched_namespaces()) or [None]
    for kind in target_intake.KINDS:
        for ns in namespaces:
            background.spawn(
                targets.watch(kind, ns, lists_may_start),
                f"watch {kube_objects.collection_path(kind)} {ns or '*'}",
            )
    for ns in namespaces:
        background.spawn(syncs.watch(ns, lists_may_start), f"watch secretsyncs {ns or '*'}")
    # templateFrom's sources: labelled ConfigMaps and Secrets only (template_intake.py).
    for kind in template_intake.KINDS:
        for ns in namespaces:
            background.spawn(
                templates.watch(kind, ns, lists_may_start), f"watch template-source {kind}s {ns or '*'}"
            )
    # ClusterSecretSyncs (cluster-scoped): expanded once the namespace watch below has listed.
    background.spawn(clusters.watch(lists_may_start), "watch clustersecretsyncs")
    background.spawn(cluster_report_.loop(), "clustersecretsync status")
    # What identities may do (identity_intake.py): namespace labels, and the opt-ins of the
    # ServiceAccounts (only when tokens may be minted at all) and Secrets identities rely on.
    namespaces_list_after = None if served_.selecting else lists_may_start
    background.spawn(identities.watch_namespaces(namespaces_list_after), "watch namespaces")
    credential_kinds = ("Secret", "ServiceAccount") if settings.token_requests_enabled else ("Secret",)
    for credential_kind in credential_kinds:
        for ns in namespaces:
            background.spawn(
                identities.watch_credentials(credential_kind, ns, lists_may_start),
                f"watch {credential_kind} opt-ins {ns or '*'}",
            )
    try:
        if not served_.listed.is_set():
            log.info("listing namespaces for the namespace selector before anything else")
            await served_.listed.wait()
            log.info("serving %d namespaces that match the namespace selector", len(served_.served()))
        await identities.list_all()
        checks = identities.check_all()
        if checks:
            await asyncio.wait(checks, timeout=_LOGIN_HEAD_START_SECONDS)
    finally:
        lists_may_start.set()
    background.spawn(resync_.loop(), "resync loop")
    expected = len(namespaces) * len(target_intake.KINDS)
    background.spawn(_start_workers_when_ready(settings, targets, queue, expected), "workers")


async def _start_workers_when_ready(
    settings: settings_mod.Settings,
    targets: target_intake.TargetIntake,
    queue: scheduler.Scheduler[state.SyncKey],
    expected: int,
) -> None:
    """Live work (objects created or changed after start) begins at once (identities are read
    by now, see boot); the backlog (every existing SecretSync) once the target cache is
    complete, because without it every existing Secret would look missing and be rewritten.
    A live reconcile needs no cache: it creates its target, or reads the one that exists."""
    queue.start(backlog=False)
    await targets.until_complete(expected)
    log.info(
        "%d managed objects cached; %d workers take the backlog now",
        targets.cached(),
        settings.workers,
    )
    queue.open_backlog()

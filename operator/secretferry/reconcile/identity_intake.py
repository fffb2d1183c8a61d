"""Identities in: the start-up read, kopf's events after it, and the hand-off from standby to leader.

kopf delivers (Cluster)MachineIdentity events to every replica (handlers/operator.py). A standby
replica only keeps its registry current; once this replica leads (``take_over``), a new or
changed identity is logged in once (identity_status.py) and the SecretSyncs naming it are queued.
Identities delivered while waiting to lead are kept as they are by the start-up read.

Also the watches that keep what an identity may do current, without waiting for a retry or the
next login (up to 300 s later):

- namespaces (metadata only, cluster-wide): a label change re-evaluates at once the SecretSyncs
  of that namespace that use a ClusterMachineIdentity (``allowedNamespaces`` selectors) and,
  with a namespace selector (served.py), takes the namespace in or lets it go; a MachineIdentity
  of a namespace not served is kept in the registry but never logged in or reported on;
- ServiceAccounts and Secrets of the served namespaces (metadata only): the opt-in annotation
  ``secretferry.io/allowed-identities`` of an object a namespaced identity relies on. Taken back
  (or the object deleted): the session is dropped and its token revoked at once, the identity is
  not Ready (``CredentialsNotOptedIn``), its SecretSyncs ``IdentityNotReady``; no Secret is
  touched. Given: the identity logs in at once and its SecretSyncs are queued.

Why metadata only: the Secret watch sees every Secret of a served namespace (no label narrows it
to credentials), and must not receive, decode or hold their data. Events about objects no
identity relies on are dropped on arrival.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from secretferry import backoff
from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.kube import customresources, serviceaccounts, watching
from secretferry.kube import errors as kube_errors
from secretferry.kube import namespaces as kube_namespaces
from secretferry.kube import objects as kube_objects
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import identity_status, scheduler, served, state

log = logging.getLogger(__name__)
# "storage is (re)initializing" right after a CRD install: a few attempts, then kopf's watch
# brings the identities anyway.
_LIST_ATTEMPTS = 10
_LIST_RETRY_INITIAL_SECONDS = 0.5
_LIST_RETRY_MAX_SECONDS = 5.0


class IdentityIntake:
    def __init__(
        self,
        *,
        kube: kube_client.Kube,
        settings: settings_mod.Settings,
        identities: ident_mod.IdentityRegistry,
        syncs: Mapping[state.SyncKey, state.SyncEntry],
        queue: scheduler.Scheduler[state.SyncKey],
        status: identity_status.IdentityStatus,
        served_namespaces: served.ServedNamespaces | None = None,
        on_namespace_served: Callable[[str, bool], None] | None = None,
        on_namespace: Callable[[str | None], None] = lambda name: None,
        on_secret: Callable[[str, str, Mapping[str, Any] | None], None] | None = None,
        on_identity: Callable[[str, str | None, str], None] | None = None,
    ) -> None:
        self._kube = kube
        # Every Secret's metadata as this watch sees it (None: deleted), for PushSecrets' sources
        # (reconcile/push/intake.py): the one Secret watch serves both.
        self._on_secret = on_secret
        # An identity changed, appeared, went, or lost or regained its consent: (kind, namespace,
        # name), for the PushSecrets naming it (reconcile/push/intake.py).
        self._on_identity = on_identity
        self.listed = asyncio.Event()
        """Set once ``list_all`` read every identity (PushSecrets and TemporaryPrivileges wait for
        it: push/intake.py, privileges/manager.py; their identity would otherwise read as missing
        for a moment at each start)."""
        self._settings = settings
        self._identities = identities
        self._syncs = syncs
        self._queue = queue
        self._status = status
        self._served = served_namespaces or served.ServedNamespaces(None)
        self._on_namespace_served = on_namespace_served
        self._on_namespace = on_namespace
        """Told of each namespace created, changed or deleted, and (None) of each complete listing:
        the ClusterSecretSyncs' selections follow (cluster_syncs.py)."""
        self.leading = False

    def take_over(self) -> None:
        """This replica leads from now on: identity events reach the SecretSyncs, not just the registry."""
        self.leading = True

    def step_down(self) -> None:
        """This replica no longer leads: identity events only keep the registry current again."""
        self.leading = False

    async def list_all(self) -> None:
        """Read every identity before the first reconcile. kopf delivers them too, but later: a
        SecretSync reconciled first would report IdentityNotFound, post a Warning and back off.
        Identities kopf delivered already (e.g. while we waited to lead) are kept as they are."""
        namespaces: list[str | None] = list(self._settings.watched_namespaces()) or [None]
        sources = [(ident_mod.CLUSTER, None)] + [(ident_mod.MACHINE, ns) for ns in namespaces]
        for kind, namespace in sources:
            plural = ident_mod.PLURALS[kind]
            retry = backoff.Backoff(
                _LIST_RETRY_INITIAL_SECONDS, _LIST_RETRY_MAX_SECONDS, jitter=backoff.EQUAL_JITTER
            )
            for attempt in range(_LIST_ATTEMPTS):
                try:
                    items = await customresources.list_items(self._kube, plural=plural, namespace=namespace)
                    break
                except kube_errors.KubeError as exc:
                    where = customresources.collection_path(plural, namespace=namespace)
                    log.warning("listing identities (%s), attempt %d: %s", where, attempt + 1, exc)
                    await asyncio.sleep(retry.next_delay())
            else:
                continue  # kopf's watch will still bring them
            for body in items:
                self._identities.upsert(kind, body)
        self.listed.set()

    def check_all(self) -> list[asyncio.Task[None]]:
        """Log every known identity of a served namespace in once (start-up), each in its own task."""
        return [self._status.spawn_check(e) for e in self._identities.entries() if self._serves(e)]

    def namespace_served(self, namespace: str) -> None:
        """``namespace`` is served from now on: its MachineIdentities log in once, so their status
        says whether they work (its SecretSyncs are taken in by the sync intake)."""
        if not self.leading:
            return
        for entry in self._identities.entries():
            kind, ns, _ = entry.key
            if kind == ident_mod.MACHINE and ns == namespace:
                self._status.spawn_check(entry)

    def namespace_let_go(self, namespace: str) -> None:
        """``namespace`` is no longer served: forget what its identities' status was last reported
        as, so that, served again later, their status is written afresh (another release may have
        written it meanwhile)."""
        for entry in self._identities.entries():
            kind, ns, _ = entry.key
            if kind == ident_mod.MACHINE and ns == namespace:
                entry.reported = None

    def _serves(self, entry: ident_mod.IdentityEntry) -> bool:
        """A MachineIdentity is served with its namespace; a ClusterMachineIdentity by every
        release, but used only by the SecretSyncs of the namespaces each one serves."""
        kind, namespace, _ = entry.key
        return kind == ident_mod.CLUSTER or self._served.serves(namespace)

    def event(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """An identity event from kopf: update the registry; when leading, re-check and requeue."""
        meta = body.get("metadata", {})
        if event_type == "DELETED":
            self._identities.remove(kind, meta.get("namespace"), meta.get("name", ""))
        else:
            previous = self._identities.get((kind, meta.get("namespace") or "", meta.get("name", "")))
            entry = self._identities.upsert(kind, body)
            if previous is not None and previous.generation == entry.generation and previous.uid == entry.uid:
                return
            if self.leading and self._serves(entry):
                self._status.spawn_check(entry)
        if not self.leading:
            return  # a standby replica only keeps its registry current
        for key, e in self._syncs.items():
            if _uses(e, kind, meta.get("namespace"), meta.get("name", "")):
                self._queue.enqueue(key, live=False)  # possibly thousands: behind user changes
        if self._on_identity is not None:
            self._on_identity(kind, meta.get("namespace"), meta.get("name", ""))

    # --- watches -------------------------------------------------------------------------------
    async def watch_namespaces(self, lists_may_start: asyncio.Event | None = None) -> None:
        """Namespace labels, forever: a change re-evaluates that namespace's cluster-identity users,
        and, with a namespace selector, takes the namespace in or lets it go."""
        seen: set[str] = set()
        async for event in watching.watch(
            self._kube, path=kube_namespaces.COLLECTION, list_after=lists_may_start, metadata_only=True
        ):
            self.namespace_event(event, seen)

    def namespace_event(self, event: watching.WatchEvent, seen: set[str]) -> None:
        """One namespace event; ``seen`` collects the names of the listing under way."""
        if event.type == "SYNCED":
            self._identities.namespaces.listed(seen)
            for gone in self._served.listing_done(seen):
                self._served_changed(gone, False)
            seen.clear()
            self._on_namespace(None)
            return
        name = str((event.object.get("metadata") or {}).get("name", ""))
        if event.type == "DELETED":
            self._identities.namespaces.gone(name)
            self._served_changed(name, self._served.gone(name))
            self._on_namespace(name)
            return
        seen.add(name)
        labels = kube_namespaces.labels_of(event.object)
        if self._identities.namespaces.seen(name, labels):
            self._requeue(
                [k for k, e in self._syncs.items() if k[0] == name and _identity_kind(e) == ident_mod.CLUSTER]
            )
        self._served_changed(name, self._served.observe(name, labels))
        self._on_namespace(name)

    def _served_changed(self, namespace: str, serve: bool | None) -> None:
        if serve is None:
            return
        log.info(
            "namespace %s %s", namespace, "matches the namespace selector: served" if serve else "let go"
        )
        if self._on_namespace_served is not None:
            self._on_namespace_served(namespace, serve)

    async def watch_credentials(
        self, kind: str, namespace: str | None, lists_may_start: asyncio.Event | None = None
    ) -> None:
        """Opt-in annotations of ServiceAccounts or Secrets (``kind``) in ``namespace`` (None: all)."""
        path = (
            serviceaccounts.COLLECTION if kind == "ServiceAccount" else kube_objects.collection_path("Secret")
        )
        async for event in watching.watch(
            self._kube, path=path, namespace=namespace, list_after=lists_may_start, metadata_only=True
        ):
            if event.type == "SYNCED":
                continue
            meta = event.object.get("metadata") or {}
            annotations = None if event.type == "DELETED" else dict(meta.get("annotations") or {})
            self.consent_seen(kind, str(meta.get("namespace", "")), str(meta.get("name", "")), annotations)
            if kind == "Secret":
                version = None if event.type == "DELETED" else str(meta.get("resourceVersion") or "")
                self.ca_secret_seen(str(meta.get("namespace", "")), str(meta.get("name", "")), version)
            if kind == "Secret" and self._on_secret is not None and self.leading:
                self._on_secret(
                    str(meta.get("namespace", "")),
                    str(meta.get("name", "")),
                    None if event.type == "DELETED" else meta,
                )

    def consent_seen(
        self, kind: str, namespace: str, name: str, annotations: Mapping[str, str] | None
    ) -> None:
        """An object's opt-ins as the watch saw it: act on identities that lost or regained it,
        and on those whose allow-templates opt-in changed (their SecretSyncs pass again now)."""
        lost, back = self._identities.consent_seen(kind, namespace, name, annotations)
        templates = self._identities.templates_seen(kind, namespace, name, annotations)
        for entry in lost:
            log.info(
                "%s: %s %s/%s no longer opts in (or is gone); its session is dropped",
                ident_mod.key_str(entry.key),
                kind,
                namespace,
                name,
            )
        if not self.leading:
            return  # a standby replica only keeps its registry current
        for entry in (*lost, *back):
            if not self._serves(entry):
                continue
            self._status.spawn_check(entry)  # lost: reports not Ready; back: logs in now
            kind_, namespace_, name_ = entry.key
            self._requeue([k for k, e in self._syncs.items() if _uses(e, kind_, namespace_, name_)])
            if self._on_identity is not None:
                self._on_identity(kind_, namespace_, name_)
        for entry in templates:
            if entry in lost or entry in back or not self._serves(entry):
                continue  # requeued above
            kind_, namespace_, name_ = entry.key
            log.info(
                "%s: the allow-templates opt-in changed; its SecretSyncs pass again",
                ident_mod.key_str(entry.key),
            )
            self._requeue([k for k, e in self._syncs.items() if _uses(e, kind_, namespace_, name_)])

    def ca_secret_seen(self, namespace: str, name: str, resource_version: str | None) -> None:
        """A Secret changed: identities whose CA bundle it holds connect again with the new
        bundle, log in once (their status follows) and their SecretSyncs retry at once (a
        rotation that ends a TLSVerifyFailed needs no wait for the backoff)."""
        changed = self._identities.ca_secret_seen(namespace, name, resource_version)
        if not self.leading:
            return
        for entry in changed:
            if not self._serves(entry):
                continue
            self._status.spawn_check(entry)
            kind_, namespace_, name_ = entry.key
            self._requeue([k for k, e in self._syncs.items() if _uses(e, kind_, namespace_, name_)])

    def _requeue(self, keys: list[state.SyncKey]) -> None:
        """Queue ``keys`` as live work: a change someone just made (only when leading)."""
        if not self.leading:
            return
        for key in keys:
            self._queue.enqueue(key, live=True)


def _identity_kind(entry: state.SyncEntry) -> str:
    ref = (entry.body.get("spec") or {}).get("identityRef") or {}
    return str(ref.get("kind", ident_mod.MACHINE))


def _uses(entry: state.SyncEntry, kind: str, namespace: str | None, name: str) -> bool:
    """Whether the SecretSync names this identity (read from the kept body: no parse needed)."""
    ref = (entry.body.get("spec") or {}).get("identityRef") or {}
    ref_kind, ref_name = ref.get("kind", ident_mod.MACHINE), ref.get("name")
    if ref_kind != kind or ref_name != name:
        return False
    return kind == ident_mod.CLUSTER or entry.key[0] == namespace

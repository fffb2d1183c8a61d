"""Generators in: the watches of both kinds and of their Secrets, a small work queue, and which
SecretSyncs use each generator.

Why a queue of its own and not the SecretSync scheduler: generators are few, each pass is two
requests, and they must never wait behind a 10,000-SecretSync backlog (nor make it wait). Two
workers; a key queued while it runs runs again after (no lost change, no concurrent pass of one
generator — two at once could both generate).

Why watch the Secrets (selected by the generator label): a deleted or hand-edited Secret is
noticed at once (the generator makes a new value, or its consumers re-read the edited one), and
the consumers read the value from what this watch keeps (``value``) instead of two GETs per pass
(the generator, its Secret). What is kept of a Secret: its name, resourceVersion and
ownerReferences, and the one data key of the generator kind that controls it; nothing of a
Secret no generator controls (anyone may set the label: it selects, it never grants). The same
Secrets are in the operator's managed-object cache already (they carry the managed-by label), so
holding their value here exposes nothing new; the tenant rule is the read's: a consumer is
answered from its own namespace only, from a Secret whose controller ownerReference carries the
generator's uid (store.value_of). What the cache does not hold (not listed yet, a generator or
Secret missing) is read as before.

Consumers: a SecretSync pass that reads a generator tells ``bind`` (before reading, so one that
is not ready yet is queued by its first value); every change of the value the Secret watch keeps
queues those SecretSyncs as live work — from the watch, not from the write, so the pass they
run reads the new value from the cache (a watch event follows its write by milliseconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from secretferry import metrics
from secretferry.kube import client as kube_client
from secretferry.kube import customresources, watching
from secretferry.kube import errors as kube_errors
from secretferry.kube import objects as kube_objects
from secretferry.models import generators
from secretferry.reconcile import served as served_mod
from secretferry.reconcile.generators import pass_, store

log = logging.getLogger(__name__)

GeneratorKey = tuple[str, str, str]
"""(kind, namespace, name)."""
SyncKey = tuple[str, str]
_WORKERS: Final = 2  # generators are few and a pass is two requests; two keep one slow one from blocking
KINDS: Final = (generators.PASSWORD_GENERATOR_KIND, generators.UUID_GENERATOR_KIND)


class GeneratorIntake:
    def __init__(
        self,
        *,
        kube: kube_client.Kube,
        instance: str,
        enqueue_sync: Callable[[SyncKey], None],
        served: served_mod.ServedNamespaces,
    ) -> None:
        self._kube = kube
        self._instance = instance
        self._enqueue_sync = enqueue_sync
        self._served = served
        self._bodies: dict[GeneratorKey, Mapping[str, Any]] = {}
        self._pending: dict[GeneratorKey, None] = {}  # ordered set
        self._running: set[GeneratorKey] = set()
        self._again: set[GeneratorKey] = set()
        self._wakeup = asyncio.Event()
        self._users: dict[GeneratorKey, set[SyncKey]] = {}
        self._uses: dict[SyncKey, tuple[GeneratorKey, ...]] = {}
        self._timers: set[asyncio.TimerHandle] = set()
        self._stored: dict[GeneratorKey, str] = {}
        """The resourceVersion of each generator's last write: its echo in the Secret watch does
        not queue the generator again."""
        self._secrets: dict[tuple[str, str], dict[str, Any]] = {}
        """(namespace, name) → a generator-controlled Secret as the watch last saw it (slim:
        ``_slim_secret``); what ``value`` answers consumers from."""
        self.reads = 0
        """Consumer reads the cache could not answer (two GETs each): the tests' count."""

    # --- SecretSyncs that read generators (the pass's side) ---------------------------------------
    def bind(self, sync_key: SyncKey, keys: Iterable[GeneratorKey]) -> None:
        new = tuple(dict.fromkeys(keys))
        for key in self._uses.pop(sync_key, ()):
            users = self._users.get(key)
            if users is not None:
                users.discard(sync_key)
                if not users:
                    del self._users[key]
        if new:
            self._uses[sync_key] = new
            for key in new:
                self._users.setdefault(key, set()).add(sync_key)

    def users(self, key: GeneratorKey) -> set[SyncKey]:
        return set(self._users.get(key, ()))

    def _stored_new(self, kind: str, namespace: str, name: str, resource_version: str) -> None:
        """The pass stored a new value: its watch event queues the consumers (``watch_secrets``)
        and not the generator itself."""
        self._stored[(kind, namespace, name)] = resource_version

    async def value(self, ref: generators.GeneratorRef, *, namespace: str) -> dict[str, str]:
        """``{key: value}`` of generator ``ref`` for a consumer in ``namespace`` (its own only):
        from the watches' bodies when they hold both the generator and its Secret, else read
        (store.read_value). Raises ``problems.Problem`` as the read does."""
        body = self._bodies.get((ref.kind, namespace, ref.name))
        secret = None
        if body is not None:
            secret = self._secrets.get((namespace, store.secret_name_of(ref.name, body)))
        if body is None or secret is None:
            self.reads += 1
            return await store.read_value(self._kube, ref, namespace=namespace)
        return store.value_of(ref, generator=body, secret=secret)

    def _written(self, kind: str, namespace: str, name: str) -> None:
        for sync_key in sorted(self._users.get((kind, namespace, name), ())):
            self._enqueue_sync(sync_key)
            metrics.GENERATOR_SOURCE_RESYNCS.inc()

    # --- the watches ------------------------------------------------------------------------------
    async def watch(self, kind: str, namespace: str | None, lists_may_start: asyncio.Event) -> None:
        seen: set[GeneratorKey] = set()
        async for event in watching.watch(
            self._kube,
            path=customresources.collection_path(generators.PLURALS[kind]),
            namespace=namespace,
            list_after=lists_may_start,
        ):
            if event.type == "SYNCED":
                for gone in [
                    k for k in self._bodies if k[0] == kind and (namespace is None or k[1] == namespace)
                ]:
                    if gone not in seen:
                        self._bodies.pop(gone, None)
                seen = set()
                continue
            meta = event.object.get("metadata") or {}
            key: GeneratorKey = (kind, meta.get("namespace", ""), meta.get("name", ""))
            if event.type == "DELETED":
                self._bodies.pop(key, None)  # its Secret goes with it (ownerReference)
                self._stored.pop(key, None)
                continue
            if not self._served.serves(key[1]):
                continue
            seen.add(key)
            old = self._bodies.get(key)
            self._bodies[key] = event.object
            if old is None or _changed(old, event.object):
                self.enqueue(key)

    async def watch_secrets(self, namespace: str | None, lists_may_start: asyncio.Event) -> None:
        """The generators' Secrets, kept for consumers (``value``): a new value queues the
        SecretSyncs reading it; a deletion or an edit not our own also queues the generator."""
        seen: set[tuple[str, str]] = set()
        async for event in watching.watch(
            self._kube,
            path=kube_objects.collection_path("Secret"),
            label_selector=store.GENERATOR_LABEL,
            namespace=namespace,
            list_after=lists_may_start,
        ):
            if event.type == "SYNCED":
                for gone in [s for s in self._secrets if namespace is None or s[0] == namespace]:
                    if gone not in seen:  # deleted while the watch was down
                        self._secret_changed(gone, None, listed=False)
                seen = set()
                continue
            meta = event.object.get("metadata") or {}
            where = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            if event.type == "DELETED":
                self._secret_changed(where, None, listed=False)
                continue
            seen.add(where)
            self._secret_changed(where, _slim_secret(event.object), listed=event.listed)

    def _secret_changed(self, where: tuple[str, str], secret: dict[str, Any] | None, *, listed: bool) -> None:
        """Keep ``secret`` (None: gone); queue consumers when what they read changed, and the
        generator when someone else changed its Secret."""
        old = self._secrets.pop(where, None)
        if secret is not None:
            self._secrets[where] = secret
        for key in _controllers(old) | _controllers(secret):
            value_changed = _value(old, key) != _value(secret, key)
            version = ((secret or {}).get("metadata") or {}).get("resourceVersion")
            ours = secret is not None and version is not None and version == self._stored.get(key)
            if not ours and not listed and key in self._bodies:
                self.enqueue(key)  # deleted or edited by hand: the generator decides again
            if value_changed or (secret is None) != (old is None):
                self._written(*key)

    async def take_in(self, namespace: str) -> None:
        """``namespace`` came to match the namespace selector: its generators are served from now
        on (one LIST per kind; the watch only sees them at their next change otherwise)."""
        for kind in KINDS:
            try:
                items = await customresources.list_items(
                    self._kube, plural=generators.PLURALS[kind], namespace=namespace
                )
            except kube_errors.KubeError as exc:
                log.warning("listing the %ss of newly served namespace %s: %s", kind, namespace, exc)
                continue
            if not self._served.serves(namespace):
                return  # let go again meanwhile
            for body in items:
                key: GeneratorKey = (kind, namespace, (body.get("metadata") or {}).get("name", ""))
                self._bodies[key] = body
                self.enqueue(key)

    def let_go(self, namespace: str) -> None:
        """``namespace`` is no longer served: forget its generators (in memory only)."""
        for key in [k for k in self._bodies if k[1] == namespace]:
            del self._bodies[key]
            self._pending.pop(key, None)

    # --- the queue --------------------------------------------------------------------------------
    def enqueue(self, key: GeneratorKey) -> None:
        if key in self._running:
            self._again.add(key)
            return
        self._pending[key] = None
        self._wakeup.set()

    def _enqueue_later(self, key: GeneratorKey, delay: float) -> None:
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            if handle is not None:
                self._timers.discard(handle)
            self.enqueue(key)

        handle = loop.call_later(delay, fire)
        self._timers.add(handle)

    async def run(self) -> None:
        """The workers, until cancelled."""
        workers = [asyncio.create_task(self._worker(), name=f"generator-worker-{i}") for i in range(_WORKERS)]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            for task in workers:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            for handle in self._timers:
                handle.cancel()
            self._timers.clear()

    async def _worker(self) -> None:
        while True:
            while not self._pending:
                self._wakeup.clear()
                await self._wakeup.wait()
            key = next(iter(self._pending))
            del self._pending[key]
            body = self._bodies.get(key)
            if body is None:
                continue
            self._running.add(key)
            try:
                delay = await pass_.reconcile(
                    self._kube, key[0], body, instance=self._instance, on_written=self._stored_new
                )
            except Exception:  # a bug must not end the worker: log, and look again later
                log.exception("generator %s %s/%s: the pass failed", *key)
                delay = 5.0
            finally:
                self._running.discard(key)
            if key in self._again:
                self._again.discard(key)
                self.enqueue(key)
            elif delay is not None:
                self._enqueue_later(key, delay)


def _slim_secret(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What a consumer's read needs of a generator's Secret: name, resourceVersion, the
    controller ownerReference, and the data key of that generator's kind (nothing of a Secret
    no generator controls: the label alone is anyone's to set)."""
    meta = obj.get("metadata") or {}
    refs = [
        {k: r.get(k) for k in ("kind", "name", "uid", "controller")}
        for r in meta.get("ownerReferences") or []
        if r.get("controller") is True and r.get("kind") in KINDS
    ]
    data = obj.get("data") or {}
    keys = {generators.KEYS[r["kind"]] for r in refs}
    return {
        "metadata": {
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "resourceVersion": meta.get("resourceVersion"),
            "ownerReferences": refs,
        },
        "data": {k: v for k, v in data.items() if k in keys},
    }


def _controllers(secret: Mapping[str, Any] | None) -> set[GeneratorKey]:
    """The generator that controls ``secret``, as a key (a set: none or one)."""
    if secret is None:
        return set()
    meta = secret.get("metadata") or {}
    return {
        (str(r["kind"]), str(meta.get("namespace", "")), str(r.get("name", "")))
        for r in meta.get("ownerReferences") or []
        if r.get("controller") is True and r.get("kind") in KINDS
    }


def _value(secret: Mapping[str, Any] | None, key: GeneratorKey) -> tuple[str | None, str | None]:
    """(controller uid, encoded value) a consumer of ``key`` would read from ``secret``."""
    if secret is None:
        return None, None
    uid = next(
        (
            r.get("uid")
            for r in (secret.get("metadata") or {}).get("ownerReferences") or []
            if (r.get("kind"), r.get("name")) == (key[0], key[2])
        ),
        None,
    )
    return uid, (secret.get("data") or {}).get(generators.KEYS[key[0]])


def _changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """A change worth a pass: the spec (generation), or the annotations (the regenerate token).
    A status-only change (our own patch echoing back) is not."""
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    return old_meta.get("generation") != new_meta.get("generation") or (
        old_meta.get("annotations") != new_meta.get("annotations")
    )

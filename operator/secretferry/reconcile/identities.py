"""Machine identities: which one a SecretSync may use, and one shared login session per identity.

Why shared: existing operators log in once per resource; with 1,000 SecretSyncs on one identity
that is 1,000 logins per cycle and, with Kubernetes auth, 1,000 TokenRequests. Here every
SecretSync that names the same identity shares one ``AuthSession`` (one login, renewed before
expiry, re-login with a freshly minted ServiceAccount token on 401/TokenError).

Isolation is decided here too: a namespaced MachineIdentity serves only its own namespace; a
ClusterMachineIdentity serves the namespaces its ``allowedNamespaces`` admits. And what a
namespaced identity may do with credentials (``tenancy``: allowed hosts, token audience, opt-in
of the ServiceAccount or Secret) is checked before anything is read, minted or sent.

How each login method turns ``spec.auth`` into credentials (which Secret, which ServiceAccount
token) is one module per method in ``reconcile.login``; here is what every method shares: the
registry, the session's lifecycle (built once, retired on change, revoked on shutdown), the CA
bundle and the consent the session depends on.

Both are kept current by watches (identity_intake.py): namespace labels, so a label change admits
or refuses a namespace at once, and the opt-in annotations of the objects namespaced identities
rely on, so consent taken back ends the session (token revoked) at once, and consent given
logs in at once.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import pydantic

from secretferry import metrics
from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import secretrefs, serviceaccounts
from secretferry.models import base as models_base
from secretferry.models import errors as model_errors
from secretferry.models import identity as identity_models
from secretferry.models import secretsync as sync_models
from secretferry.reconcile import namespace_labels, problems, reasons, template_trust, tenancy, token_minting
from secretferry.reconcile.login import context as login_context
from secretferry.reconcile.login import methods as login_methods
from secretferry.reconcile.login import secret_values
from secretferry.service import auth, health
from secretferry.service import client as service_client

log = logging.getLogger(__name__)

MACHINE = identity_models.MACHINE_IDENTITY_KIND
CLUSTER = identity_models.CLUSTER_MACHINE_IDENTITY_KIND
# The collections each kind is listed, watched and status-patched in.
PLURALS = {MACHINE: "machineidentities", CLUSTER: "clustermachineidentities"}
_RETIRE_GRACE_CALLS = 3  # a reconcile makes a few calls in a row (slug, one list per source)
IdentityKey = tuple[str, str, str]  # (kind, namespace or "", name)


class _RefSpec(Protocol):
    @property
    def identity_ref(self) -> sync_models.IdentityRef: ...


class Referrer(Protocol):
    """What names an identity: a SecretSync, or a PushSecret (same ``spec.identityRef``)."""

    @property
    def metadata(self) -> models_base.ObjectMeta: ...
    @property
    def spec(self) -> _RefSpec: ...


def key_str(key: IdentityKey) -> str:
    kind, namespace, name = key
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


@dataclass
class IdentityEntry:
    key: IdentityKey
    uid: str
    generation: int | None
    model: identity_models.MachineIdentity | None
    invalid: str | None = None
    session: auth.AuthSession | None = None
    reported: tuple[str, str, str, str, str] | None = None  # ready, reason, login, list and slug route
    """(status, reason, lastLoginTime, listEndpoint, slug route) as last written: nothing new, no write."""
    building: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while the session is built: building awaits Secrets, and two SecretSyncs arriving at
    once must not each build (and log in with) a session of their own."""
    refusal: problems.Problem | None = None
    """Why this identity may not be used at all (tenancy checks on its spec): nothing is sent."""
    notes: tuple[str, ...] = ()
    """What the operator changed from the spec (a capped token lifetime), for the Ready message."""
    templates_opt_in: bool | None = None
    """The credential object's allow-templates opt-in (namespaced identities; see
    ``IdentityRegistry.check_templates``): as the credential watch last showed it
    (``templates_seen``), or read once when the watch has not shown that object since this entry
    was made; None: not known yet. No timer: the watch keeps it current, so a withdrawal counts
    from the next pass on, and a burst of passes over one identity reads at most once."""
    credential_events: int = 0
    """Watch events seen for the objects this entry relies on: a read that one overtook is not kept."""
    consents: dict[tenancy.CredentialRef, bool] = field(default_factory=dict)
    """Whether each object it relies on opted in, as last seen by the watch (namespaced only)."""
    withdrawn: dict[tenancy.CredentialRef, problems.Problem] = field(default_factory=dict)
    """Objects whose opt-in the watch saw missing: while any is, no session and no login."""
    ca_version: str | None = None
    """resourceVersion of the ``spec.tls.caSecretRef`` Secret the session's CA bundle was read
    from; the Secret watch seeing another one ends the session (``ca_secret_seen``)."""
    ca_stale: bool = False
    """The CA Secret changed while a session was being built with what was read before it."""


@dataclass
class _ClientPool:
    """One HTTP connection pool per (service URL, CA bundle)."""

    timeout_seconds: float
    on_host_recovered: Callable[[health.HostHealth], None] | None = None
    clients: dict[tuple[str, str | None], service_client.ServiceClient] = field(default_factory=dict)

    def get(self, host: str, ca_pem: str | None) -> service_client.ServiceClient:
        key = (host, ca_pem)
        client = self.clients.get(key)
        if client is None:
            verify: ssl.SSLContext | bool = True
            if ca_pem:
                ctx = ssl.create_default_context()
                ctx.load_verify_locations(cadata=ca_pem)
                verify = ctx
            client = service_client.ServiceClient(
                host, verify=verify, timeout=self.timeout_seconds, on_host_recovered=self.on_host_recovered
            )
            self.clients[key] = client
        return client

    async def close(self) -> None:
        for client in self.clients.values():
            await client.aclose()
        self.clients.clear()


class IdentityRegistry:
    def __init__(
        self,
        *,
        kube: kube_client.Kube,
        settings: settings_mod.Settings,
        on_host_recovered: Callable[[health.HostHealth], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube = kube
        self._settings = settings
        self._clock = clock
        self._entries: dict[IdentityKey, IdentityEntry] = {}
        self._pool = _ClientPool(
            timeout_seconds=settings.service_timeout_seconds, on_host_recovered=on_host_recovered
        )
        # Sessions of changed or removed identities whose token is not revoked yet (its grace
        # period runs): shutdown revokes them at once. Weak: once revoked, nothing keeps them.
        self._retiring: weakref.WeakSet[auth.AuthSession] = weakref.WeakSet()
        self.namespaces = namespace_labels.NamespaceLabels(kube, clock=clock)
        """Kept current by the namespace watch (identity_intake.py)."""
        self._hosts = tenancy.HostPolicy.from_settings(settings)
        self._tokens = token_minting.TokenMinter(kube, settings, clock=clock)

    # --- intake (from the kopf handlers) ----------------------------------------------------
    def upsert(self, kind: str, body: Mapping[str, Any]) -> IdentityEntry:
        """Record an identity; a new generation drops the old session (credentials may differ)."""
        meta = body.get("metadata", {})
        key: IdentityKey = (kind, meta.get("namespace") or "", meta["name"])
        previous = self._entries.get(key)
        uid, generation = meta.get("uid", ""), meta.get("generation")
        if previous is not None and previous.uid == uid and previous.generation == generation:
            return previous  # a status-only change (often our own patch echoing back): keep the session
        cls = identity_models.ClusterMachineIdentity if kind == CLUSTER else identity_models.MachineIdentity
        model: identity_models.MachineIdentity | None
        invalid: str | None = None
        try:
            model = cls.from_body(body)
        except pydantic.ValidationError as exc:
            model, invalid = None, model_errors.describe_validation_error(exc)
        entry = IdentityEntry(key=key, uid=uid, generation=generation, model=model, invalid=invalid)
        if model is not None:
            entry.refusal = tenancy.check_identity(model.spec, namespaced=kind == MACHINE, policy=self._hosts)
            k8s = model.spec.auth.kubernetes
            if k8s is not None:
                _, note = tenancy.token_expiration(
                    k8s.token_expiration_seconds, cap=self._settings.max_token_expiration_seconds
                )
                entry.notes = (note,) if note else ()
        self._entries[key] = entry
        if previous is not None and previous.session is not None:
            self._retire(previous.session)  # its token is revoked once calls under way are done
        return entry

    def remove(self, kind: str, namespace: str | None, name: str) -> None:
        entry = self._entries.pop((kind, namespace or "", name), None)
        if entry is not None and entry.session is not None:
            self._retire(entry.session)

    def _retire(self, session: auth.AuthSession, *, at_once: bool = False) -> None:
        if at_once:
            session.retire(grace_seconds=0.0, why="credentials no longer opted in")
        else:
            session.retire()
        self._retiring.add(session)

    def get(self, key: IdentityKey) -> IdentityEntry | None:
        return self._entries.get(key)

    def entries(self) -> list[IdentityEntry]:
        return list(self._entries.values())

    # --- resolution for a SecretSync ----------------------------------------------------------
    async def resolve(self, sync: Referrer) -> IdentityEntry:
        """The identity ``sync`` names, after the isolation checks; raises ``problems.Problem``.
        ``sync``: a SecretSync, or a PushSecret (whose writes trust.py checks further)."""
        return await self.resolve_ref(sync.spec.identity_ref, sync.metadata.namespace or "")

    async def resolve_ref(self, ref: sync_models.IdentityRef, namespace: str) -> IdentityEntry:
        """The identity ``ref`` names for an object in ``namespace`` (any kind that carries an
        ``identityRef``), after the same isolation checks; raises ``problems.Problem``."""
        key: IdentityKey = (ref.kind, namespace if ref.kind == MACHINE else "", ref.name)
        entry = self._entries.get(key)
        where = f"in namespace {namespace}" if ref.kind == MACHINE else "(cluster-scoped)"
        if entry is None:
            # Not retriable: its creation is an identity event, which requeues its SecretSyncs.
            raise problems.Problem(
                reasons.IDENTITY_NOT_FOUND, f"{ref.kind} {ref.name!r} {where} does not exist"
            )
        if entry.model is None:
            raise problems.Problem(
                reasons.IDENTITY_NOT_READY, f"{ref.kind} {ref.name!r} has an invalid spec: {entry.invalid}"
            )
        if isinstance(entry.model, identity_models.ClusterMachineIdentity):
            spec = entry.model.spec
            assert isinstance(spec, identity_models.ClusterMachineIdentitySpec)
            labels = await self.namespaces.get(namespace) if spec.allowed_namespaces else {}
            if not spec.allows_namespace(namespace, labels):
                raise problems.Problem(
                    reasons.IDENTITY_NOT_ALLOWED,
                    f"ClusterMachineIdentity {ref.name!r} does not admit namespace {namespace!r} "
                    "(spec.allowedNamespaces)",
                    # Namespace labels are watched (a change requeues at once); retrying also
                    # covers a watch that is down.
                    retriable=True,
                )
        if entry.refusal is not None:
            raise problems.Problem(
                reasons.IDENTITY_NOT_READY,
                f"{ref.kind} {ref.name!r} is refused ({entry.refusal.reason}): {entry.refusal.message}",
            )
        if entry.withdrawn:
            withdrawn = next(iter(entry.withdrawn.values()))
            raise problems.Problem(
                reasons.IDENTITY_NOT_READY,
                f"{ref.kind} {ref.name!r} is not Ready ({withdrawn.reason}): {withdrawn.message}",
                # The watch requeues this SecretSync when the opt-in is back; the retry is a
                # safety net for a watch that is down.
                retriable=True,
            )
        return entry

    async def check_templates(self, entry: IdentityEntry, sync: sync_models.SecretSync) -> None:
        """Raise TemplatesNotAllowed when ``sync`` has templates its identity was not opted in to
        (``template_trust``); called before anything is fetched for it."""
        if not template_trust.computes_over_values(sync.spec):
            return
        assert entry.model is not None  # resolve() refused an invalid identity
        kind, _, name = entry.key
        if kind == CLUSTER:
            if not template_trust.allowed(entry.model.spec, identity=name, annotations=None):
                raise template_trust.refusal(kind=kind, identity=name, holder=None)
            return
        holder_kind, holder_name = template_trust.credential_object(entry.model.spec.auth)
        if not await self._templates_opted_in(entry, kind=holder_kind, name=holder_name):
            holder = f"{holder_kind} {entry.key[1]}/{holder_name}"
            raise template_trust.refusal(kind=kind, identity=name, holder=holder)

    async def _templates_opted_in(self, entry: IdentityEntry, *, kind: str, name: str) -> bool:
        """The credential object's allow-templates opt-in: as the watch keeps it, else read once.

        Read like the login reads it: an object that does not admit the identity at all
        (``allowed-identities``) is refused as it would be at login, so the answer says nothing
        the login would not. The read is kept only when no watch event for the entry's objects
        came meanwhile (that event's answer is newer, or was cleared for a read of its own)."""
        withdrawn = entry.withdrawn.get((kind, name))
        if withdrawn is not None:
            raise withdrawn
        if entry.templates_opt_in is not None:
            return entry.templates_opt_in
        namespace, identity = entry.key[1], entry.key[2]
        events_before = entry.credential_events
        try:
            if kind == "ServiceAccount":
                annotations = await serviceaccounts.read_annotations(
                    self._kube, namespace=namespace, name=name
                )
            else:
                annotations = (await secretrefs.read(self._kube, namespace=namespace, name=name)).annotations
        except kube_errors.KubeError as exc:
            raise _credentials_problem(f"{key_str(entry.key)}: cannot read {kind}: {exc}") from exc
        if not tenancy.opted_in(annotations, identity):
            raise _not_opted_in(entry, kind, namespace=namespace, name=name)
        assert entry.model is not None  # check_templates runs on resolved identities only
        allowed = template_trust.allowed(entry.model.spec, identity=identity, annotations=annotations)
        if entry.credential_events == events_before:
            entry.templates_opt_in = allowed
        return allowed

    def templates_seen(
        self, kind: str, namespace: str, name: str, annotations: Mapping[str, str] | None
    ) -> list[IdentityEntry]:
        """A watched ServiceAccount or Secret as it is now (``None``: deleted): the allow-templates
        opt-in of the namespaced identities whose credential object it is, kept from the watch.
        Returns those whose answer changed from a known one (their SecretSyncs are requeued: a
        withdrawal shows at once, a grant needs no retry). Call it for every event, before
        anything reads the opt-in again."""
        changed: list[IdentityEntry] = []
        for entry in self._entries.values():
            if entry.key[0] != MACHINE or entry.key[1] != namespace or entry.model is None:
                continue
            if (kind, name) not in tenancy.credential_refs(entry.model.spec):
                continue
            entry.credential_events += 1
            if template_trust.credential_object(entry.model.spec.auth) != (kind, name):
                continue  # a CA bundle Secret: no say over templates
            identity = entry.key[2]
            allowed = annotations is not None and template_trust.allowed(
                entry.model.spec, identity=identity, annotations=annotations
            )
            previous, entry.templates_opt_in = entry.templates_opt_in, allowed
            if previous is not None and previous != allowed:
                changed.append(entry)
        return changed

    # --- consent (the credential watches in identity_intake.py) --------------------------------
    def consent_seen(
        self, kind: str, namespace: str, name: str, annotations: Mapping[str, str] | None
    ) -> tuple[list[IdentityEntry], list[IdentityEntry]]:
        """A watched ServiceAccount or Secret as it is now (``None``: deleted). Returns the
        namespaced identities that just lost its consent (their session is dropped and its token
        revoked at once) and those whose every withdrawn consent is back (to log in again)."""
        lost: list[IdentityEntry] = []
        back: list[IdentityEntry] = []
        for entry in self._entries.values():
            if entry.key[0] != MACHINE or entry.key[1] != namespace or entry.model is None:
                continue
            ref = (kind, name)
            if ref not in tenancy.credential_refs(entry.model.spec):
                continue
            opted = annotations is not None and tenancy.opted_in(annotations, entry.key[2])
            previous, entry.consents[ref] = entry.consents.get(ref), opted
            if opted == previous:
                continue
            if not opted:
                entry.withdrawn[ref] = _not_opted_in(entry, kind, namespace=namespace, name=name)
                if entry.session is not None:
                    self._retire(entry.session, at_once=True)
                    entry.session = None
                lost.append(entry)
                continue
            regained = entry.withdrawn.pop(ref, None) is not None or _credentials_failed(entry)
            if regained and not entry.withdrawn:
                back.append(entry)
        return lost, back

    def ca_secret_seen(self, namespace: str, name: str, resource_version: str | None) -> list[IdentityEntry]:
        """A watched Secret as it is now (``None``: deleted). Identities whose session trusts a
        CA bundle read from an older version of it lose that session (retired like a spec change:
        calls under way finish); the next call reads the bundle afresh and connects through a
        pool that trusts it, so a CA rotation needs no restart. Returns those identities (to log
        in again and requeue their SecretSyncs). A relist repeats the version read: nothing."""
        changed: list[IdentityEntry] = []
        for entry in self._entries.values():
            if entry.ca_version is None or entry.model is None:
                continue  # no bundle read from a Secret yet: the next read gets the current one
            tls = entry.model.spec.tls
            ref = tls.ca_secret_ref if tls is not None else None
            if ref is None or ref.name != name or self._ref_namespace(entry, ref) != namespace:
                continue
            if resource_version == entry.ca_version:
                continue
            log.info(
                "%s: CA bundle Secret %s/%s changed; connecting again with the bundle it holds now",
                key_str(entry.key),
                namespace,
                name,
            )
            if entry.session is not None:
                self._retire(entry.session)
            else:  # read, and the session is being built with it: ``session`` builds again
                entry.ca_stale = True
            entry.session, entry.ca_version = None, None
            changed.append(entry)
        return changed

    # --- sessions -----------------------------------------------------------------------------
    async def session(self, entry: IdentityEntry) -> auth.AuthSession:
        """The shared login session of ``entry``, built on first use.

        A refused identity gets none: the refusal is raised before any Secret is read; nor does
        one whose ServiceAccount or Secret took its opt-in back (``consent_seen``).
        """
        if entry.refusal is not None:
            refusal = entry.refusal  # a new instance per raise: tracebacks would pile up on one
            raise problems.Problem(refusal.reason, refusal.message, retriable=refusal.retriable)
        if entry.withdrawn:
            withdrawn = next(iter(entry.withdrawn.values()))
            raise problems.Problem(withdrawn.reason, withdrawn.message, retriable=withdrawn.retriable)
        if entry.session is not None:
            return entry.session
        async with entry.building:
            if entry.session is not None:
                return entry.session
            assert entry.model is not None
            spec = entry.model.spec
            host = spec.host_api or self._settings.default_host_api
            entry.ca_stale = False
            ca_pem = await self._ca_bundle(entry, spec)
            credentials = await login_methods.credentials(self._login_context(entry), spec.auth)
            if entry.ca_stale:  # the CA Secret changed meanwhile (``ca_secret_seen``): read it again
                entry.ca_stale = False
                ca_pem = await self._ca_bundle(entry, spec)
            client = self._pool.get(host, ca_pem)
            entry.session = auth.AuthSession(
                client,
                credentials,
                name=key_str(entry.key),
                renew_margin_fraction=self._settings.token_renew_margin_fraction,
                on_login=_count_login,
                # After the identity changes, reconciles already under way finish their calls
                # (each bounded by the call timeout) before its token is revoked.
                retire_grace_seconds=_RETIRE_GRACE_CALLS * self._settings.service_timeout_seconds,
            )
            return entry.session

    def _login_context(self, entry: IdentityEntry) -> login_context.LoginContext:
        kind, namespace, name = entry.key
        return login_context.LoginContext(
            label=key_str(entry.key),
            identity=name,
            namespaced=kind == MACHINE,
            namespace=namespace,
            kube=self._kube,
            tokens=self._tokens,
            settings=self._settings,
        )

    def _ref_namespace(self, entry: IdentityEntry, ref: object) -> str:
        return self._login_context(entry).ref_namespace(ref)

    async def _ca_bundle(self, entry: IdentityEntry, spec: identity_models.MachineIdentitySpec) -> str | None:
        if spec.tls is None:
            return None
        if spec.tls.ca_bundle:
            return spec.tls.ca_bundle
        if spec.tls.ca_secret_ref is not None:
            ca_pem, entry.ca_version = await secret_values.read_versioned(
                self._login_context(entry), spec.tls.ca_secret_ref
            )
            return ca_pem
        return None

    async def close(self) -> None:
        """Shutdown: revoke every session's token (bounded, see ``AuthSession.close``), then close."""
        sessions = [e.session for e in self._entries.values() if e.session is not None]
        sessions += list(self._retiring)
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
        await self._pool.close()


def _count_login(method: str, result: str) -> None:
    metrics.LOGINS.labels(method=method, result=result).inc()


def _not_opted_in(entry: IdentityEntry, kind: str, *, namespace: str, name: str) -> problems.Problem:
    return token_minting.not_opted_in(
        key_str(entry.key), entry.key[2], namespace=namespace, name=name, kind=kind
    )


def _credentials_failed(entry: IdentityEntry) -> bool:
    """Whether the identity's last reported login failed on its credentials (worth a new try
    once an object it relies on opted in)."""
    failed = (reasons.CREDENTIALS_NOT_OPTED_IN, reasons.CREDENTIALS_NOT_FOUND)
    return entry.reported is not None and entry.reported[1] in failed


_credentials_problem = token_minting.credentials_problem

"""One pass for one PushSecret: identity → source → checks → list → writes → status.

Order matters for the security model (trust.py): the identity and its allow-list are checked and
the source Secret's opt-in is read before any value of it is decoded, and nothing is sent to the
service before all of them passed. A failure never touches what is at the service; the status
says why (reasons.py, PushSecret block), with keys named and values never.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from secretferry import metrics
from secretferry.kube import client as kube_client
from secretferry.kube import customresources
from secretferry.kube import errors as kube_errors
from secretferry.kube import objects as kube_objects
from secretferry.models import identity as identity_models
from secretferry.models import pushsecret as push_models
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import outcomes, problems, reasons
from secretferry.reconcile.push import loops, trust
from secretferry.reconcile.push import plan as plan_mod
from secretferry.reconcile.rendering import rewrite
from secretferry.service import auth, listroutes, models
from secretferry.service import client as service_client
from secretferry.service import errors as service_errors
from secretferry.service import scopes as scope_mod

log = logging.getLogger(__name__)

GENERATOR_PLURALS: Final = {"PasswordGenerator": "passwordgenerators", "UUIDGenerator": "uuidgenerators"}


@dataclass
class PushDeps:
    """What a pass needs, built once by the controller."""

    kube: kube_client.Kube
    identities: ident_mod.IdentityRegistry
    routes: listroutes.ListRoutes
    slugs: scope_mod.SlugCache
    hmac_key: bytes
    instance: str
    syncs_writing: Callable[[str, str], Iterable[tuple[tuple[str, str], Mapping[str, Any]]]] = (
        lambda namespace, secret: ()
    )
    """(key, kept body) of the SecretSyncs writing Secret (namespace, name), for ``loops``: the
    table's index (``SyncTable.writing``), so a pass never scans every SecretSync."""


@dataclass
class Outcome:
    """What the intake needs back: the source Secret (for the watch index) and when to retry."""

    source_secret: str | None = None
    retry_after: float | None = None
    retriable: bool = False
    records: dict[str, plan_mod.Record] | None = None
    """What is at the service as ours after this pass (None: unknown, the pass stopped before
    listing): the next pass starts from it."""


def digest_for(hmac_key: bytes, namespace: str, name: str) -> plan_mod.Digest:
    """HMACs keyed per install and per PushSecret: equal values of two PushSecrets (or of two keys)
    give different HMACs, so a status compares with nothing but its own earlier status."""
    scope = hmac.new(hmac_key, f"push/{namespace}/{name}".encode(), hashlib.sha256).digest()

    def digest(key: str, value: str) -> str:
        return hmac.new(scope, key.encode() + b"\0" + value.encode(), hashlib.sha256).hexdigest()

    return digest


def records_of(status: push_models.PushSecretStatus) -> dict[str, plan_mod.Record]:
    return {
        p.key: plan_mod.Record(source=p.source_hmac, remote=p.remote_hmac) for p in status.pushed_keys or []
    }


# --- the source ---------------------------------------------------------------------------------


async def source_secret_name(deps: PushDeps, push: push_models.PushSecret) -> str:
    """The Secret the selector means: named, or the generator's ``status.secretName``."""
    selector = push.spec.selector
    if selector.secret is not None:
        return selector.secret.name
    ref = selector.generator_ref
    assert ref is not None  # the model admits exactly one
    namespace = push.metadata.namespace or ""
    path = f"{customresources.collection_path(GENERATOR_PLURALS[ref.kind], namespace=namespace)}/{ref.name}"
    try:
        generator = await deps.kube.request("GET", path)
    except kube_errors.KubeError as exc:
        raise problems.Problem(
            reasons.PUSH_GENERATOR_NOT_READY,
            f"{ref.kind} {namespace}/{ref.name} cannot be read ({exc.reason}); nothing was sent",
            retriable=True,
        ) from None
    name = (generator.get("status") or {}).get("secretName")
    if not isinstance(name, str) or not name:
        raise problems.Problem(
            reasons.PUSH_GENERATOR_NOT_READY,
            f"{ref.kind} {namespace}/{ref.name} has generated no Secret yet (status.secretName); "
            "nothing was sent",
            retriable=True,
        )
    return name


async def read_source(deps: PushDeps, push: push_models.PushSecret, secret_name: str) -> dict[str, str]:
    """The keys to push (selected, rewritten), after the opt-in check; raises ``Problem``."""
    namespace, name = push.metadata.namespace or "", push.metadata.name
    sync = loops.pulling_into(
        deps.syncs_writing(namespace, secret_name),
        namespace=namespace,
        secret=secret_name,
        destination=push.spec.destination,
    )
    if sync is not None:
        raise loops.refusal(namespace=namespace, secret=secret_name, sync=sync)
    try:
        secret = await kube_objects.get(deps.kube, kind="Secret", namespace=namespace, name=secret_name)
    except kube_errors.KubeError as exc:
        raise outcomes.from_kube_error(exc, what=f"reading Secret {namespace}/{secret_name}") from None
    annotations = ((secret or {}).get("metadata") or {}).get("annotations") or {}
    if secret is None or not trust.opted_in(annotations, name, push.spec.destination):
        raise trust.not_opted_in(namespace=namespace, secret=secret_name, push_name=name)
    data: Mapping[str, str] = secret.get("data") or {}
    wanted = push.spec.keys or sorted(data)
    missing = [k for k in wanted if k not in data]
    if missing or not wanted:
        raise problems.Problem(
            reasons.PUSH_SOURCE_EMPTY,
            f"Secret {namespace}/{secret_name} has no key {', '.join(missing)}"
            if missing
            else f"Secret {namespace}/{secret_name} has no keys; nothing was sent",
            retriable=False,
        )
    values: dict[str, str] = {}
    for key in wanted:
        try:
            values[key] = base64.b64decode(data[key], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            # ``from None``: a decode error carries the bytes it choked on.
            raise problems.Problem(
                reasons.PUSH_FAILED,
                f"key {key!r} of Secret {namespace}/{secret_name} is not UTF-8 text: the service holds "
                "text values only; nothing was sent",
            ) from None
    return rewrite.rewrite_keys(values, push.spec.rewrite)


# --- the service --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    project_id: str
    environment: str
    path: str


async def resolve_identity(deps: PushDeps, push: push_models.PushSecret) -> ident_mod.IdentityEntry:
    """The identity after SecretSync's checks (namespace, consent) and the push allow-list."""
    entry = await deps.identities.resolve(push)
    if isinstance(entry.model, identity_models.ClusterMachineIdentity):
        spec = entry.model.spec
        assert isinstance(spec, identity_models.ClusterMachineIdentitySpec)
        refusal = trust.check_cluster_identity(spec, identity=entry.key[2], destination=push.spec.destination)
        if refusal is not None:
            raise refusal
    return entry


async def scope_of(
    deps: PushDeps, entry: ident_mod.IdentityEntry, session: auth.AuthSession, dest: push_models.Destination
) -> Scope:
    project_id = dest.project_id
    if project_id is None:
        assert dest.project_slug is not None
        project_id = await deps.slugs.resolve(ident_mod.key_str(entry.key), dest.project_slug, session)
    return Scope(project_id=project_id, environment=dest.environment, path=dest.path)


async def list_destination(deps: PushDeps, session: auth.AuthSession, scope: Scope) -> dict[str, str]:
    """The folder's own shared secrets (no imports, references unexpanded): what a write replaces."""
    query = models.ListSecretsQuery(
        project_id=scope.project_id,
        environment=scope.environment,
        secret_path=scope.path,
        include_imports=False,
        expand_secret_references=False,
    )

    async def call(client: service_client.ServiceClient) -> models.SecretList | models.NotModified:
        return await deps.routes.list(client, query, etag=None)

    answer = await session.call(call)
    assert isinstance(answer, models.SecretList)  # no etag sent: never NotModified
    return {s.secret_key: s.secret_value for s in answer.secrets if (s.type or "shared") == "shared"}


async def write(
    deps: PushDeps,
    session: auth.AuthSession,
    scope: Scope,
    operation: Literal["create", "update", "delete"],
    key: str,
    value: str | None = None,
) -> str | None:
    """One write through v4, or v3 raw on a host whose list showed it has no v4. Returns the value
    the service answered with, when it shows one (it may trim), for the remote HMAC."""
    v3 = deps.routes.known(session.api_root) == listroutes.V3

    async def call(client: service_client.ServiceClient) -> models.Secret:
        if v3:
            method = {"create": "POST", "update": "PATCH", "delete": "DELETE"}[operation]
            return await client.write_secret_v3(
                method,
                key,
                project_id=scope.project_id,
                environment=scope.environment,
                secret_path=scope.path,
                value=value,
            )
        where: dict[str, Any] = {
            "project_id": scope.project_id,
            "environment": scope.environment,
            "secret_path": scope.path,
        }
        if operation == "create":
            assert value is not None
            return await client.create_secret(key, value=value, **where)
        if operation == "update":
            return await client.update_secret(key, value=value, **where)
        return await client.delete_secret(key, **where)

    answer = await session.call(call)
    metrics.PUSH_WRITES.labels(operation).inc()
    return answer.secret_value if answer.secret_value and not answer.secret_value_hidden else None


def service_problem(exc: service_errors.ServiceError, *, what: str) -> problems.Problem:
    problem = outcomes.from_service_error(exc, scope_text=what)
    if problem.reason in {reasons.SOURCE_NOT_FOUND, reasons.FORBIDDEN} and not exc.is_retriable:
        # Of a write: the folder is missing, or the identity may not write there. Either may be
        # fixed at the service without an event we see: retried with backoff (up to its cap).
        return problems.Problem(reasons.PUSH_FAILED, problem.message, retriable=True)
    return problem

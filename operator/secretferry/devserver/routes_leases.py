"""Dynamic secret leases: create, read, renew and revoke under ``/api/v1/dynamic-secrets/leases``.

Routes, bodies and messages follow the real server's lease router and service (Infisical
``backend/src/ee/routes/v1/dynamic-secret-lease-router.ts`` and
``ee/services/dynamic-secret-lease/dynamic-secret-lease-service.ts``):

- create: body ``dynamicSecretName``, ``projectSlug``, ``environmentSlug``, ``path`` (default ``/``),
  ``ttl`` (``ms`` grammar, at least one minute, at most ten years; default the definition's
  ``defaultTTL``), ``config``; answers ``{lease, dynamicSecret, data}`` — the definition without
  its ``inputs`` (root credentials), and ``data`` the credentials, returned this once only;
- read: query ``projectSlug``, ``environmentSlug``, ``path`` → ``{lease: {…, dynamicSecret}}``;
- renew: body ``ttl``, ``projectSlug``, ``environmentSlug``, ``path`` → ``{lease}``; the new expiry
  is the current expiry plus the TTL, refused (400 "TTL cannot be larger than max ttl") past the
  lease's ``createdAt`` + the definition's ``maxTTL``: a client must then take a new lease;
- revoke: ``DELETE`` with body ``projectSlug``, ``environmentSlug``, ``path``, ``isForced`` →
  ``{lease}``; a provider failure without ``isForced`` keeps the lease with status
  "Failed to delete" (and answers 200, as the real server does); with it the lease goes anyway.

Order of checks as the real service: project (404), membership and the ``lease`` action on
``dynamic-secrets`` for the environment and path (403), folder (404), definition or lease (404);
a lease addressed through another folder than its own is "not found", so a path one may lease
under never reaches another path's leases. Past ``expireAt`` the real service's queue revokes a
lease; here every lease request first revokes the expired ones (the role's ``VALID UNTIL`` has
already shut its password out by then).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool
from pydantic_core import PydanticCustomError

from secretferry.devserver import db as dbm
from secretferry.devserver import globs, sqlprovider, zodrules
from secretferry.devserver.auth import CallerDep, StateDep
from secretferry.devserver.errors import BadRequest, NotFound
from secretferry.devserver.lease_store import Lease, LeaseStore
from secretferry.devserver.permissions import DYNAMIC_SECRETS
from secretferry.devserver.state import DevState
from secretferry.devserver.timeutil import iso

log = logging.getLogger(__name__)
router = APIRouter()
PREFIX = "/api/v1/dynamic-secrets/leases"
LEASE = "lease"  # the real "Dynamic Secrets" action for taking, renewing and revoking leases
MAX_LEASE_LIMIT = 10_000  # the real server's MAX_LEASE_LIMIT default: leases per dynamic secret
_MIN_TTL_MS = 60_000.0  # "TTL must be a greater than 1min"
_MAX_TTL_MS = 10 * 365.25 * 86_400_000.0  # "TTL must be less than 10 years" (ms' year)


def _ttl(value: str | None) -> str | None:
    if not value:
        return value
    millis = zodrules.duration_ms(value)
    if millis is None or millis < _MIN_TTL_MS:
        raise PydanticCustomError("custom", "TTL must be a greater than 1min")
    if millis > _MAX_TTL_MS:
        raise PydanticCustomError("custom", "TTL must be less than 10 years")
    return value


Ttl = Annotated[str | None, AfterValidator(_ttl)]
NonEmpty = Annotated[str, Field(min_length=1)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")  # zod's strip mode


class CreateLease(_Body):
    dynamicSecretName: NonEmpty
    projectSlug: NonEmpty
    ttl: Ttl = None
    path: str = "/"
    environmentSlug: NonEmpty
    config: Any = None


class RenewLease(_Body):
    ttl: Ttl = None
    projectSlug: NonEmpty
    path: NonEmpty = "/"
    environmentSlug: NonEmpty


class RevokeLease(_Body):
    projectSlug: NonEmpty
    path: NonEmpty = "/"
    environmentSlug: NonEmpty
    isForced: StrictBool = False


def leases(state: DevState) -> LeaseStore:
    return state.leases


def _seconds(value: str) -> float:
    millis = zodrules.duration_ms(value)
    if millis is None:
        raise BadRequest(f"Invalid TTL '{value}'")
    return millis / 1000.0


def _definition_by_id(state: DevState, dynamic_secret_id: str) -> dict[str, Any]:
    row = state.db.one("SELECT doc FROM dynamic_secrets WHERE id = ?", (dynamic_secret_id,))
    if row is None:
        raise NotFound(f"Dynamic secret with ID '{dynamic_secret_id}' not found")
    doc: dict[str, Any] = dbm.load(row["doc"])
    return doc


def _sanitized(doc: dict[str, Any]) -> dict[str, Any]:
    """The definition without its ``inputs``: they hold the database's root credentials."""
    return {k: v for k, v in doc.items() if k != "inputs"}


def _scope(state: DevState, caller_id: str, project_slug: str, env_slug: str, path: str) -> tuple[str, str]:
    """(env id, folder path) after the project, permission and folder checks, in the real order."""
    project = state.store.project_by_slug(project_slug)
    if project is None:
        raise NotFound(f"Project with slug '{project_slug}' not found")
    state.permissions.require_member(caller_id, project.id)
    folder_path = globs.normalize_path(path)
    state.permissions.check(
        caller_id,
        project.id,
        state.now(),
        action=LEASE,
        subject=DYNAMIC_SECRETS,
        environment=env_slug,
        secret_path=folder_path,
    )
    env = state.store.environment(project.id, env_slug)
    if env is None or state.store.folder(env.id, folder_path) is None:
        raise NotFound(f"Folder with path '{folder_path}' in environment with slug '{env_slug}' not found")
    return env.id, folder_path


def _lease_in(state: DevState, lease_id: str, env_id: str, folder_path: str) -> Lease:
    lease = leases(state).get(lease_id)
    if lease is None or lease.env_id != env_id or lease.path != folder_path:
        raise NotFound(f"Dynamic secret lease with ID '{lease_id}' not found")
    return lease


async def sweep_expired(state: DevState) -> int:
    """Revoke every lease past its expiry (the real service's revocation queue); returns how many."""
    store = leases(state)
    done = 0
    for lease in store.expired(state.now()):
        try:
            await sqlprovider.revoke(
                _definition_by_id(state, lease.dynamic_secret_id)["inputs"], lease.external_entity_id
            )
        except (sqlprovider.ProviderError, NotFound) as exc:
            store.failed(lease.id, str(exc), state.now())
            continue
        store.delete(lease.id)
        done += 1
    return done


@router.post(PREFIX)
async def create_lease(body: CreateLease, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    await sweep_expired(state)
    env_id, folder_path = _scope(state, caller.identity_id, body.projectSlug, body.environmentSlug, body.path)
    name = body.dynamicSecretName.lower()  # the real schema lower-cases the name
    definition = state.identities.dynamic_secret(env_id, folder_path, name)
    if definition is None:
        raise NotFound(f"Dynamic secret with name '{name}' in folder '{folder_path}' not found")
    store = leases(state)
    if store.count(definition["id"]) >= MAX_LEASE_LIMIT:
        raise BadRequest(f"Max lease limit reached. Limit: {MAX_LEASE_LIMIT}")
    now = state.now()
    expire_at = now + _seconds(body.ttl or str(definition["defaultTTL"]))
    if definition.get("maxTTL") and expire_at > now + _seconds(str(definition["maxTTL"])):
        raise BadRequest("TTL cannot be larger than max TTL")
    try:
        creds = await sqlprovider.create(definition.get("inputs") or {}, iso(expire_at))
    except sqlprovider.ProviderError as exc:
        raise BadRequest(f"Failed to create lease from provider: {exc}") from None
    lease = store.create(
        dynamic_secret_id=definition["id"],
        env_id=env_id,
        path=folder_path,
        entity_id=creds.username,
        expire_at=expire_at,
        now=now,
    )
    return {"lease": lease.wire(), "dynamicSecret": _sanitized(definition), "data": creds.data()}


@router.get(PREFIX + "/{leaseId}")
async def get_lease(
    leaseId: Annotated[str, Path(min_length=1)],
    projectSlug: Annotated[str, Query(min_length=1)],
    environmentSlug: Annotated[str, Query(min_length=1)],
    caller: CallerDep,
    state: StateDep,
    path: str = "/",
) -> dict[str, Any]:
    await sweep_expired(state)
    env_id, folder_path = _scope(state, caller.identity_id, projectSlug, environmentSlug, path)
    lease = _lease_in(state, leaseId, env_id, folder_path)
    definition = _definition_by_id(state, lease.dynamic_secret_id)
    return {"lease": lease.wire() | {"dynamicSecret": _sanitized(definition)}}


@router.post(PREFIX + "/{leaseId}/renew")
async def renew_lease(
    leaseId: Annotated[str, Path(min_length=1)], body: RenewLease, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    await sweep_expired(state)
    env_id, folder_path = _scope(state, caller.identity_id, body.projectSlug, body.environmentSlug, body.path)
    lease = _lease_in(state, leaseId, env_id, folder_path)
    definition = _definition_by_id(state, lease.dynamic_secret_id)
    expire_at = lease.expire_at + _seconds(body.ttl or str(definition["defaultTTL"]))
    max_ttl = definition.get("maxTTL")
    if max_ttl and expire_at > lease.created_at + _seconds(str(max_ttl)):
        raise BadRequest("TTL cannot be larger than max ttl")
    try:
        await sqlprovider.renew(definition.get("inputs") or {}, lease.external_entity_id, iso(expire_at))
    except sqlprovider.ProviderError as exc:
        raise BadRequest(f"Failed to renew lease from provider: {exc}") from None
    return {"lease": leases(state).renewed(lease.id, expire_at, state.now()).wire()}


@router.delete(PREFIX + "/{leaseId}")
async def revoke_lease(
    leaseId: Annotated[str, Path(min_length=1)], body: RevokeLease, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    await sweep_expired(state)
    env_id, folder_path = _scope(state, caller.identity_id, body.projectSlug, body.environmentSlug, body.path)
    lease = _lease_in(state, leaseId, env_id, folder_path)
    definition = _definition_by_id(state, lease.dynamic_secret_id)
    try:
        await sqlprovider.revoke(definition.get("inputs") or {}, lease.external_entity_id)
    except sqlprovider.ProviderError as exc:
        if not body.isForced:
            log.warning("lease revocation failed at the provider; lease kept as 'Failed to delete'")
            return {"lease": leases(state).failed(lease.id, str(exc), state.now()).wire()}
    leases(state).delete(lease.id)
    return {"lease": lease.wire()}

"""Dynamic secret leases: ``/api/v1/dynamic-secrets/leases`` (create, read, renew, revoke).

Fields as the real router takes them (``dynamicSecretName``, ``projectSlug``, ``environmentSlug``,
``path``, ``ttl``; ``isForced`` on revoke). The create answer's ``data`` holds the credentials: it
is kept out of ``repr`` and is only ever handed to the caller, never logged. A refused renewal past
the definition's max TTL is a 400 (``errors.ValidationError``): the caller takes a new lease.
"""

from __future__ import annotations

from typing import Any

import pydantic

from secretferry.service import client_base, models, validation, wire

_BASE = "/api/v1/dynamic-secrets/leases"


class Lease(models.ApiModel):
    """A lease as the service answers it (``DynamicSecretLeasesSchema``)."""

    id: str
    version: int | None = None
    external_entity_id: str | None = pydantic.Field(default=None, repr=False)
    expire_at: models.Timestamp
    status: str | None = None
    status_details: str | None = None
    dynamic_secret_id: str | None = None
    created_at: models.Timestamp | None = None
    updated_at: models.Timestamp | None = None


class LeaseCreated(models.ApiModel):
    lease: Lease
    dynamic_secret: models.DynamicSecret | None = None
    data: dict[str, Any] = pydantic.Field(default_factory=dict, repr=False)
    """The credentials (provider-specific keys, e.g. ``DB_USERNAME``/``DB_PASSWORD``)."""


class _LeaseEnvelope(models.ApiModel):
    lease: Lease


class _WorkspaceEnvelope(models.ApiModel):
    workspace: models.Project


def _location(project_slug: str, environment_slug: str, path: str) -> dict[str, str]:
    validation.non_empty(project_slug, field="projectSlug")
    validation.non_empty(environment_slug, field="environmentSlug")
    return {"projectSlug": project_slug, "environmentSlug": environment_slug, "path": path or "/"}


class LeaseEndpoints(client_base.ClientBase):
    """Lease endpoints, mixed into ``client.ServiceClient``."""

    async def get_project_by_id(self, project_id: str) -> models.Project:
        """``GET /api/v1/workspace/{workspaceId}``: the project (with its slug) for an id; the lease
        routes address projects by slug only."""
        validation.non_empty(project_id, field="workspaceId")
        envelope = await self._authed(
            _WorkspaceEnvelope,
            "GET",
            f"/api/v1/workspace/{wire.segment(project_id)}",
            "/api/v1/workspace/{workspaceId}",
        )
        return envelope.workspace

    async def create_lease(
        self, name: str, *, project_slug: str, environment_slug: str, path: str = "/", ttl: str | None = None
    ) -> LeaseCreated:
        validation.non_empty(name, field="dynamicSecretName")
        body: dict[str, Any] = {"dynamicSecretName": name, **_location(project_slug, environment_slug, path)}
        if ttl:
            body["ttl"] = ttl
        return await self._authed(LeaseCreated, "POST", _BASE, _BASE, json_body=body)

    async def get_lease(
        self, lease_id: str, *, project_slug: str, environment_slug: str, path: str = "/"
    ) -> Lease:
        validation.non_empty(lease_id, field="leaseId")
        params = list(_location(project_slug, environment_slug, path).items())
        envelope = await self._authed(
            _LeaseEnvelope, "GET", f"{_BASE}/{wire.segment(lease_id)}", f"{_BASE}/{{leaseId}}", params=params
        )
        return envelope.lease

    async def renew_lease(
        self,
        lease_id: str,
        *,
        project_slug: str,
        environment_slug: str,
        path: str = "/",
        ttl: str | None = None,
    ) -> Lease:
        validation.non_empty(lease_id, field="leaseId")
        body: dict[str, Any] = _location(project_slug, environment_slug, path)
        if ttl:
            body["ttl"] = ttl
        envelope = await self._authed(
            _LeaseEnvelope,
            "POST",
            f"{_BASE}/{wire.segment(lease_id)}/renew",
            f"{_BASE}/{{leaseId}}/renew",
            json_body=body,
        )
        return envelope.lease

    async def revoke_lease(
        self,
        lease_id: str,
        *,
        project_slug: str,
        environment_slug: str,
        path: str = "/",
        is_forced: bool = False,
    ) -> Lease:
        validation.non_empty(lease_id, field="leaseId")
        body: dict[str, Any] = {**_location(project_slug, environment_slug, path), "isForced": is_forced}
        envelope = await self._authed(
            _LeaseEnvelope,
            "DELETE",
            f"{_BASE}/{wire.segment(lease_id)}",
            f"{_BASE}/{{leaseId}}",
            json_body=body,
        )
        return envelope.lease

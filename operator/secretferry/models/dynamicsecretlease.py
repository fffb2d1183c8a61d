"""The ``DynamicSecretLease`` kind: credentials leased from a dynamic secret, kept in a Secret.

Namespaced, like SecretSync, and for the same reason: the Secret it writes, the identity it leases
through and the workloads it restarts are all in its own namespace, so a tenant who may create one
reaches nothing outside it (README, "DynamicSecretLease", why each field is safe).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal, Self

from pydantic import Field, field_validator, model_validator

from secretferry.models import base, secretsync

DYNAMIC_SECRET_LEASE_KIND: Final = "DynamicSecretLease"
PLURAL: Final = "dynamicsecretleases"
DEFAULT_RENEW_AT_FRACTION: Final = 0.67
"""Renew when two thirds of the lease's current term have passed: a third of the TTL is left for
retries when the service is briefly unreachable (Vault's agent renews at about the same point)."""
MIN_TTL_SECONDS: Final = 60
"""The real service refuses a lease TTL under one minute ("TTL must be a greater than 1min")."""
_MIN_TTL = base.cel("duration(self) >= duration('60s')", "must be at least 60s")

RevocationPolicy = Literal["Revoke", "Retain"]


_ONE_PROJECT = base.cel(
    "has(self.projectId) != has(self.projectSlug)", "set exactly one of projectId and projectSlug"
)


class DynamicSecretRef(base.CRModel, json_schema_extra=base.validations(_ONE_PROJECT)):
    """Which dynamic secret to lease from, at the service."""

    name: str = Field(min_length=1, max_length=256)
    """Name of the dynamic secret, e.g. ``app-db``."""
    project_slug: str | None = Field(default=None, min_length=1, max_length=256)
    """Slug of the project at the service, e.g. ``payments-api``. Set exactly one of projectSlug
    and projectId."""
    project_id: str | None = Field(default=None, min_length=1, max_length=256)
    """ID of the project at the service; the operator looks its slug up (the lease routes address
    projects by slug) through the same identity. Set exactly one of projectSlug and projectId."""
    environment: str = Field(min_length=1, max_length=256)
    """Environment slug, e.g. ``prod``."""
    path: str = Field(default="/", pattern=r"^/", max_length=1024)
    """Folder of the dynamic secret, e.g. ``/`` (the default) or ``/databases``."""

    @model_validator(mode="after")
    def _one_project(self) -> Self:
        if (self.project_id is None) == (self.project_slug is None):
            raise ValueError("set exactly one of projectId and projectSlug")
        return self


class LeaseTarget(base.CRModel):
    """The Secret the lease's credentials are written into, in the lease's own namespace."""

    name: str | None = Field(
        default=None, pattern=base.DNS_SUBDOMAIN_PATTERN, max_length=base.DNS_SUBDOMAIN_MAX
    )
    """Name of the Secret; default: the DynamicSecretLease's own name. Created and owned by the
    DynamicSecretLease (an existing Secret not created by it is never taken over)."""


class DynamicSecretLeaseSpec(base.CRModel):
    """Which dynamic secret to lease from, as which identity, for how long, into which Secret."""

    identity_ref: secretsync.IdentityRef
    """The MachineIdentity (same namespace) or ClusterMachineIdentity (admitting this namespace) to
    lease as; the same rules as a SecretSync's identityRef."""
    dynamic_secret: DynamicSecretRef
    """The dynamic secret to lease from."""
    ttl: str | None = Field(
        default=None,
        min_length=2,
        max_length=32,
        pattern=base.DURATION_PATTERN,
        json_schema_extra=base.validations(_MIN_TTL),
    )
    """Lease lifetime asked for at each lease and renewal, e.g. ``1h``; at least ``60s``. Default:
    the dynamic secret's defaultTTL. The service refuses more than the dynamic secret's maxTTL."""
    renew_at_fraction: float = Field(default=DEFAULT_RENEW_AT_FRACTION, ge=0.1, le=0.9)
    """When to renew, as the fraction of the lease's current term that has passed (0.1 to 0.9,
    default 0.67): with a 1h TTL the lease is renewed about 40 minutes after it was taken or
    last renewed."""
    target: LeaseTarget = Field(default_factory=LeaseTarget)
    """The Secret holding the credentials (the lease's data keys, e.g. ``DB_USERNAME`` and
    ``DB_PASSWORD``)."""
    revocation_policy: RevocationPolicy = "Revoke"
    """What happens to the lease at the service when this DynamicSecretLease is deleted: ``Revoke``
    (default: the credentials stop working at once) or ``Retain`` (they live until the lease
    expires). The Secret goes either way (it is owned)."""
    rollout_restart_targets: list[secretsync.RolloutRestartTarget] = Field(
        default_factory=list, max_length=32
    )
    """Workloads in the same namespace restarted after a new lease changed the Secret's credentials
    (a renewal changes nothing and restarts nothing), e.g. ``[{kind: Deployment, name: web}]``;
    each only when its owner opted in with the annotation ``secretferry.io/restart-on`` on the
    workload, listing this DynamicSecretLease's name."""

    @field_validator("ttl")
    @classmethod
    def _ttl(cls, value: str | None) -> str | None:
        if value is not None and base.parse_duration(value) < MIN_TTL_SECONDS:
            raise ValueError(f"must be at least {MIN_TTL_SECONDS}s")
        return value

    @property
    def ttl_wire(self) -> str | None:
        """The TTL as the service's ``ms`` grammar reads it: whole seconds, e.g. ``3600s``."""
        return None if self.ttl is None else f"{int(base.parse_duration(self.ttl))}s"


class DynamicSecretLeaseStatus(base.StatusModel):
    """The lease held now; written by the operator only. Never a credential."""

    conditions: list[base.Condition] = base.conditions_field()
    """Ready: True (reason Leased) while the Secret holds credentials of a lease that has not
    expired; False with the reason otherwise."""
    observed_generation: int | None = None
    """The metadata.generation last worked on."""
    lease_id: str | None = None
    """ID of the lease at the service (an identifier, not a credential)."""
    lease_created_at: base.Time | None = None
    """When the lease was taken: its max TTL counts from here."""
    expires_at: base.Time | None = None
    """When the lease (and the credentials) expire unless renewed."""
    last_renewed_at: base.Time | None = None
    """When the lease was last taken or renewed: the next renewal is due renewAtFraction of the
    term from here."""
    renew_at: base.Time | None = None
    """When the next renewal (or new lease) is due."""
    max_ttl: str | None = None
    """The dynamic secret's maxTTL as the service reported it (e.g. ``24h``)."""
    renewals: int | None = None
    """How many times this lease was renewed."""
    leases_taken: int | None = None
    """How many leases this object has taken (a new one replaces a lease that can no longer be
    renewed)."""
    target: str | None = None
    """Name of the Secret holding the credentials."""


class DynamicSecretLease(base.CRModel):
    """A parsed ``DynamicSecretLease`` object."""

    KIND: ClassVar[str] = DYNAMIC_SECRET_LEASE_KIND

    metadata: base.ObjectMeta
    spec: DynamicSecretLeaseSpec
    status: DynamicSecretLeaseStatus = Field(default_factory=DynamicSecretLeaseStatus)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        return cls.model_validate(base.lenient_status(body, DynamicSecretLeaseStatus))

    @property
    def target_name(self) -> str:
        return self.spec.target.name or self.metadata.name

"""TemporaryPrivilege: an additional privilege of a machine identity in a project, for a time.

Cluster-scoped on purpose. Granting an identity more access at the service is an administrator's
act: whoever may create one can widen what any identity the granter manages may read. A namespaced
kind would let a tenant (edit rights in one namespace) grant the identity their SecretSyncs use
more access. The CRD is never aggregated into the built-in view/edit/admin roles (chart
``rbac-aggregated.yaml``), so only cluster admins, or whom they bind explicitly, can create one.

``permissions`` are the service's own rules (action, subject, conditions), checked here against
the shapes the real request schemas accept, so that nothing the service would silently drop (a
deny flag, a condition) widens a grant.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Self

from pydantic import Field, model_validator

from secretferry.models import base

TEMPORARY_PRIVILEGE_KIND: Final = "TemporaryPrivilege"
PLURAL: Final = "temporaryprivileges"

# The service's slug rule (lowercase words joined by single hyphens), 1 to 60 characters
# (docs/service-api.md, Limits; service/validation.py checks the same before sending).
SLUG_PATTERN: Final = r"^[a-z0-9]+(-[a-z0-9]+)*$"
SLUG_MAX: Final = 60
# The short form of the service's duration parser (``ms``): a positive number and one unit.
TEMPORARY_RANGE_PATTERN: Final = r"^[1-9][0-9]*(s|m|h|d|w|y)$"
# Rules per privilege: a handful in practice; bounds the object and the request.
MAX_PERMISSIONS: Final = 32
# Subjects whose rules take conditions and ``inverted`` (the real ``ProjectPermissionV2Schema``).
CONDITIONED_SUBJECTS: Final = frozenset(
    {
        "secrets",
        "secret-folders",
        "secret-imports",
        "dynamic-secrets",
        "secret-rotation",
        "secret-syncs",
        "secret-events",
    }
)
# secretName and secretTags are conditions of the ``secrets`` subject only.
_SECRETS_ONLY_CONDITIONS: Final = ("secret_name", "secret_tags")
_SLUG_RE: Final = re.compile(SLUG_PATTERN)


class PermissionConditions(base.CRModel):
    """Where a rule applies; every condition given must hold (absent: anywhere)."""

    environment: str | None = Field(default=None, min_length=1, max_length=64)
    """Environment slug, e.g. ``prod``."""
    secret_path: str | None = Field(default=None, min_length=1, max_length=1024, pattern=r"^/")
    """Folder path glob (sent as ``{$glob: ...}``): ``/app`` is that folder only, ``/app/**`` every
    folder below it too."""
    secret_name: str | None = Field(default=None, min_length=1, max_length=256)
    """Secret key (``secrets`` subject only; needs the service's v2 privilege routes)."""
    secret_tags: list[str] | None = Field(default=None, min_length=1, max_length=16)
    """Tag slugs, any of them (``$in``; ``secrets`` subject only; needs the v2 routes)."""


class Permission(base.CRModel):
    """One rule, as the service writes it (CASL): ``actions`` on ``subject`` under ``conditions``."""

    actions: list[str] = Field(min_length=1, max_length=16)
    """Actions, e.g. ``[read]`` on ``secrets`` (``read``, ``create``, ``edit``, ``delete``), or the
    subject's own (``subscribe-on-updated`` on ``secret-events``)."""
    subject: str = Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z-]*$")
    """Subject, e.g. ``secrets``, ``secret-folders``, ``secret-events``, ``dynamic-secrets``."""
    inverted: bool = False
    """A deny rule (needs the v2 routes). Only on subjects that take conditions."""
    conditions: PermissionConditions | None = None
    """Where the rule applies. Only on subjects that take conditions (the service would drop them
    from the others, which would widen the rule)."""

    model_config = base.CRModel.model_config | {
        "json_schema_extra": base.validations(
            base.cel(
                f"self.subject in {sorted(CONDITIONED_SUBJECTS)}"
                " || (!has(self.conditions) && !self.inverted)",
                "this subject takes neither conditions nor inverted",
            ),
            base.cel(
                "self.subject == 'secrets' || !has(self.conditions)"
                " || (!has(self.conditions.secretName) && !has(self.conditions.secretTags))",
                "secretName and secretTags are conditions of the secrets subject only",
            ),
        )
    }

    @model_validator(mode="after")
    def _shape(self) -> Self:
        if self.subject not in CONDITIONED_SUBJECTS and (self.inverted or self.conditions is not None):
            raise ValueError(f"subject {self.subject} takes neither conditions nor inverted")
        secrets_only = self.conditions is not None and any(
            getattr(self.conditions, f) is not None for f in _SECRETS_ONLY_CONDITIONS
        )
        if secrets_only and self.subject != "secrets":
            raise ValueError("secretName and secretTags are conditions of the secrets subject only")
        return self


class GranterRef(base.CRModel):
    name: str = Field(min_length=1, max_length=base.DNS_SUBDOMAIN_MAX)
    """Name of a ClusterMachineIdentity."""


class TemporaryPrivilegeSpec(base.CRModel):
    """What to grant, to whom, in which project, for how long (and with whose rights)."""

    granter_ref: GranterRef
    """The ClusterMachineIdentity whose login creates, updates and deletes the privilege: it needs
    the rights to edit identities and grant privileges in the project (an admin role). Cluster
    kind only: a namespaced MachineIdentity belongs to a tenant."""
    identity_id: str = Field(min_length=1, max_length=64)
    """Id at the service of the machine identity that receives the privilege (it must be a member
    of the project; a member with the no-access role gets exactly what this grants)."""
    project_slug: str = Field(min_length=1, max_length=64)
    """The project, by slug (the privilege routes address projects by slug)."""
    slug: str | None = Field(default=None, min_length=1, max_length=SLUG_MAX, pattern=SLUG_PATTERN)
    """The privilege's slug at the service. Default: derived from the resource's name."""
    permissions: list[Permission] = Field(min_length=1, max_length=MAX_PERMISSIONS)
    """The rules granted."""
    temporary_range: str | None = Field(default=None, pattern=TEMPORARY_RANGE_PATTERN)
    """How long the grant lasts from its start, e.g. ``30s``, ``15m``, ``1h``, ``7d``. Required
    unless ``permanent``."""
    temporary_access_start_time: base.Time | None = None
    """When the grant starts (RFC 3339). Default: when the operator first created it (kept in
    ``status.startTime``, so an update or a re-creation never extends the grant)."""
    permanent: bool = False
    """A grant with no end. Refused (``PermanentNotAllowed``) unless the operator runs with
    ``SECRETFERRY_ALLOW_PERMANENT_PRIVILEGES=true`` (chart: ``config.allowPermanentPrivileges``)."""

    model_config = base.CRModel.model_config | {
        "json_schema_extra": base.validations(
            # The privilege is found at the service by (identity, project, slug): changing one of
            # them would leave the old privilege granted and unmanaged.
            base.cel(
                "self.identityId == oldSelf.identityId && self.projectSlug == oldSelf.projectSlug"
                " && has(self.slug) == has(oldSelf.slug) && (!has(self.slug) || self.slug == oldSelf.slug)",
                "identityId, projectSlug and slug are immutable: create another TemporaryPrivilege instead",
            ),
            base.cel(
                "self.permanent ? !has(self.temporaryRange) && !has(self.temporaryAccessStartTime)"
                " : has(self.temporaryRange)",
                "set temporaryRange (and optionally temporaryAccessStartTime), or permanent: true alone",
            ),
        )
    }

    @model_validator(mode="after")
    def _window(self) -> Self:
        if self.permanent and (self.temporary_range or self.temporary_access_start_time):
            raise ValueError(
                "a permanent privilege takes neither temporaryRange nor temporaryAccessStartTime"
            )
        if not self.permanent and not self.temporary_range:
            raise ValueError("set temporaryRange, or permanent: true")
        return self


class TemporaryPrivilegeStatus(base.StatusModel):
    """What the service holds for this resource; written by the operator only."""

    conditions: list[base.Condition] = base.conditions_field()
    """Ready: the privilege at the service matches the spec (reason Granted), or why not. Active:
    True while the grant is in its window (Active), False before it (Pending), after it (Expired) or
    while it does not exist (NotGranted)."""
    observed_generation: int | None = None
    """The metadata.generation the conditions describe."""
    privilege_id: str | None = None
    """The privilege's id at the service."""
    slug: str | None = None
    """The privilege's slug at the service."""
    start_time: base.Time | None = None
    """Start of the window (spec.temporaryAccessStartTime, or when it was first created)."""
    expires_at: base.Time | None = None
    """End of the window, as the service computed it (start + range); absent for a permanent one."""
    last_checked_time: base.Time | None = None
    """When the operator last read the privilege back from the service."""


class TemporaryPrivilege(base.CRModel):
    """A parsed ``TemporaryPrivilege`` object."""

    KIND: ClassVar[str] = TEMPORARY_PRIVILEGE_KIND

    metadata: base.ObjectMeta
    spec: TemporaryPrivilegeSpec
    status: TemporaryPrivilegeStatus = Field(default_factory=TemporaryPrivilegeStatus)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        """Parse a raw object body; raises pydantic.ValidationError for an invalid spec."""
        return cls.model_validate(base.lenient_status(body, TemporaryPrivilegeStatus))

    @property
    def privilege_slug(self) -> str:
        return self.spec.slug or slug_for(self.metadata.name)


def slug_for(name: str) -> str:
    """A valid service slug from an object name (DNS subdomain: dots become hyphens). A name too
    long for the 60 characters keeps its start and gets 8 hex digits of its hash, so two long
    names never share a slug by truncation."""
    slug = re.sub(r"-+", "-", name.replace(".", "-")).strip("-")
    if len(slug) > SLUG_MAX or not _SLUG_RE.fullmatch(slug):
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        slug = f"{slug[: SLUG_MAX - 9].strip('-')}-{digest}"
    return slug

"""PushSecret: a Secret of its own namespace (or a generator's Secret) written to the service.

The reverse of a SecretSync: Kubernetes is the source, a project/environment/path at the service
the destination. Who may push what where is decided in ``reconcile/push/trust.py`` (README,
"Security model"); this module is only the shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal, Self

from pydantic import Field, field_validator, model_validator

from secretferry.models import base, keyrewrite
from secretferry.models import secretsync as sync_models

PUSH_SECRET_KIND: Final = "PushSecret"
PLURAL: Final = "pushsecrets"
GENERATOR_KINDS: Final = ("PasswordGenerator", "UUIDGenerator")
GeneratorKind = Literal["PasswordGenerator", "UUIDGenerator"]
MAX_KEYS: Final = 256  # a push is a handful of keys; bounds the status and the writes per change

_ONE_SOURCE = base.cel(
    "has(self.secret) != has(self.generatorRef)",
    "set exactly one of selector.secret and selector.generatorRef",
)
_ONE_PROJECT = base.cel(
    "has(self.projectId) != has(self.projectSlug)", "set exactly one of projectId and projectSlug"
)


class SecretSelector(base.CRModel):
    """A Secret in the PushSecret's own namespace. It must carry the annotations
    ``secretferry.io/allow-push`` naming this PushSecret (or ``*``) and
    ``secretferry.io/allow-push-to`` listing the destination (``<project>/<env>/<path prefix>``)."""

    name: str = Field(pattern=base.DNS_SUBDOMAIN_PATTERN, max_length=base.DNS_SUBDOMAIN_MAX)
    """Name of the Secret, e.g. ``db-admin``."""


class GeneratorRef(base.CRModel):
    """A generator in the PushSecret's own namespace; its Secret (``status.secretName``) is pushed,
    and must carry ``secretferry.io/allow-push`` and ``allow-push-to`` like any other source
    Secret."""

    kind: GeneratorKind
    """``PasswordGenerator`` (key ``password``) or ``UUIDGenerator`` (key ``uuid``)."""
    name: str = Field(pattern=base.DNS_SUBDOMAIN_PATTERN, max_length=base.DNS_SUBDOMAIN_MAX)
    """Name of the generator."""


class Selector(base.CRModel, json_schema_extra=base.validations(_ONE_SOURCE)):
    """What is pushed: set exactly one of secret and generatorRef."""

    secret: SecretSelector | None = None
    """A Secret in this namespace that opted in to this push."""
    generator_ref: GeneratorRef | None = None
    """A PasswordGenerator or UUIDGenerator in this namespace."""

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.secret is None) == (self.generator_ref is None):
            raise ValueError("set exactly one of selector.secret and selector.generatorRef")
        return self


class Destination(base.CRModel, json_schema_extra=base.validations(_ONE_PROJECT)):
    """Where the keys are written at the service (one folder)."""

    project_id: str | None = Field(default=None, min_length=1, max_length=256)
    """ID of the project. Set exactly one of projectId and projectSlug."""
    project_slug: str | None = Field(default=None, min_length=1, max_length=256)
    """Slug of the project, e.g. ``payments-api``. Set exactly one of projectId and projectSlug."""
    environment: str = Field(min_length=1, max_length=256)
    """Environment slug, e.g. ``prod``."""
    path: str = Field(default="/", pattern=r"^/", max_length=1024)
    """Folder the keys are written to, e.g. ``/`` (the default) or ``/shared/db``; it must exist."""

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.project_id is None) == (self.project_slug is None):
            raise ValueError("set exactly one of projectId and projectSlug")
        return self


class PushSecretSpec(base.CRModel):
    """What to push, as whom, where, and what to do with values changed at the service."""

    identity_ref: sync_models.IdentityRef
    """The MachineIdentity (this namespace) or ClusterMachineIdentity to write as. A
    ClusterMachineIdentity pushes only where its spec.pushAllowed says (else PushNotAllowed)."""
    selector: Selector
    """The Secret or generator whose keys are pushed."""
    keys: list[str] = Field(default_factory=list, max_length=MAX_KEYS)
    """Only these keys of the Secret (before rewriting); empty: every key."""
    rewrite: list[keyrewrite.RewriteRule] = Field(default_factory=list, max_length=keyrewrite.MAX_RULES)
    """Key rewriting rules applied in order before the keys are written (as in a SecretSync
    source), e.g. ``[{addPrefix: DB_}]``."""
    destination: Destination
    """The project, environment and folder written to."""
    update_policy: Literal["Replace", "IfNotExists"] = "Replace"
    """What to do with a key whose value at the service is not the one this PushSecret last wrote
    (changed at the service, or there before): Replace (default) overwrites it; IfNotExists leaves
    it and reports PushConflict. Either way the conflict is named in status (key, never value)."""
    deletion_policy: Literal["Delete", "Retain"] = "Retain"
    """When a key leaves the source, or the PushSecret is deleted: Delete removes what this
    PushSecret wrote at the service (not a value someone changed since, unless updatePolicy is
    Replace); Retain (default) leaves it."""
    refresh_interval: str | None = Field(default=None, pattern=base.DURATION_PATTERN, max_length=32)
    """Also re-check the destination this often (e.g. ``10m``) and repair what changed there;
    absent (default): pushed only when the source or the spec changes — no calls at rest."""

    @field_validator("keys")
    @classmethod
    def _keys(cls, keys: list[str]) -> list[str]:
        for key in keys:
            if not sync_models.is_data_key(key):
                raise ValueError(f"{key!r} is not a valid Secret data key")
        return keys

    @property
    def refresh_interval_seconds(self) -> float | None:
        if not self.refresh_interval:
            return None
        seconds = base.parse_duration(self.refresh_interval)
        return seconds if seconds > 0 else None


class PushedKey(base.StatusModel):
    """One key this PushSecret wrote, as HMACs (never the value)."""

    key: str
    """The key at the service."""
    source_hmac: str = Field(alias="sourceHMAC")
    """HMAC of the value pushed (keyed per operator install and PushSecret)."""
    remote_hmac: str = Field(alias="remoteHMAC")
    """HMAC of the value the service held after the write: a different one later means it was
    changed there (PushConflict)."""


class PushSecretStatus(base.StatusModel):
    """What the operator last pushed; written by the operator only."""

    conditions: list[base.Condition] = base.conditions_field()
    """Ready: True (reason Pushed) when every key is at the service as pushed; False with the
    reason otherwise (PushConflict names the keys). Conflict: True when a value was found changed
    at the service (Replace overwrote it; IfNotExists left it)."""
    observed_generation: int | None = None
    """The metadata.generation the last pass worked on."""
    destination: str | None = None
    """The destination as text, ``<project>/<environment><path>`` (the Destination column)."""
    pushed_keys: list[PushedKey] | None = None
    """The keys this PushSecret wrote and what it left there, as HMACs."""
    pushed_key_count: int | None = None
    """How many keys pushedKeys names (the Keys column)."""
    conflicts: list[str] | None = None
    """Keys found changed at the service on the last pass (never values)."""
    last_push_time: base.Time | None = None
    """When a pass last wrote to the service."""


class PushSecret(base.CRModel):
    """A parsed ``PushSecret`` object."""

    KIND: ClassVar[str] = PUSH_SECRET_KIND

    metadata: base.ObjectMeta
    spec: PushSecretSpec
    status: PushSecretStatus = Field(default_factory=PushSecretStatus)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        """Parse a raw object body; raises pydantic.ValidationError for an invalid spec."""
        return cls.model_validate(base.lenient_status(body, PushSecretStatus))

"""SecretSync: which secrets to copy from the service into which Kubernetes object."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar, Final, Literal, Self

from pydantic import Field, field_validator, model_validator

from secretferry.models import base, labels

SECRET_SYNC_KIND: Final = "SecretSync"

# Keys of Secret/ConfigMap data, as the apiserver validates them.
DATA_KEY_PATTERN: Final = r"^[-._a-zA-Z0-9]+$"
DATA_KEY_MAX: Final = 253
_DATA_KEY_RE: Final = re.compile(DATA_KEY_PATTERN)

# A SecretSync is one scope list per cycle; 20 sources already costs 20 list calls.
MAX_SOURCES: Final = 20
# Smallest refresh interval: below a second the resync loop would only burn CPU and API quota.
MIN_REFRESH_SECONDS: Final = 1
# spec.refreshInterval when the manifest leaves it out. The CRD schema carries it as its default,
# so the apiserver fills it in: every SecretSync we read has one, and no operator setting can
# change it.
DEFAULT_REFRESH_INTERVAL: Final = "5m"

# Never written, whatever the spec says: the apiserver mints ServiceAccount tokens (a synced copy
# would be a forged one), and Helm trusts its release records (a forged one would steer the next
# `helm upgrade`). reconcile/guards.py refuses existing objects of these types too.
FORBIDDEN_SECRET_TYPES: Final = ("kubernetes.io/service-account-token", "helm.sh/release.v1")

CreationPolicy = Literal["Owner", "Orphan", "Merge"]
DeletionPolicy = Literal["Retain", "Delete"]
TargetKind = Literal["Secret", "ConfigMap"]
IdentityKind = Literal["MachineIdentity", "ClusterMachineIdentity"]

_ONE_PROJECT = base.cel(
    "has(self.projectId) != has(self.projectSlug)", "set exactly one of projectId and projectSlug"
)
_CONFIGMAP_UNTYPED = base.cel(
    "self.kind == 'Secret' || self.type == 'Opaque'", "a ConfigMap target has no type", field_path=".type"
)
_FORBIDDEN_TYPES_TEXT: Final = " or ".join(FORBIDDEN_SECRET_TYPES)
_NO_FORBIDDEN_TYPE = base.cel(
    "!(self.type in [" + ", ".join(f"'{t}'" for t in FORBIDDEN_SECRET_TYPES) + "])",
    f"Secrets of type {_FORBIDDEN_TYPES_TEXT} cannot be synced",
    field_path=".type",
)
_NO_MERGE_FROM = base.cel(
    f"!has(self.annotations) || !('{labels.MERGE_FROM_ANNOTATION}' in self.annotations)",
    f"{labels.MERGE_FROM_ANNOTATION} is set by the target's owner, not by a SecretSync",
    field_path=".annotations",
)
_MIN_REFRESH = base.cel(
    f"duration(self) >= duration('{MIN_REFRESH_SECONDS}s')", f"must be at least {MIN_REFRESH_SECONDS}s"
)


def is_data_key(key: str) -> bool:
    """Whether ``key`` may be a key of Secret or ConfigMap data."""
    return len(key) <= DATA_KEY_MAX and _DATA_KEY_RE.match(key) is not None


class IdentityRef(base.CRModel):
    kind: IdentityKind = "MachineIdentity"
    """A namespaced MachineIdentity must live in the SecretSync's namespace."""
    name: str = Field(pattern=base.DNS_SUBDOMAIN_PATTERN, max_length=base.DNS_SUBDOMAIN_MAX)


# The service reads ``metadataFilter=key=a,value=b|key=c,value=d`` by splitting on "|", "," and "="
# and trimming, and silently drops a pair with an empty key or value (which would widen the sync to
# every secret): so neither may be empty, carry a separator, or start or end with whitespace.
_METADATA_TEXT = r"^[^|,=\s]([^|,=]*[^|,=\s])?$"
METADATA_FILTER_MAX = 10
"""More pairs than this are refused by the service (422)."""


class MetadataFilter(base.CRModel):
    key: str = Field(min_length=1, max_length=256, pattern=_METADATA_TEXT)
    value: str = Field(min_length=1, max_length=1024, pattern=_METADATA_TEXT)


class Source(base.CRModel, json_schema_extra=base.validations(_ONE_PROJECT)):
    """One list call at the service. Keys of later sources override keys of earlier ones."""

    project_id: str | None = Field(default=None, min_length=1, max_length=256)
    project_slug: str | None = Field(default=None, min_length=1, max_length=256)
    environment: str = Field(min_length=1, max_length=256)
    """Environment slug, e.g. ``prod``."""
    path: str = Field(default="/", pattern=r"^/", max_length=1024)
    recursive: bool = False
    """Also list every folder below ``path``. The service lists 20 folders deep at most and says
    nothing when it stops: a listing that reaches that depth is not synced (SourceTooDeep)."""
    include_imports: bool = True
    expand_references: bool = True
    tag_slugs: list[str] = Field(default_factory=list, max_length=32)
    metadata_filter: list[MetadataFilter] = Field(default_factory=list, max_length=METADATA_FILTER_MAX)
    include_keys: list[str] = Field(default_factory=list, max_length=256)
    """Glob patterns (``*``, ``?``, ``[abc]``); when set, only matching keys are taken."""
    exclude_keys: list[str] = Field(default_factory=list, max_length=256)
    """Glob patterns; matching keys are dropped (after includeKeys)."""

    @model_validator(mode="after")
    def _one_project(self) -> Self:
        if (self.project_id is None) == (self.project_slug is None):
            raise ValueError("set exactly one of projectId and projectSlug")
        return self


class Template(base.CRModel):
    """Jinja2 templates rendered in a sandbox; each secret is a variable and in ``secrets``.

    Without a template every fetched key is written as it is. With one, only the templated keys
    are written unless ``includeAll`` is true, in which case the fetched keys are written too and
    templated keys override them.
    """

    data: dict[str, str] = Field(default_factory=dict, max_length=1024)
    """Target key -> template."""
    include_all: bool = False

    @field_validator("data")
    @classmethod
    def _keys(cls, data: dict[str, str]) -> dict[str, str]:
        bad = sorted(k for k in data if not is_data_key(k))
        if bad:
            raise ValueError(f"invalid data keys {bad} (allowed: letters, digits, '-', '_', '.')")
        return data

    @model_validator(mode="after")
    def _not_empty(self) -> Self:
        if not self.data and not self.include_all:
            raise ValueError("template.data is empty and includeAll is false: nothing would be written")
        return self


class Target(
    base.CRModel, json_schema_extra=base.validations(_CONFIGMAP_UNTYPED, _NO_FORBIDDEN_TYPE, _NO_MERGE_FROM)
):
    name: str | None = Field(
        default=None, pattern=base.DNS_SUBDOMAIN_PATTERN, max_length=base.DNS_SUBDOMAIN_MAX
    )
    """Name of the Secret/ConfigMap in the SecretSync's namespace; default: the SecretSync's name."""
    kind: TargetKind = "Secret"
    """ConfigMap is for non-sensitive data only."""
    type: str = Field(default="Opaque", min_length=1, max_length=253)
    """Secret type. Ignored with creationPolicy Merge: the existing object keeps its own."""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    template: Template | None = None
    creation_policy: CreationPolicy = "Owner"
    """Owner: create it, owned (garbage-collected with the SecretSync). Orphan: create it, unowned.
    Merge: write our keys into an existing object someone else owns, which must name this
    SecretSync in its secretferry.io/merge-from annotation."""
    deletion_policy: DeletionPolicy = "Retain"
    """Keys that vanish at the service: Retain keeps them in the target, Delete removes them."""

    @model_validator(mode="after")
    def _type(self) -> Self:
        if self.kind == "ConfigMap" and self.type != "Opaque":
            raise ValueError("a ConfigMap target has no type")
        if self.type in FORBIDDEN_SECRET_TYPES:
            raise ValueError(f"Secrets of type {_FORBIDDEN_TYPES_TEXT} cannot be synced")
        if labels.MERGE_FROM_ANNOTATION in self.annotations:
            raise ValueError(
                f"{labels.MERGE_FROM_ANNOTATION} is set by the target's owner, not by a SecretSync"
            )
        return self


class RolloutRestartTarget(base.CRModel):
    kind: Literal["Deployment", "StatefulSet", "DaemonSet", "Rollout"]
    name: str = Field(pattern=base.DNS_SUBDOMAIN_PATTERN, max_length=base.DNS_SUBDOMAIN_MAX)


class SecretSyncSpec(base.CRModel):
    identity_ref: IdentityRef
    sources: list[Source] = Field(min_length=1, max_length=MAX_SOURCES)
    target: Target = Field(default_factory=Target)
    refresh_interval: str = Field(
        default=DEFAULT_REFRESH_INTERVAL,
        min_length=2,
        max_length=32,  # bounds CEL cost; "1000h59m59s" is 11 characters
        pattern=base.DURATION_PATTERN,
        json_schema_extra=base.validations(_MIN_REFRESH),
    )
    """How often to re-read the service (30s, 5m, 1h30m). Stretched while an event stream is healthy."""
    instant_updates: bool = True
    """Subscribe to the service's event stream and sync on change notifications."""
    rollout_restart_targets: list[RolloutRestartTarget] = Field(default_factory=list, max_length=32)
    """Workloads in the same namespace restarted after the target's data changes."""
    allow_empty: bool = False
    """Sync a source that lists no secrets (or whose key filters keep none). By default such a
    source stops the sync (SourceEmpty) and the target stays as it is: a mistyped or deleted path
    answers exactly like an empty folder, and must not empty a Secret."""

    @field_validator("refresh_interval")
    @classmethod
    def _duration(cls, value: str) -> str:
        if base.parse_duration(value) < MIN_REFRESH_SECONDS:
            raise ValueError(f"must be at least {MIN_REFRESH_SECONDS}s")
        return value

    @property
    def refresh_interval_seconds(self) -> float:
        return base.parse_duration(self.refresh_interval)


class TargetStatus(base.CRModel):
    kind: TargetKind
    name: str


class SecretSyncStatus(base.CRModel):
    conditions: list[base.Condition] = base.conditions_field()
    observed_generation: int | None = None
    last_sync_time: datetime | None = None
    synced_keys: list[str] = Field(default_factory=list)
    """Names of the keys this SecretSync wrote (never values)."""
    synced_key_count: int | None = None
    update_mode: Literal["Streaming", "Polling"] | None = None
    update_mode_reason: str | None = None
    data_hmac: str | None = Field(default=None, alias="dataHMAC")
    """Keyed HMAC-SHA256 of the written data: shows a change without revealing anything."""
    target: TargetStatus | None = None
    """The object last written, to find it again after spec.target changes."""


class SecretSync(base.CRModel):
    """A parsed ``SecretSync`` object."""

    KIND: ClassVar[str] = SECRET_SYNC_KIND

    metadata: base.ObjectMeta
    spec: SecretSyncSpec
    status: SecretSyncStatus = Field(default_factory=SecretSyncStatus)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        """Parse a raw object body; raises pydantic.ValidationError for an invalid spec."""
        return cls.model_validate(base.lenient_status(body, SecretSyncStatus))

    @property
    def target_name(self) -> str:
        """The target object's name: ``spec.target.name``, else the SecretSync's own name."""
        return self.spec.target.name or self.metadata.name

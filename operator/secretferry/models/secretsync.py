"""SecretSync: which secrets to copy from the service into which Kubernetes object."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal, Self

from pydantic import Field, field_validator, model_validator

from secretferry.models import base, generators, keydecoding, keyrewrite, labels, reserved, templatefrom

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
# would be a forged one), Helm trusts its release records (a forged one would steer the next
# `helm upgrade`), and the apiserver's bootstrap authenticator accepts bootstrap tokens (in
# kube-system) as credentials. reconcile/guards.py refuses existing objects of these types too,
# and every other type in a domain another controller owns (models/reserved.py).
FORBIDDEN_SECRET_TYPES: Final = (
    "kubernetes.io/service-account-token",
    "helm.sh/release.v1",
    "bootstrap.kubernetes.io/token",
)

CreationPolicy = Literal["Owner", "Orphan", "Merge"]
DeletionPolicy = Literal["Retain", "Delete"]
TargetKind = Literal["Secret", "ConfigMap"]
IdentityKind = Literal["MachineIdentity", "ClusterMachineIdentity"]
RefreshPolicy = Literal["Periodic", "OnChange", "CreatedOnce"]

_ONE_PROJECT = base.cel(
    "has(self.generatorRef) || (has(self.projectId) != has(self.projectSlug) && has(self.environment))",
    "set exactly one of projectId and projectSlug, and environment (or generatorRef instead)",
)
_GENERATOR_ALONE = base.cel(
    "!has(self.generatorRef) || (!has(self.projectId) && !has(self.projectSlug) && !has(self.environment))",
    "a generatorRef source names no projectId, projectSlug or environment",
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
# The built-in part of models/reserved.py, refused at admission too. Only what a CEL rule does
# cheaply (the operator's check also holds the admin's additions): a map of at most
# MAX_TARGET_METADATA keys keeps a regex per key inside the apiserver's cost budget.
MAX_TARGET_METADATA: Final = 256
_RESERVED_RE: Final = reserved.domain_pattern()
_DESCRIPTIVE: Final = "[" + ", ".join(f"'{k}'" for k in sorted(reserved.DESCRIPTIVE_KEYS)) + "]"
_USER_TYPES: Final = "[" + ", ".join(f"'{t}'" for t in sorted(reserved.USER_SECRET_TYPES)) + "]"
_DOMAINS_TEXT: Final = ", ".join(reserved.RESERVED_DOMAINS)
_NO_HELM_OWNER = base.cel(
    "!has(self.labels) || !('owner' in self.labels) || self.labels['owner'] != 'helm'",
    "the label owner=helm marks Helm's release records; no SecretSync sets it",
    field_path=".labels",
)
_NO_RESERVED_LABELS = base.cel(
    f"!has(self.labels) || self.labels.all(k, !k.matches('{_RESERVED_RE}') || k in {_DESCRIPTIVE})",
    f"labels in the domains {_DOMAINS_TEXT} (and their subdomains) are read by other controllers;"
    " no SecretSync sets them (app.kubernetes.io/name, version, component and part-of excepted)",
    field_path=".labels",
)
_NO_RESERVED_ANNOTATIONS = base.cel(
    f"!has(self.annotations) || self.annotations.all(k, !k.matches('{_RESERVED_RE}') || k in {_DESCRIPTIVE})",
    f"annotations in the domains {_DOMAINS_TEXT} (and their subdomains) are read by other"
    " controllers; no SecretSync sets them",
    field_path=".annotations",
)
_NO_RESERVED_TYPE = base.cel(
    f"!self.type.matches('{_RESERVED_RE}') || self.type in {_USER_TYPES}",
    f"Secret types in the domains {_DOMAINS_TEXT} other than {', '.join(sorted(reserved.USER_SECRET_TYPES))}"
    " mean something to a controller; no SecretSync writes them",
    field_path=".type",
)
_MIN_REFRESH = base.cel(
    f"duration(self) >= duration('{MIN_REFRESH_SECONDS}s')", f"must be at least {MIN_REFRESH_SECONDS}s"
)


def is_data_key(key: str) -> bool:
    """Whether ``key`` may be a key of Secret or ConfigMap data: apimachinery's IsConfigMapKey,
    which also refuses ``.``, ``..`` and any key starting with ``..`` (a volume mount would read
    them as directories: the kubelet keeps its own ``..data`` link there)."""
    if key in {".", ".."} or key.startswith(".."):
        return False
    return len(key) <= DATA_KEY_MAX and _DATA_KEY_RE.match(key) is not None


class IdentityRef(base.CRModel):
    """The MachineIdentity or ClusterMachineIdentity a SecretSync logs in to the service as."""

    kind: IdentityKind = "MachineIdentity"
    """``MachineIdentity`` (default) or ``ClusterMachineIdentity``. A MachineIdentity must be in the
    SecretSync's namespace; a ClusterMachineIdentity must admit that namespace in its
    allowedNamespaces (else IdentityNotAllowed and nothing is fetched)."""
    name: str = Field(pattern=base.DNS_SUBDOMAIN_PATTERN, max_length=base.DNS_SUBDOMAIN_MAX)
    """Name of the identity, e.g. ``app-identity``; a MachineIdentity is looked up in the
    SecretSync's own namespace."""


# The service reads ``metadataFilter=key=a,value=b|key=c,value=d`` by splitting on "|", "," and "="
# and trimming, and silently drops a pair with an empty key or value (which would widen the sync to
# every secret): so neither may be empty, carry a separator, or start or end with whitespace.
_METADATA_TEXT = r"^[^|,=\s]([^|,=]*[^|,=\s])?$"
METADATA_FILTER_MAX = 10
"""More pairs than this are refused by the service (422)."""


class MetadataFilter(base.CRModel):
    """One metadata pair a secret must carry at the service to be synced."""

    key: str = Field(min_length=1, max_length=256, pattern=_METADATA_TEXT)
    """Metadata key, e.g. ``team``: no ``|``, ``,`` or ``=``, and no whitespace at either end."""
    value: str = Field(min_length=1, max_length=1024, pattern=_METADATA_TEXT)
    """Value the metadata key must have, e.g. ``payments``; the same characters as key."""


class Source(base.CRModel, json_schema_extra=base.validations(_ONE_PROJECT, _GENERATOR_ALONE)):
    """One list call at the service, or one generator's value (``generatorRef``). Keys of later
    sources override keys of earlier ones."""

    generator_ref: generators.GeneratorRef | None = None
    """Instead of a service scope: a PasswordGenerator or UUIDGenerator in the SecretSync's own
    namespace, e.g. ``{kind: PasswordGenerator, name: db}``, whose key (``password`` or ``uuid``)
    joins the merged values like a fetched secret (includeKeys, rewrite and decoding apply; no
    service call). Read from the Secret the generator owns; a regeneration re-syncs at once. Not
    generated yet, or missing: GeneratorNotReady / GeneratorNotFound, the target keeps what it has."""

    project_id: str | None = Field(default=None, min_length=1, max_length=256)
    """ID of the project at the service. Set exactly one of projectId and projectSlug."""
    project_slug: str | None = Field(default=None, min_length=1, max_length=256)
    """Slug of the project at the service, e.g. ``payments-api``, which the operator resolves to its
    ID. Set exactly one of projectId and projectSlug."""
    environment: str | None = Field(default=None, min_length=1, max_length=256)
    """Environment slug, e.g. ``prod``; required unless generatorRef is set."""
    path: str = Field(default="/", pattern=r"^/", max_length=1024)
    """Folder to list, e.g. ``/`` (the default) or ``/backend/db``. A literal path, not a glob."""
    recursive: bool = False
    """Also list every folder below ``path``. The service lists 20 folders deep at most and says
    nothing when it stops: a listing that reaches that depth is not synced (SourceTooDeep)."""
    include_imports: bool = True
    """Also take the secrets imported into the folder (default true); the folder's own secrets
    override imported ones with the same key."""
    expand_references: bool = True
    """Have the service expand secret references such as ``${DB_HOST}`` or ``${prod.db.HOST}`` in
    values (default true)."""
    tag_slugs: list[str] = Field(default_factory=list, max_length=32)
    """Only secrets carrying at least one of these tags (slugs, e.g. ``backend``); empty: any."""
    metadata_filter: list[MetadataFilter] = Field(default_factory=list, max_length=METADATA_FILTER_MAX)
    """Only secrets whose metadata has every listed pair (at most 10); empty: any."""
    include_keys: list[str] = Field(default_factory=list, max_length=256)
    """Key globs to keep, e.g. ``DB_*``; empty keeps every key. Python fnmatch syntax, matched
    case-sensitively against the whole key name: ``*`` any characters, ``?`` one character,
    ``[abc]`` / ``[!abc]`` a set (``[*]`` for a literal ``*``); no ``**``, braces or backslash escapes."""
    exclude_keys: list[str] = Field(default_factory=list, max_length=256)
    """Key globs to drop, e.g. ``*_TEST``, applied after includeKeys; the same syntax as includeKeys."""
    rewrite: list[keyrewrite.RewriteRule] = Field(default_factory=list, max_length=keyrewrite.MAX_RULES)
    """Rules that rename this source's keys after includeKeys/excludeKeys, applied in list order
    to every key, before templates see them (at most 32), e.g. ``[{from: DB_PASSWORD, to:
    password}, {stripPrefix: APP_}, {regexp: {source: "-", target: "_"}}, {transform: Lower}]``.
    Two keys renamed to the same name stop the sync (KeyCollision); nothing is written."""
    decoding_strategy: keydecoding.DecodingStrategy = "None"
    """How this source's values are decoded before templates see them and the target holds them:
    ``None`` (default, as they are), ``Base64``, ``Base64URL`` (decoded to bytes; a value that is
    not valid stops the sync: DecodingFailed) or ``Auto`` (decoded when the value is canonical
    base64 or base64url, else kept as it is; a plain word such as ``password`` is canonical
    base64 too: README, "Binary values"). Applied after rewrite; decoded bytes that are not UTF-8
    go into the Secret's data as they are (a ConfigMap's binaryData)."""
    decoding: list[keydecoding.DecodingRule] = Field(default_factory=list, max_length=keydecoding.MAX_RULES)
    """Per-key strategies overriding decodingStrategy (at most 32), the first rule whose glob matches
    the key (as rewrite left it) wins, e.g. ``[{keys: "*.p12", strategy: Base64}]``."""

    @model_validator(mode="after")
    def _one_project(self) -> Self:
        if self.generator_ref is not None:
            if self.project_id is not None or self.project_slug is not None or self.environment is not None:
                raise ValueError("a generatorRef source names no projectId, projectSlug or environment")
            return self
        if (self.project_id is None) == (self.project_slug is None):
            raise ValueError("set exactly one of projectId and projectSlug")
        if self.environment is None:
            raise ValueError("environment is required (or generatorRef instead)")
        return self


class Template(base.CRModel):
    """Jinja2 templates rendered in a sandbox; each secret is a variable and in ``secrets``.

    Without a template every fetched key is written as it is. With one, only the templated keys
    are written unless ``includeAll`` is true, in which case the fetched keys are written too and
    templated keys override them. Templates come from ``templateFrom`` (in list order, later
    entries overriding earlier ones) and then ``data``, which overrides them all.
    """

    template_from: list[templatefrom.TemplateFrom] = Field(
        default_factory=list, max_length=templatefrom.MAX_ENTRIES
    )
    """ConfigMaps or Secrets in the SecretSync's namespace whose keys are templates (at most 16),
    e.g. ``[{configMap: {name: db-templates}}, {secret: {name: tls-templates, keys: [tls.crt]}}]``:
    each key is the template of the target key of the same name. Later entries override earlier
    ones, and ``data`` overrides them all. A source is used only when it carries the label
    ``secretferry.io/template-source: "true"`` (TemplateSourceNotLabelled) and holds at most 64 KiB
    (TemplateSourceTooLarge); a missing one stops the sync (TemplateSourceMissing), the target
    keeping what it has. A change to a source re-renders every SecretSync using it. Like ``data``,
    needs the identity's template opt-in."""

    data: dict[str, str] = Field(default_factory=dict, max_length=1024)
    """Target key -> Jinja2 template, e.g.
    ``DATABASE_URL: "postgres://{{ DB_USER }}:{{ secrets['db-pass'] | urlencode }}@db:5432/app"``.
    A template sees each fetched secret as a variable when its key is an identifier, all of them in
    the dict ``secrets``, and Jinja's filters plus b64enc, b64dec, b64dec_bytes, tojson and fromjson;
    an undefined name is an error. A value that is bytes, not UTF-8 text (decodingStrategy), is an
    opaque binary value: ``b64enc`` makes base64 text of it, and a template whose whole output is
    one binary value (``{{ KEYSTORE }}``, ``{{ KEYSTORE_B64 | b64dec_bytes }}``) writes its bytes.
    It runs in Jinja's immutable sandbox in a worker process limited (operator defaults) to 1 s
    CPU, 64 MiB memory, 5 s wall clock and 1 MiB output for all keys together, with range() capped
    at 10,000 items (over a limit: TemplateError)."""
    include_all: bool = False
    """Also write every fetched key as it is, templated keys overriding them. Default false: only the
    templated keys are written."""

    @field_validator("data")
    @classmethod
    def _keys(cls, data: dict[str, str]) -> dict[str, str]:
        bad = sorted(k for k in data if not is_data_key(k))
        if bad:
            raise ValueError(
                f"invalid data keys {bad} (allowed: letters, digits, '-', '_', '.'; not '.', '..'"
                " or a key starting with '..')"
            )
        return data

    @model_validator(mode="after")
    def _not_empty(self) -> Self:
        if not self.data and not self.template_from and not self.include_all:
            raise ValueError(
                "template.data and templateFrom are empty and includeAll is false: nothing would be written"
            )
        return self


class Target(
    base.CRModel,
    json_schema_extra=base.validations(
        _CONFIGMAP_UNTYPED,
        _NO_FORBIDDEN_TYPE,
        _NO_MERGE_FROM,
        _NO_HELM_OWNER,
        _NO_RESERVED_LABELS,
        _NO_RESERVED_ANNOTATIONS,
        _NO_RESERVED_TYPE,
    ),
):
    """The Secret or ConfigMap a SecretSync writes, always in its own namespace."""

    name: str | None = Field(
        default=None, pattern=base.DNS_SUBDOMAIN_PATTERN, max_length=base.DNS_SUBDOMAIN_MAX
    )
    """Name of the Secret/ConfigMap in the SecretSync's namespace; default: the SecretSync's name.
    An existing object is written only if this SecretSync created it (label secretferry.io/sync), or
    with creationPolicy Merge; otherwise TargetConflict."""
    kind: TargetKind = "Secret"
    """``Secret`` (default) or ``ConfigMap``. ConfigMap is for non-sensitive data only, and has no type."""
    type: str = Field(default="Opaque", min_length=1, max_length=253)
    """Secret type, e.g. ``Opaque`` (default) or ``kubernetes.io/tls`` (its required keys are checked).
    Types other controllers act on are refused: kubernetes.io/service-account-token,
    bootstrap.kubernetes.io/token, helm.sh/release.v1, and any other type in the kubernetes.io,
    k8s.io, helm.sh, argoproj.io, fluxcd.io or secretferry.io domains except kubernetes.io/tls,
    basic-auth, ssh-auth, dockercfg and dockerconfigjson. Ignored with creationPolicy Merge: the
    existing object keeps its own."""
    labels: dict[str, str] = Field(default_factory=dict, max_length=MAX_TARGET_METADATA)
    """Labels put on the target (at most 256), e.g. ``{app: web}``; unless creationPolicy is Merge
    the operator adds app.kubernetes.io/managed-by and secretferry.io/sync. Refused (README,
    Security model): owner=helm, and keys in the kubernetes.io, k8s.io, helm.sh, argoproj.io,
    fluxcd.io and secretferry.io domains and their subdomains, except app.kubernetes.io/name,
    version, component and part-of; plus the operator's forbidden target keys."""
    annotations: dict[str, str] = Field(default_factory=dict, max_length=MAX_TARGET_METADATA)
    """Annotations put on the target (at most 256). Refused as for labels: keys other controllers
    read, among them secretferry.io/merge-from, an opt-in for the target's owner to set."""
    template: Template | None = None
    """Jinja2 templates that build the target's keys from the fetched secrets. Without one, every
    fetched key is written as it is; with one, only the templated keys unless includeAll is true."""
    creation_policy: CreationPolicy = "Owner"
    """Owner (default): create it, owned (garbage-collected with the SecretSync). Orphan: create it,
    unowned. Merge: write our keys into an existing object someone else owns, which must name this
    SecretSync in its secretferry.io/merge-from annotation."""
    deletion_policy: DeletionPolicy = "Retain"
    """Keys that vanish at the service: Retain (default) keeps them in the target, Delete removes them
    (with Merge, only keys this SecretSync wrote)."""

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
    """A workload restarted when the target's data changes, e.g. ``{kind: Deployment, name: web}``."""

    kind: Literal["Deployment", "StatefulSet", "DaemonSet", "Rollout"]
    """Workload kind: Deployment, StatefulSet, DaemonSet or Rollout (Argo Rollouts)."""
    name: str = Field(pattern=base.DNS_SUBDOMAIN_PATTERN, max_length=base.DNS_SUBDOMAIN_MAX)
    """Name of the workload; always in the SecretSync's own namespace."""


class SecretSyncSpec(base.CRModel):
    """Which secrets to copy from the service, logged in as which identity, into which object."""

    identity_ref: IdentityRef
    """The MachineIdentity or ClusterMachineIdentity to log in to the service as."""
    sources: list[Source] = Field(min_length=1, max_length=MAX_SOURCES)
    """Where to read secrets: 1 to 20 scopes (project, environment, path, filters), one list call
    each. Keys of later sources override keys of earlier ones."""
    target: Target = Field(default_factory=Target)
    """The Secret or ConfigMap to write, in the SecretSync's namespace, and how to write it."""
    refresh_interval: str = Field(
        default=DEFAULT_REFRESH_INTERVAL,
        min_length=2,
        max_length=32,  # bounds CEL cost; "1000h59m59s" is 11 characters
        pattern=base.DURATION_PATTERN,
        json_schema_extra=base.validations(_MIN_REFRESH),
    )
    """How often to re-read the service: a duration in whole hours, minutes and seconds, e.g. ``30s``,
    ``5m`` (the default) or ``1h30m``; at least ``1s``. While the event stream is healthy it is
    stretched to the operator's streaming resync period (1 h by default)."""
    instant_updates: bool = True
    """Subscribe to the service's event stream and sync on change notifications (default true);
    false: poll every refreshInterval."""
    rollout_restart_targets: list[RolloutRestartTarget] = Field(default_factory=list, max_length=32)
    """Workloads in the same namespace restarted after the target's data changes, e.g.
    ``[{kind: Deployment, name: web}]``; each only when its owner opted in with the annotation
    ``secretferry.io/restart-on`` on the workload, listing this SecretSync's name."""
    # --- refreshPolicy (reconcile/refresh.py) ---
    refresh_policy: RefreshPolicy = "Periodic"
    """When the service is read. Periodic (default): every refreshInterval and on every event-stream
    notification. OnChange: only when this spec changes (metadata.generation), on the force-sync
    annotation, and to re-create a deleted target. CreatedOnce: once, when the target is created
    (again only if it is deleted, or on the force-sync annotation). Under OnChange and CreatedOnce
    there is no resync and no event stream for this SecretSync, and a hand edit of the target is
    left as it is (README, "Refresh policy")."""
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


class TargetStatus(base.StatusModel):
    """The Secret or ConfigMap a SecretSync writes, in its own namespace."""

    kind: TargetKind
    """Secret or ConfigMap."""
    name: str
    """Name of the object."""


class SecretSyncStatus(base.StatusModel):
    """What the operator last did for this SecretSync; written by the operator only.

    A field left out of a status patch (None here) keeps the value written before: a failure says
    why in the Ready condition, and the fields of the last success stay.
    """

    conditions: list[base.Condition] = base.conditions_field()
    """Ready: True (reason Synced) when the target holds what the sources list; False with the reason
    the last pass failed, while the target keeps what the last success wrote."""
    observed_generation: int | None = None
    """The metadata.generation the last pass worked on."""
    last_sync_time: base.Time | None = None
    """When a pass last succeeded and wrote the target or changed this status. A pass that finds
    everything as it was does not move it."""
    synced_keys: list[str] | None = None
    """Names of the keys this SecretSync wrote (never values)."""
    synced_key_count: int | None = None
    """How many keys syncedKeys names (the Keys column)."""
    update_mode: Literal["Streaming", "Polling", "OnChange", "CreatedOnce"] | None = None
    """Streaming: the service's event stream starts a sync on every change. Polling: only
    spec.refreshInterval does (instant updates off, or no healthy stream for a source). OnChange,
    CreatedOnce: spec.refreshPolicy says so; the service is read only as that policy says."""
    update_mode_reason: str | None = None
    """Why updateMode is what it is, e.g. why the stream is unavailable."""
    data_hmac: str | None = Field(default=None, alias="dataHMAC")
    """Keyed HMAC-SHA256 of the written data: shows a change without revealing anything. Keyed per
    SecretSync and metadata.generation, so it compares with nothing but this SecretSync's earlier
    HMACs under the same spec (an edit changes it even when the data stays the same)."""
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

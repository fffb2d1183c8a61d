"""ClusterSecretSync: one SecretSync spec, written into every namespace a selector picks.

Why a cluster-scoped kind of its own and not a SecretSync field: the object that decides which
namespaces receive a Secret must be one no tenant can create or change. Cluster-scoped, it is out
of reach of every namespaced RoleBinding, and the chart never aggregates it into ``edit`` or
``admin`` (README, "ClusterSecretSync"). Which namespaces are picked is decided by namespace
labels, which only whoever may update Namespace objects (a cluster admin) can set: a tenant with
``edit`` in their namespace cannot label their way into a selection.

The spec is a SecretSync spec (``syncTemplate``) plus the selection; the operator expands it in
memory into one entry per selected namespace that goes through the SecretSync pass
(reconcile/cluster_syncs.py). The identity must be a ClusterMachineIdentity, and that identity's
``allowedNamespaces`` still decides, per namespace, whether it may serve it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Final, Self

from pydantic import Field, model_validator

from secretferry.models import base, secretsync

CLUSTER_SECRET_SYNC_KIND: Final = "ClusterSecretSync"
PLURAL: Final = "clustersecretsyncs"
MAX_NAMESPACE_NAMES: Final = 1000  # a list longer than this is a selector's job; bounds CEL cost
MAX_FAILURES_SHOWN: Final = 20
"""status.failedNamespaces lists at most this many (sorted by namespace): a status must stay small
at a thousand namespaces; the counts say how many there are in all."""
DNS_LABEL_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

_SELECTS_SOMETHING = base.cel(
    "has(self.namespaceSelector) || (has(self.namespaces) && size(self.namespaces) > 0)",
    "set namespaceSelector, namespaces, or both",
)
_CLUSTER_IDENTITY = base.cel(
    "self.syncTemplate.identityRef.kind == 'ClusterMachineIdentity'",
    "a ClusterSecretSync logs in as a ClusterMachineIdentity (syncTemplate.identityRef.kind)",
)
TEMPLATES_NAMESPACE_REQUIRED: Final = (
    "templateFrom in a ClusterSecretSync needs templatesNamespace: its sources are read from the"
    " namespace its admin names, never from the namespaces it selects"
)
_TEMPLATES_NAMESPACE = base.cel(
    "!has(self.syncTemplate.target) || !has(self.syncTemplate.target.template)"
    " || !has(self.syncTemplate.target.template.templateFrom)"
    " || size(self.syncTemplate.target.template.templateFrom) == 0 || has(self.templatesNamespace)",
    TEMPLATES_NAMESPACE_REQUIRED,
)
_NO_MERGE = base.cel(
    "!has(self.syncTemplate.target) || !has(self.syncTemplate.target.creationPolicy)"
    " || self.syncTemplate.target.creationPolicy != 'Merge'",
    "creationPolicy Merge is not available to a ClusterSecretSync: it writes only Secrets it creates",
)


class ClusterSecretSyncSpec(
    base.CRModel,
    json_schema_extra=base.validations(
        _SELECTS_SOMETHING, _CLUSTER_IDENTITY, _NO_MERGE, _TEMPLATES_NAMESPACE
    ),
):
    """Which namespaces receive the target, and the SecretSync spec that fills it."""

    sync_template: secretsync.SecretSyncSpec
    """The SecretSync spec applied in each selected namespace: sources, target, refreshPolicy,
    rewrite, templates and the rest mean what they mean on a SecretSync. identityRef must name a
    ClusterMachineIdentity, whose allowedNamespaces must admit each namespace (else that namespace
    fails with IdentityNotAllowed); creationPolicy Merge is refused."""
    namespace_selector: base.LabelSelector | None = None
    """Namespaces selected by their labels, e.g. ``{matchLabels: {team: payments}}``. Only whoever
    may update Namespace objects can change these labels, not a tenant of the namespace."""
    namespaces: list[Annotated[str, Field(pattern=DNS_LABEL_PATTERN, max_length=63)]] = Field(
        default_factory=list, max_length=MAX_NAMESPACE_NAMES
    )
    """Namespaces selected by name. A namespace is selected when it matches namespaceSelector or
    is named here."""
    templates_namespace: str | None = Field(default=None, pattern=DNS_LABEL_PATTERN, max_length=63)
    """The namespace syncTemplate's ``templateFrom`` sources are read from, e.g. ``platform``
    (required with templateFrom). Never the selected namespaces: a tenant who can write a labelled
    ConfigMap in one of them would otherwise run templates over the cluster identity's values."""

    @model_validator(mode="after")
    def _checks(self) -> Self:
        if self.namespace_selector is None and not self.namespaces:
            raise ValueError("set namespaceSelector, namespaces, or both")
        if self.sync_template.identity_ref.kind != "ClusterMachineIdentity":
            raise ValueError("syncTemplate.identityRef.kind must be ClusterMachineIdentity")
        if self.sync_template.target.creation_policy == "Merge":
            raise ValueError("creationPolicy Merge is not available to a ClusterSecretSync")
        template = self.sync_template.target.template
        if template is not None and template.template_from and self.templates_namespace is None:
            raise ValueError(TEMPLATES_NAMESPACE_REQUIRED)
        return self

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether ``namespace`` (with ``labels``) is selected: named, or matched by the selector."""
        if namespace in self.namespaces:
            return True
        return self.namespace_selector is not None and self.namespace_selector.matches(labels)


class NamespaceFailure(base.StatusModel):
    """One selected namespace whose target is not in step, and why."""

    namespace: str
    """The namespace."""
    reason: str
    """The reason a SecretSync there would show, e.g. TargetConflict or IdentityNotAllowed."""
    message: str
    """What went wrong (names and counts, never values)."""


class ClusterSecretSyncStatus(base.StatusModel):
    """What the operator last did for this ClusterSecretSync; written by the operator only."""

    conditions: list[base.Condition] = base.conditions_field()
    """Ready: True (Synced) when every selected namespace holds its target; False with
    NamespacesFailed while any namespace fails, Progressing while some have not been synced yet."""
    observed_generation: int | None = None
    """The metadata.generation the counts are about."""
    selected_namespaces: int | None = None
    """How many namespaces the selection picks (the Selected column)."""
    ready_namespaces: int | None = None
    """How many of them hold their target, in step (the Ready column)."""
    failed_namespaces: int | None = None
    """How many of them fail (the Failed column); their reasons are in failures."""
    failures: list[NamespaceFailure] | None = Field(default=None, max_length=MAX_FAILURES_SHOWN)
    """The first failing namespaces, sorted by name, at most 20, with their reasons."""


class ClusterSecretSync(base.CRModel):
    """A parsed ``ClusterSecretSync`` object."""

    KIND: ClassVar[str] = CLUSTER_SECRET_SYNC_KIND

    metadata: base.ObjectMeta
    spec: ClusterSecretSyncSpec
    status: ClusterSecretSyncStatus = Field(default_factory=ClusterSecretSyncStatus)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        """Parse a raw object body; raises pydantic.ValidationError for an invalid spec."""
        return cls.model_validate(base.lenient_status(body, ClusterSecretSyncStatus))

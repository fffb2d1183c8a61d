"""``template.templateFrom``: templates read from a ConfigMap or Secret instead of written inline.

Why a reference is safe to let a tenant write (README, "Security model"; the resolution is in
reconcile/rendering/template_sources.py):

- **only its own namespace**: a reference has no namespace; a SecretSync's are read in the
  SecretSync's namespace. A ClusterSecretSync (an admin's kind) reads all of its own from the one
  namespace its admin names (``spec.templatesNamespace``), never from the namespaces it selects,
  whose tenants may be able to write a labelled ConfigMap there;
- **only objects that consent**: a ConfigMap or Secret is used only when it carries the label
  ``secretferry.io/template-source: "true"``. Whoever can set that label can write the object,
  and so decides that its content is a template for every SecretSync of the namespace. A tenant
  who may only create our resources can write neither a ConfigMap nor a Secret; and no object the
  operator writes ever carries a ``secretferry.io`` label a SecretSync chose (models/reserved.py),
  so no SecretSync can make its own target a template source. An unlabelled object is refused
  by name (TemplateSourceNotLabelled) and its data is never read: the operator asks the apiserver
  for labelled objects only, and for the metadata of the others;
- **templates stay templates**: text from a source runs exactly where inline ``template.data``
  runs, under the identity's template opt-in (reconcile/template_trust.py) and in the same
  bounded worker pool.
"""

from __future__ import annotations

from typing import Annotated, Final, Self

from pydantic import Field, StringConstraints, model_validator

from secretferry.models import base

TEMPLATE_SOURCE_LABEL: Final = "secretferry.io/template-source"
"""On a ConfigMap or Secret: ``"true"`` lets SecretSyncs of its namespace use it in templateFrom."""
TEMPLATE_SOURCE_VALUE: Final = "true"
TEMPLATE_SOURCE_SELECTOR: Final = f"{TEMPLATE_SOURCE_LABEL}={TEMPLATE_SOURCE_VALUE}"

# Entries per template: each is one object to read and watch; 16 is more than any real split of
# a template set (ESO users share one or two).
MAX_ENTRIES: Final = 16
# Keys one entry may pick: a ConfigMap rarely has more than a handful of templates.
MAX_KEYS: Final = 256

# A key of Secret/ConfigMap data (models/secretsync.py DATA_KEY_PATTERN, not imported: it imports us).
_DataKey = Annotated[str, StringConstraints(pattern=r"^[-._a-zA-Z0-9]+$", min_length=1, max_length=253)]


class TemplateSourceRef(base.CRModel):
    """A ConfigMap or Secret holding templates: each key is the template of the target key of the
    same name."""

    name: str = Field(pattern=base.DNS_SUBDOMAIN_PATTERN, max_length=base.DNS_SUBDOMAIN_MAX)
    """Name of the ConfigMap or Secret, e.g. ``db-templates``. It must carry the label
    ``secretferry.io/template-source: "true"`` (else TemplateSourceNotLabelled) and hold at most
    64 KiB of data (else TemplateSourceTooLarge)."""
    keys: list[_DataKey] = Field(default_factory=list, max_length=MAX_KEYS)
    """Only these keys of the source are templates, e.g. ``[DATABASE_URL]``; empty (default): every
    key of its ``data``. A key listed here and absent from the source stops the sync
    (TemplateSourceKeyMissing)."""


_ONE_KIND = base.cel("has(self.configMap) != has(self.secret)", "set exactly one of configMap and secret")


class TemplateFrom(base.CRModel, json_schema_extra=base.validations(_ONE_KIND)):
    """One object whose keys are templates, e.g. ``{configMap: {name: db-templates}}``."""

    config_map: TemplateSourceRef | None = None
    """A ConfigMap in the SecretSync's namespace; its ``data`` keys are templates (binaryData is
    ignored)."""
    secret: TemplateSourceRef | None = None
    """A Secret in the SecretSync's namespace; its ``data`` keys (UTF-8 text) are templates."""

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        if (self.config_map is None) == (self.secret is None):
            raise ValueError("set exactly one of configMap and secret")
        return self

    @property
    def kind(self) -> str:
        """``ConfigMap`` or ``Secret``."""
        return "ConfigMap" if self.config_map is not None else "Secret"

    @property
    def ref(self) -> TemplateSourceRef:
        ref = self.config_map or self.secret
        assert ref is not None  # the validator requires one
        return ref

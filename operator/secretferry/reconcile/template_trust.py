"""Who may make the operator compute over secret values: pure decisions.

Why this exists: a template is code run over every value its identity reads, and whatever it
computes shows somewhere its author can look without reading a Secret: Synced or TemplateError,
a changed data HMAC, a write Event. One bit per SecretSync is enough. Two calibration SecretSyncs
writing ``Y`` and ``N`` plus one per (character, bit) with ``{{ 'Y' if v[i] in "…" else 'N' }}``
recovered an admin-only password in 170 SecretSyncs and 5 s (issue 20). No sandbox limit or
status redaction closes every such channel, so the rule is about people: **whoever may write a
template over an identity's values can read all of them**, and the operator runs templates only
for identities whose credential owner said that is acceptable:

- a namespaced MachineIdentity: the object holding its login credential (the ServiceAccount of
  Kubernetes auth; the Secret of universal or accessToken auth, ``credential_object``) carries
  ``secretferry.io/allow-templates`` listing the identity by name. Setting it takes write access
  to that object: its owner, the same person whose ``secretferry.io/allowed-identities`` lets the
  identity log in at all, never a user who may only create MachineIdentities and SecretSyncs;
- a ClusterMachineIdentity: ``spec.allowTemplates: true``, written by whoever may edit
  cluster-scoped identities (a cluster admin).

Exact identity names, not ``"true"``: the ServiceAccount or Secret may already admit several
identities (for different teams or pipelines); a blanket value would hand reading to every one
of them, including ones named in ``allowed-identities`` later for another purpose.

What counts as computing over values: ``spec.target.template.data`` and ``templateFrom`` (template
text read from a ConfigMap or Secret is the same code; rendering/template_sources.py). Key filters
(includeKeys/excludeKeys, tags, metadata) select keys by name or service-side attributes, and
``includeAll`` writes fetched values as they are; none of them runs anything over a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from secretferry.models import identity as identity_models
from secretferry.models import secretsync as sync_models
from secretferry.reconcile import problems, reasons

ALLOW_TEMPLATES_ANNOTATION: Final = "secretferry.io/allow-templates"
"""On the ServiceAccount or Secret a namespaced MachineIdentity logs in with: comma-separated names
of the MachineIdentities (in the same namespace) whose SecretSyncs may use templates."""
ALLOW_TEMPLATES_FIELD: Final = "spec.allowTemplates"
"""On a ClusterMachineIdentity: whether SecretSyncs using it may use templates (default false)."""


def computes_over_values(spec: sync_models.SecretSyncSpec) -> bool:
    """Whether ``spec`` makes the operator run code over values: inline templates or templateFrom."""
    template = spec.target.template
    return template is not None and bool(template.data or template.template_from)


def credential_object(auth: identity_models.IdentityAuth) -> tuple[str, str]:
    """(kind, name) of the object holding the identity's login credential: where the opt-in goes.

    A CA bundle Secret is not one: it lets nobody log in, and its owner need not own the identity.
    """
    if auth.token_auth is not None:
        return "ServiceAccount", auth.token_auth.service_account_ref.name
    if auth.universal is not None:
        ref = auth.universal.credentials_secret_ref or auth.universal.client_secret_ref
        assert ref is not None  # the model requires one of the two
        return "Secret", ref.name
    assert auth.access_token is not None  # the model requires exactly one method
    return "Secret", auth.access_token.secret_ref.name


def opted_in(annotations: Mapping[str, str] | None, identity: str) -> bool:
    """Whether the object's ``secretferry.io/allow-templates`` lists ``identity`` by exact name."""
    listed = (annotations or {}).get(ALLOW_TEMPLATES_ANNOTATION, "")
    return identity in {name.strip() for name in listed.split(",")}


def allowed(
    spec: identity_models.MachineIdentitySpec, *, identity: str, annotations: Mapping[str, str] | None
) -> bool:
    """Whether SecretSyncs using this identity may use templates.

    ``annotations``: those of ``credential_object``, for a namespaced identity; a cluster one is
    decided by its own spec alone (its credential object may be anywhere, and need not be the
    admin's to annotate).
    """
    if isinstance(spec, identity_models.ClusterMachineIdentitySpec):
        return spec.allow_templates
    return opted_in(annotations, identity)


def refusal(*, kind: str, identity: str, holder: str | None) -> problems.Problem:
    """TemplatesNotAllowed for a SecretSync with templates; its text depends on names only.

    ``holder``: "ServiceAccount ns/name" or "Secret ns/name" for a MachineIdentity, None for a
    ClusterMachineIdentity.
    """
    if holder is None:
        how = (
            f"{kind} {identity!r} allows that only with {ALLOW_TEMPLATES_FIELD}: true, which a "
            "cluster admin sets"
        )
    else:
        how = (
            f"{kind} {identity!r} allows that only when its {holder} is annotated "
            f"{ALLOW_TEMPLATES_ANNOTATION} listing {identity!r} (someone who may edit it sets that)"
        )
    return problems.Problem(
        reasons.TEMPLATES_NOT_ALLOWED,
        f"spec.target.template runs code over every value the identity reads, so its author can "
        f"read them all; {how}. Nothing was fetched, rendered or written",
        # The credential watch requeues the SecretSyncs when the annotation is added (identity
        # intake); the retry is a safety net for a watch that is down. A ClusterMachineIdentity
        # change requeues its SecretSyncs itself.
        retriable=holder is not None,
    )

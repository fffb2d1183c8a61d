"""The SecretSyncs: one per Secret or ConfigMap an Infisical object writes, in that object's namespace.

A SecretSync writes only into its own namespace, so it lives where Infisical's managed object
does. Infisical rewrites the whole object each time, so a key removed at the service disappears
from it: ``deletionPolicy: Delete``. Its creationPolicy (Owner or Orphan, Orphan by default in
v1alpha1) is kept. The existing object carries no label of ours, so the operator would refuse it
(TargetConflict) until someone labels it: the steps say how, after Infisical's operator has let
go of it (``--cascade=orphan``, or an Owner object would be deleted with its InfisicalSecret).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from secretferry.convert import identities, infisical, results, values
from secretferry.models import base, errors, labels, secretsync

# kubebuilder default of a v1alpha1 spec.resyncInterval, in seconds.
_V1ALPHA1_RESYNC_SECONDS = 60
_UNKNOWN = "unknown field; nothing here reads it"


@dataclass
class Sync:
    origin: str
    name: str
    namespace: str | None
    labels: dict[str, str]
    identity: identities.Identity
    identity_field: str
    """Where the input names its login, for the note when that was not converted."""
    spec: dict[str, Any]
    comments: list[str] = field(default_factory=list)


def from_infisical_secret(
    cr: infisical.InfisicalSecret,
    obj: str,
    login: tuple[identities.Identity, infisical.Scope] | None,
    ledger: results.Ledger,
) -> list[Sync]:
    """One SecretSync per managed Secret and ConfigMap of a v1alpha1 InfisicalSecret."""
    spec, meta = cr.spec, cr.metadata
    if infisical.is_set(spec.token_secret_reference):
        why = identities.UNSUPPORTED_AUTH["serviceToken"] + identities.USE_INSTEAD
        ledger.note(obj, "spec.tokenSecretReference", why)
    wanted = list(_managed_objects(spec))
    if not wanted:
        ledger.note(obj, "spec.managedKubeSecretReferences", "names no Secret or ConfigMap to write")
    if login is None or not wanted:
        return []
    login_draft, scope = login
    source: dict[str, Any] = {"environment": scope.env_slug, "path": values.folder(scope.secrets_path)}
    for key, value in (("projectId", scope.project_id), ("projectSlug", scope.project_slug)):
        if value:
            source[key] = value
    if scope.recursive:
        source["recursive"] = True
    if scope.secret_name:
        source["includeKeys"] = [values.glob_escape(scope.secret_name)]
    common: dict[str, Any] = {"sources": [source], "instantUpdates": spec.instant_updates}
    seconds = _V1ALPHA1_RESYNC_SECONDS if spec.resync_interval is None else spec.resync_interval
    if seconds >= secretsync.MIN_REFRESH_SECONDS:
        common["refreshInterval"] = values.duration(seconds)
    else:
        ledger.note(obj, "spec.resyncInterval", "is below one second; the default (5m) applies")
    out = []
    for m in wanted:
        target = _target(obj, m.where, meta, {"name": m.name, **m.kind}, m.policy, m.template, None, ledger)
        if target is not None:
            sync_name = meta.name if len(wanted) == 1 else m.name
            out.append(
                _sync(meta, obj, sync_name, m.namespace or meta.namespace, login_draft, common, target)
            )
    _release("infisicalsecret", meta, ledger)
    return out


@dataclass(frozen=True)
class _Managed:
    """A Secret or ConfigMap a v1alpha1 InfisicalSecret writes."""

    where: str
    name: str
    namespace: str
    kind: dict[str, str]
    """Our target's kind or type: ``{"type": ...}`` for a Secret, ``{"kind": "ConfigMap"}``."""
    policy: str
    template: infisical.Template | None


def _managed_objects(spec: infisical.InfisicalSecretSpec) -> Iterator[_Managed]:
    """managedSecretReference (the older, single one, unless listed again), the list, the ConfigMaps."""
    secrets = [
        (f"spec.managedKubeSecretReferences[{i}]", m)
        for i, m in enumerate(spec.managed_kube_secret_references)
    ]
    single = spec.managed_secret_reference
    if single is not None and all(
        (m.secret_name, m.secret_namespace) != (single.secret_name, single.secret_namespace)
        for _, m in secrets
    ):
        secrets.insert(0, ("spec.managedSecretReference", single))
    for where, m in secrets:
        if m.secret_name:  # an empty struct is what Infisical writes back for an unset one
            kind = {"type": m.secret_type or "Opaque"}
            yield _Managed(where, m.secret_name, m.secret_namespace, kind, m.creation_policy, m.template)
    for i, c in enumerate(spec.managed_kube_config_map_references):
        if c.config_map_name:
            where = f"spec.managedKubeConfigMapReferences[{i}]"
            kind = {"kind": "ConfigMap"}
            yield _Managed(
                where, c.config_map_name, c.config_map_namespace, kind, c.creation_policy, c.template
            )


def from_static_secret(
    cr: infisical.InfisicalStaticSecret, obj: str, login: identities.Identity, ledger: results.Ledger
) -> list[Sync]:
    """One SecretSync per target of a v1beta1 InfisicalStaticSecret."""
    spec, meta = cr.spec, cr.metadata
    common: dict[str, Any] = {"instantUpdates": spec.sync_options.instant_updates}
    seconds = values.interval_seconds(spec.sync_options.refresh_interval)
    if seconds is None:
        why = "is not a whole number and one of s, m, h, d, w; the default (5m) applies"
        ledger.note(obj, "spec.syncOptions.refreshInterval", why)
    else:
        common["refreshInterval"] = values.duration(seconds)
    # Infisical keeps the first source's value of a key; our later sources override earlier ones.
    common["sources"] = [_v1beta1_source(s) for s in reversed(spec.sources)]
    comments = []
    if len(spec.sources) > 1:
        comments.append("sources in reverse order: Infisical's first source wins a key, secretferry's last")
    out = []
    for i, t in enumerate(spec.targets):
        where = f"spec.targets[{i}]"
        target: dict[str, Any] = {"name": t.name}
        if t.kind not in ("Secret", "ConfigMap"):
            ledger.note(obj, f"{where}.kind", "is neither Secret nor ConfigMap")
            continue
        target.update({"kind": "ConfigMap"} if t.kind == "ConfigMap" else {"type": t.secret_type or "Opaque"})
        template = t.template
        if template is not None and "include_all_secrets" in template.model_fields_set:
            ledger.note(obj, f"{where}.template.includeAllSecrets", _UNKNOWN)  # a v1alpha1 field
            template = template.model_copy(update={"include_all_secrets": False})
        if template is not None and "metadata" in template.model_fields_set:
            ledger.note(obj, f"{where}.template.metadata", _UNKNOWN)  # v1beta1 has it on the target
        body = _target(obj, where, meta, target, t.creation_policy, template, t.metadata, ledger)
        if body is not None:
            sync_name = meta.name if len(spec.targets) == 1 else t.name
            sync = _sync(meta, obj, sync_name, t.namespace or meta.namespace, login, common, body)
            sync.identity_field, sync.comments = "spec.infisicalAuthRef", list(comments)
            out.append(sync)
    _release("infisicalstaticsecret", meta, ledger)
    return out


def _v1beta1_source(source: infisical.Source) -> dict[str, Any]:
    out: dict[str, Any] = {
        "projectId": source.project_id,
        "environment": source.environment_slug,
        "path": values.folder(source.secret_path),
    }
    if source.tag_slugs:
        out["tagSlugs"] = list(source.tag_slugs)
    if source.recursive:
        out["recursive"] = True
    return out


def _target(
    obj: str,
    where: str,
    meta: infisical.Meta,
    target: dict[str, Any],
    policy: str,
    template: infisical.Template | None,
    metadata: infisical.TemplateMeta | None,
    ledger: results.Ledger,
) -> dict[str, Any] | None:
    """Our spec.target for one managed object, or None (with a note) when it cannot be one."""
    if policy not in ("Owner", "Orphan"):
        ledger.note(obj, f"{where}.creationPolicy", "is neither Owner nor Orphan")
        return None
    target.update(creationPolicy=policy, deletionPolicy="Delete")
    # Infisical copies its object's labels and annotations, unless metadata for the target is given.
    metadata = metadata or (template.metadata if template is not None else None)
    if metadata is not None:
        target_labels, annotations = dict(metadata.labels), dict(metadata.annotations)
    else:
        target_labels, annotations = (
            values.copied_labels(meta.labels),
            values.copied_annotations(meta.annotations),
        )
    if target_labels:
        target["labels"] = target_labels
    if annotations:
        target["annotations"] = annotations
    if template is None:
        return target
    where = f"{where}.template"
    if template.engine_version != "v1":
        ledger.note(obj, f"{where}.engineVersion", "only engine v1 templates are known")
        return None
    if isinstance(template.data, str):
        why = "one template rendering every key as YAML has no equivalent; write one template per key"
        ledger.note(obj, f"{where}.data", why)
        return None
    data: dict[str, str] = {}
    for key, source in sorted((template.data or {}).items()):
        text, why_not = values.go_template_to_jinja(source)
        if text is None:
            ledger.note(obj, f"{where}.data.{key}", f"{why_not}; the key is left out")
        else:
            data[key] = text
    if not data and not template.include_all_secrets:
        what = "no template key could be converted" if template.data else "the template writes no key"
        ledger.note(obj, where, f"{what}, and without one every fetched key would be written")
        return None
    if data:  # includeAllSecrets alone is the same as no template
        target["template"] = {"data": data, **({"includeAll": True} if template.include_all_secrets else {})}
    return target


def _sync(
    meta: infisical.Meta,
    obj: str,
    name: str,
    namespace: str | None,
    login: identities.Identity,
    common: dict[str, Any],
    target: dict[str, Any],
) -> Sync:
    login.used_in.add(namespace)
    spec = {**common, "target": target}
    return Sync(obj, name, namespace, values.copied_labels(meta.labels), login, "spec.authentication", spec)


def _release(resource: str, meta: infisical.Meta, ledger: results.Ledger) -> None:
    ledger.step(
        results.RELEASE, results.kubectl("delete", resource, meta.namespace, meta.name, "--cascade=orphan")
    )


def finish(sync: Sync, ledger: results.Ledger) -> None:
    """Name it, point it at its finished identity, check it against our model, and add it."""
    login = sync.identity
    if not login.kind:
        ledger.note(sync.origin, sync.identity_field, f"its identity (from {login.origin}) was not converted")
        return
    name = ledger.unique(secretsync.SECRET_SYNC_KIND, sync.namespace, sync.name)
    metadata: dict[str, Any] = {"name": name}
    if sync.namespace:
        metadata["namespace"] = sync.namespace
    if sync.labels:
        metadata["labels"] = sync.labels
    spec = {"identityRef": {"kind": login.kind, "name": login.final_name}, **sync.spec}
    body = {
        "apiVersion": base.API_VERSION,
        "kind": secretsync.SECRET_SYNC_KIND,
        "metadata": metadata,
        "spec": spec,
    }
    try:
        secretsync.SecretSync.from_body(body)
    except ValidationError as exc:
        why = f"the SecretSync {name} it converts to is not valid: {errors.describe_validation_error(exc)}"
        ledger.note(sync.origin, "spec", why)
        return
    target = sync.spec["target"]
    kind = str(target.get("kind", "Secret")).lower()
    label = f"{labels.SYNC_LABEL}={labels.sync_label_value(name)}"
    text = results.kubectl("label", kind, sync.namespace, str(target["name"]), label)
    ledger.step(results.HAND_OVER, text)
    comments = [*sync.comments, f"to do, once Infisical's operator has let go of it: {text}"]
    ledger.result.manifests.append(results.Manifest(body, comments, [sync.origin]))

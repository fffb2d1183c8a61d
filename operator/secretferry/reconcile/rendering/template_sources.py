"""``template.templateFrom``: which template texts a target's templates are, read from ConfigMaps
and Secrets. Only *where the text comes from* changes: what is resolved here is handed to
``desired.render_and_build`` and rendered in the same bounded worker pool as inline templates.

Merge order, lowest first: the ``templateFrom`` entries in list order (a later entry's key
overrides an earlier one's), then inline ``template.data``, which overrides them all.
``includeAll`` keeps its meaning: fetched keys are written too, templated keys overriding them.

Why a tenant may name a ConfigMap or Secret here (the security decision; README, "Security
model"): templates are code that runs over every value its identity reads, and a Secret's content
is a value the tenant may not be able to read. So:

- a source is used only when it carries ``secretferry.io/template-source: "true"``. Setting that
  label takes write access to the object: consent by its owner that its content is a template for
  every SecretSync of its namespace (its text may end up in a target, including a ConfigMap a
  tenant can read). A tenant who may only create our resources cannot write ConfigMaps or
  Secrets, and no object the operator writes carries a ``secretferry.io`` label a SecretSync
  chose (models/reserved.py). Without the label: TemplateSourceNotLabelled, and the object's data
  is never received: the operator lists by that label and reads only the metadata of the rest
  (``Reader``), so nothing of an unlabelled Secret reaches a render, a status or a log;
- a reference names no namespace: a SecretSync's are in its own namespace; a ClusterSecretSync's
  (an admin's kind) are all in the one namespace its admin names (``templatesNamespace``), never
  in the namespaces it selects;
- the identity's template opt-in (template_trust.py) is required just as for inline templates.

A labelled source is a template, not a value, and is treated like inline template text: a syntax
error's message (in status) may quote a token of it, as for ``template.data``.

Failures are named, never guessed around, and leave the target as it is: TemplateSourceMissing,
TemplateSourceNotLabelled, TemplateSourceTooLarge, TemplateSourceKeyMissing, TemplateSourceInvalid.
Messages name objects and keys, never template text (a Secret's text may be secret).
"""

from __future__ import annotations

import base64
import binascii
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from secretferry.models import secretsync as sync_models
from secretferry.models import templatefrom
from secretferry.reconcile import problems, reasons

MAX_SOURCE_BYTES: Final = 64 * 1024
"""Key and value bytes of one source's data, all keys together. Templates are code, not data: a
rendered config file with a few placeholders is a few KiB, so 64 KiB leaves ample room, while it
bounds what the operator keeps per labelled object (every one of the watched namespaces is in
memory) and what each render sends to a worker over its pipe. The apiserver's own bound (1 MiB)
would let 16 entries hand a worker 16 MiB of template text."""

SourceKey = tuple[str, str, str]
"""(kind, namespace, name) of a ConfigMap or Secret."""


class Absent(enum.Enum):
    """Why a source yields no templates without being read."""

    MISSING = "missing"
    NOT_LABELLED = "not labelled"


@dataclass(frozen=True, slots=True)
class SourceObject:
    """What the operator keeps of one labelled ConfigMap or Secret: its template texts, or only
    its size when that is over ``MAX_SOURCE_BYTES`` (the texts are then dropped at once)."""

    kind: str
    namespace: str
    name: str
    size: int
    templates: Mapping[str, str] | None
    """Key -> template text; None when ``size`` is over the bound."""
    not_text: tuple[str, ...] = field(default=())
    """Keys of a Secret whose value is not UTF-8 (not a template; left out of ``templates``)."""

    @property
    def key(self) -> SourceKey:
        return (self.kind, self.namespace, self.name)


Found = SourceObject | Absent


class Reader(Protocol):
    """Where a pass reads sources (reconcile/template_intake.py: the watch cache, then the
    apiserver for what it has not seen)."""

    async def read(self, key: SourceKey) -> Found: ...

    def bind(self, sync_key: tuple[str, str], keys: Iterable[SourceKey]) -> None:
        """Remember that ``sync_key`` uses ``keys``: a change to one re-renders it."""


def is_labelled(metadata: Mapping[str, Any]) -> bool:
    """Whether the object's owner consented: ``secretferry.io/template-source: "true"`` exactly."""
    found = (metadata.get("labels") or {}).get(templatefrom.TEMPLATE_SOURCE_LABEL)
    return bool(found == templatefrom.TEMPLATE_SOURCE_VALUE)


def parse(kind: str, body: Mapping[str, Any]) -> SourceObject:
    """A labelled ConfigMap or Secret as the apiserver sent it -> ``SourceObject``.

    A ConfigMap's ``data`` (``binaryData`` is not text, and is ignored); a Secret's ``data``,
    base64-decoded, its non-UTF-8 values named in ``not_text``."""
    meta = body.get("metadata") or {}
    raw: Mapping[str, str] = body.get("data") or {}
    texts: dict[str, str] = {}
    not_text: list[str] = []
    size = 0
    for key, value in raw.items():
        if kind == "Secret":
            try:
                decoded = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                not_text.append(key)
                continue
            size += len(key) + len(decoded)
            try:
                texts[key] = decoded.decode("utf-8")
            except UnicodeDecodeError:
                not_text.append(key)
        else:
            size += len(key) + len(value.encode())
            texts[key] = value
    return SourceObject(
        kind=kind,
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        size=size,
        templates=texts if size <= MAX_SOURCE_BYTES else None,
        not_text=tuple(sorted(not_text)),
    )


def source_keys(template: sync_models.Template | None, *, namespace: str) -> list[SourceKey]:
    """The objects ``template`` reads, in entry order, all in ``namespace``: a SecretSync's own,
    or the one a ClusterSecretSync's admin named (``templatesNamespace``)."""
    if template is None:
        return []
    return [(e.kind, namespace, e.ref.name) for e in template.template_from]


def merge(
    template: sync_models.Template | None,
    found: Sequence[Found],
    *,
    namespace: str,
) -> dict[str, str]:
    """Target key -> template text: ``templateFrom`` entries in order, then ``data`` (module
    docstring). ``found``: what was read for each of ``source_keys(template, namespace=...)``.
    Raises ``problems.Problem`` naming the entry, the object and keys; never a text."""
    if template is None:
        return {}
    entries = template.template_from
    if len(found) != len(entries):
        raise ValueError(f"read {len(found)} template sources for {len(entries)} templateFrom entries")
    merged: dict[str, str] = {}
    for index, (entry, got) in enumerate(zip(entries, found, strict=True)):
        merged.update(_templates_of(entry, got, index=index, namespace=namespace))
    merged.update(template.data)
    if not merged and not template.include_all:
        raise problems.Problem(
            reasons.TEMPLATE_SOURCE_INVALID,
            "spec.target.template.templateFrom yields no template and data is empty, with includeAll"
            " false: nothing would be written; the target keeps what it has",
        )
    return merged


def _templates_of(
    entry: templatefrom.TemplateFrom, got: Found, *, index: int, namespace: str
) -> dict[str, str]:
    ref = entry.ref
    field_path = f"spec.target.template.templateFrom[{index}].{'configMap' if entry.config_map else 'secret'}"
    what = f"{entry.kind} {namespace}/{ref.name} ({field_path})"
    if got is Absent.MISSING:
        raise problems.Problem(
            reasons.TEMPLATE_SOURCE_MISSING,
            f"{what} does not exist; the target keeps what it has until it does",
        )
    if got is Absent.NOT_LABELLED:
        raise problems.Problem(
            reasons.TEMPLATE_SOURCE_NOT_LABELLED,
            f"{what} is not labelled {templatefrom.TEMPLATE_SOURCE_SELECTOR}: only an object whose"
            " owner set that label is read as templates (its data was not read); the target keeps"
            " what it has",
        )
    assert isinstance(got, SourceObject)
    if got.templates is None:
        raise problems.Problem(
            reasons.TEMPLATE_SOURCE_TOO_LARGE,
            f"{what} holds {got.size} bytes of data; a template source may hold at most {MAX_SOURCE_BYTES}",
        )
    wanted = list(ref.keys) or sorted({*got.templates, *got.not_text})
    absent = [k for k in wanted if k not in got.templates and k not in got.not_text]
    if absent:
        raise problems.Problem(
            reasons.TEMPLATE_SOURCE_KEY_MISSING,
            f"{what} has no key {', '.join(absent)} (listed in its keys); it has"
            f" {_names(sorted({*got.templates, *got.not_text}))}",
        )
    binary = [k for k in wanted if k in got.not_text]
    if binary:
        raise problems.Problem(
            reasons.TEMPLATE_SOURCE_INVALID,
            f"{what}: the value of {', '.join(binary)} is not UTF-8 text, so not a template"
            + ("" if ref.keys else "; list the template keys in keys to leave it out"),
        )
    return {k: got.templates[k] for k in wanted}


def _names(keys: Sequence[str]) -> str:
    """Key names for a message: at most 20 (a source may have hundreds)."""
    if not keys:
        return "no keys"
    shown = ", ".join(keys[:20])
    return shown if len(keys) <= 20 else f"{shown} and {len(keys) - 20} more"


async def resolve(
    template: sync_models.Template | None,
    *,
    namespace: str,
    reader: Reader,
    sync_key: tuple[str, str],
) -> dict[str, str]:
    """The template texts of ``template``, its sources read through ``reader`` in ``namespace``
    (the SecretSync's own; a ClusterSecretSync passes the namespace its admin chose). Binds
    ``sync_key`` to its sources first, so that one appearing or changing later re-renders it
    even when this resolution fails."""
    keys = source_keys(template, namespace=namespace)
    reader.bind(sync_key, keys)
    found = [await reader.read(key) for key in keys]
    return merge(template, found, namespace=namespace)

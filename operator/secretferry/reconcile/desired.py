"""The desired target object: a pure function of (SecretSync, fetched secrets).

Order of precedence, lowest first: within a source, its imports in position order, then its own
secrets; then each source in ``spec.sources`` order; then templated keys. Which templates: the
texts ``rendering/template_sources.py`` resolved (``templateFrom`` in order, then inline ``data``),
passed in as ``templates``, so that building stays pure; without them, inline ``data`` alone.

Per source, in this order: imports and own secrets merged; ``includeKeys`` / ``excludeKeys``
filter them (by the names at the service); the source's ``rewrite`` rules rename the keys left,
in rule order (rewrite.py; two keys renamed to one name: KeyCollision); then the values are
decoded by the source's ``decodingStrategy`` and ``decoding`` rules, whose globs match the new
names (decoding.py; a value an explicit Base64/Base64URL cannot decode: DecodingFailed). Then
the sources are merged by the new names, later sources overriding earlier ones, and templates
see the merged, rewritten, decoded values; the data-key check (InvalidKey) applies to the final
names.

Values are text, or bytes when decoded (or rendered) bytes are not UTF-8 text (rendering/binary.py):
a Secret holds either as its bytes, a ConfigMap puts bytes into ``binaryData``, and the data HMAC
covers the bytes (``data_hmac``).

Failures raise a ``problems.Problem`` (not retriable: only an edit fixes them) whose message
names keys and template keys, never values.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import hmac
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from secretferry.models import base, clustersecretsync, labels, secretsync
from secretferry.reconcile import problems, reasons
from secretferry.reconcile.rendering import binary, decoding, pool, rewrite, templating

# The apiserver rejects Secrets and ConfigMaps whose data exceeds 1 MiB.
MAX_DATA_BYTES: Final = 1024 * 1024

# What a Secret type needs, as the apiserver validates it (pkg/apis/core/validation ValidateSecret):
# keys that must all be present (tls.crt and tls.key may be empty there) / at least one of them
# (basic-auth) / present and not empty (ssh-auth) / a JSON object Go's encoding/json accepts.
# A refusal here is a named reason before anything is written; a refusal by the apiserver after a
# type change's delete would lose the Secret (target_writes also asks it first, as a dry run).
_REQUIRED_ALL: Final = {
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/dockercfg": (".dockercfg",),
}
_REQUIRED_ANY: Final = {"kubernetes.io/basic-auth": ("username", "password")}
_NOT_EMPTY: Final = {"kubernetes.io/ssh-auth": "ssh-privatekey"}
_JSON_KEYS: Final = {
    "kubernetes.io/dockerconfigjson": ".dockerconfigjson",
    "kubernetes.io/dockercfg": ".dockercfg",
}


@dataclass(frozen=True, slots=True)
class FetchedSource:
    """What the service returned for one ``spec.sources`` entry: key -> value."""

    direct: Mapping[str, str]
    """Secrets at the source's path (and below it, when recursive)."""
    imported: Sequence[Mapping[str, str]] = field(default_factory=tuple)
    """One mapping per secret import, in position order; later imports override earlier ones."""
    depth: int = 0
    """How many folders below the source's path the deepest listed secret sits (0 when not
    recursive): what tells that a recursive listing reached the service's depth limit."""


@dataclass(frozen=True, slots=True)
class ClusterOrigin:
    """The ClusterSecretSync a per-namespace entry was expanded from (reconcile/cluster_syncs.py).

    The seam between the SecretSync pass and the cluster kind: with an origin, the target shows
    the ClusterSecretSync as its writer (its owner reference, a sync label no SecretSync name can
    produce, its own field manager), not the SecretSync the pass was handed, which exists only in
    memory. Everything else (sources, rewriting, templates, guards) is the SecretSync's.
    """

    name: str
    uid: str
    templates_namespace: str | None = None
    """Where templateFrom's sources are read (the spec's templatesNamespace), not this namespace."""

    @property
    def writer(self) -> str:
        """Field manager name and merge/rollout name: ``clustersecretsync.<name>``; no SecretSync
        of that name can collide with it in a way that matters, since its label differs."""
        return f"clustersecretsync.{self.name}"


class OwnerReference(BaseModel):
    model_config = ConfigDict(frozen=True)

    api_version: str
    kind: str
    name: str
    uid: str

    def manifest(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            # blockOwnerDeletion would need update on secretsyncs/finalizers; nothing waits on it.
        }


class DesiredObject(BaseModel):
    """The Secret/ConfigMap the SecretSync wants, plus the policies that decide how to write it."""

    model_config = ConfigDict(frozen=True)

    kind: secretsync.TargetKind
    name: str
    namespace: str
    type: str | None
    """Secret type; None for ConfigMaps and for creationPolicy Merge (the existing type stays)."""
    labels: dict[str, str]
    annotations: dict[str, str]
    string_data: dict[str, str | bytes]
    """Key -> value, keys sorted: text, or bytes for a value that is not UTF-8 text (decoded
    binary; rendering/binary.py). With creationPolicy Merge: only our keys."""
    data_hmac: str
    owner: OwnerReference | None
    creation_policy: secretsync.CreationPolicy
    deletion_policy: secretsync.DeletionPolicy
    sync_name: str
    """The SecretSync's name: what a Merge target's merge-from annotation must list."""

    def manifest(self) -> dict[str, Any]:
        """The body to server-side apply: a Secret's values base64-encoded in ``data``; a ConfigMap's
        text in ``data`` and its bytes base64-encoded in ``binaryData`` (only when there are any)."""
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if self.labels:
            metadata["labels"] = dict(self.labels)
        if self.annotations:
            metadata["annotations"] = dict(self.annotations)
        if self.owner is not None:
            metadata["ownerReferences"] = [self.owner.manifest()]
        body: dict[str, Any] = {"apiVersion": "v1", "kind": self.kind, "metadata": metadata}
        if self.kind == "Secret":
            if self.type is not None:
                body["type"] = self.type
            body["data"] = {
                k: base64.b64encode(binary.as_bytes(v)).decode() for k, v in self.string_data.items()
            }
            return body
        body["data"] = {k: v for k, v in self.string_data.items() if isinstance(v, str)}
        raw = {k: base64.b64encode(v).decode() for k, v in self.string_data.items() if isinstance(v, bytes)}
        if raw:
            body["binaryData"] = raw
        return body


def data_hmac(data: Mapping[str, str | bytes], key: bytes) -> str:
    """Keyed HMAC-SHA256 (hex) over a canonical encoding of ``data``: order-independent, unambiguous.

    Over the bytes each value stands for: text as itself (so text-only data keeps the HMAC it had
    before binary values), bytes that are UTF-8 as that text, other bytes as ``{"base64": ...}``,
    which no text value can be."""
    items = sorted((k, _canonical(v)) for k, v in data.items())
    canonical = json.dumps(items, ensure_ascii=False, separators=(",", ":"))
    return hmac.new(key, canonical.encode(), hashlib.sha256).hexdigest()


def _canonical(value: str | bytes) -> str | dict[str, str]:
    if isinstance(value, str):
        return value
    text = binary.normalize(value)
    return text if isinstance(text, str) else {"base64": base64.b64encode(text).decode()}


# Names what the derived key is for, so no other HMAC under the operator's key can equal one.
_OBJECT_KEY_PURPOSE: Final = "secretferry.io/data-hmac/v2"


def object_key(key: bytes, *, namespace: str, name: str, uid: str, generation: int) -> bytes:
    """The key of one SecretSync's data HMAC at one spec generation, derived from ``key``.

    Why not ``key`` itself: whoever can read a status could then compare HMACs, and equal HMACs
    mean equal data — a SecretSync syncing a secret they cannot read against one whose template
    writes a guess, here or in another namespace. Keyed per object (uid included: a recreated
    object is another one) and per generation (an edited template is another computation), an
    HMAC can only be compared with the same SecretSync's earlier ones at the same spec: it still
    shows that the data changed, and nothing else.
    """
    label = json.dumps([_OBJECT_KEY_PURPOSE, namespace, name, uid, generation], separators=(",", ":"))
    return hmac.new(key, label.encode(), hashlib.sha256).digest()


def sync_key(key: bytes, sync: secretsync.SecretSync) -> bytes:
    """``object_key`` for ``sync`` as the apiserver sent it (namespace, name, uid, generation)."""
    meta = sync.metadata
    return object_key(
        key,
        namespace=meta.namespace or "",
        name=meta.name,
        uid=meta.uid or "",
        generation=meta.generation or 0,
    )


def select_keys(
    secrets: Mapping[str, str], *, include: Sequence[str], exclude: Sequence[str]
) -> dict[str, str]:
    """Keys matching any ``include`` glob (all, when none is given) and no ``exclude`` glob."""
    return {
        k: v for k, v in secrets.items() if (not include or _matches(k, include)) and not _matches(k, exclude)
    }


def _matches(key: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(key, p) for p in patterns)


def merge_sources(
    sources: Sequence[secretsync.Source], fetched: Sequence[FetchedSource]
) -> dict[str, binary.Value]:
    """All fetched secrets, filtered, rewritten and decoded per source, in precedence order (see the
    module docstring). Raises ``problems.Problem`` for a rewrite that collides or makes a bad name,
    and for a value that does not decode."""
    if len(sources) != len(fetched):
        raise ValueError(f"fetched {len(fetched)} sources for {len(sources)} spec.sources entries")
    merged: dict[str, binary.Value] = {}
    for index, (source, result) in enumerate(zip(sources, fetched, strict=True)):
        one: dict[str, str] = {}
        for imported in result.imported:
            one.update(imported)
        one.update(result.direct)
        selected = select_keys(one, include=source.include_keys, exclude=source.exclude_keys)
        renamed = rewrite.rewrite_keys(selected, source.rewrite, source_index=index)
        merged.update(decoding.decode_values(renamed, source, source_index=index))
    return merged


async def render_and_build(
    sync: secretsync.SecretSync,
    fetched: Sequence[FetchedSource],
    *,
    hmac_key: bytes,
    renderer: pool.RenderPool,
    templates: Mapping[str, str] | None = None,
    origin: ClusterOrigin | None = None,
) -> DesiredObject:
    """``build_desired``, with the templates (if any) rendered by ``renderer``: in a worker
    process under CPU, memory and output limits, never on the event loop (pool.py).

    ``templates``: target key -> template text as resolved (template_sources.py); None: the
    inline ``template.data``."""
    texts = _texts(sync.spec.target.template, templates)
    if not texts:
        return build_desired(sync, fetched, hmac_key=hmac_key, rendered={}, templates=texts, origin=origin)
    secrets = merge_sources(sync.spec.sources, fetched)
    try:
        rendered = await renderer.render(texts, secrets, tenant=sync.metadata.namespace or "")
    except templating.TemplateRenderError as exc:
        failure = str(exc)
    else:
        return build_desired(
            sync, fetched, hmac_key=hmac_key, rendered=rendered, templates=texts, origin=origin
        )
    raise problems.Problem(reasons.TEMPLATE_ERROR, failure)


def build_desired(
    sync: secretsync.SecretSync,
    fetched: Sequence[FetchedSource],
    *,
    hmac_key: bytes,
    rendered: Mapping[str, binary.Value] | None = None,
    templates: Mapping[str, str] | None = None,
    origin: ClusterOrigin | None = None,
) -> DesiredObject:
    """The target object for ``sync`` given one FetchedSource per ``spec.sources`` entry.

    ``origin``: the ClusterSecretSync ``sync`` was expanded from, when it was (``ClusterOrigin``).

    ``hmac_key``: the operator's key; the data HMAC is keyed per object from it (``object_key``).

    ``rendered``: the templates' output, from ``render_and_build``; without it templates render
    in this process, with the sandbox's bounds only (for tests and tools, not the operator).

    ``templates``: the resolved template texts (``render_and_build``); None: inline ``data``.
    """
    target = sync.spec.target
    namespace = sync.metadata.namespace
    if namespace is None:
        raise ValueError("a SecretSync always has a namespace")
    secrets = merge_sources(sync.spec.sources, fetched)
    data = _render(target.template, _texts(target.template, templates), secrets, rendered)
    _check_keys(data)
    secret_type = target.type if target.kind == "Secret" and target.creation_policy != "Merge" else None
    if secret_type is not None:
        _check_type(secret_type, data)
    _check_size(data)
    digest = data_hmac(data, sync_key(hmac_key, sync))
    managed = target.creation_policy != "Merge"
    return DesiredObject(
        kind=target.kind,
        name=sync.target_name,
        namespace=namespace,
        type=secret_type,
        labels=_labels(sync, origin) if managed else dict(target.labels),
        annotations={**target.annotations, labels.DATA_HMAC_ANNOTATION: digest}
        if managed
        else dict(target.annotations),
        string_data=dict(sorted(data.items())),
        data_hmac=digest,
        owner=_owner(sync, origin) if target.creation_policy == "Owner" else None,
        creation_policy=target.creation_policy,
        deletion_policy=target.deletion_policy,
        sync_name=sync.metadata.name if origin is None else origin.writer,
    )


def _texts(template: secretsync.Template | None, resolved: Mapping[str, str] | None) -> Mapping[str, str]:
    if resolved is not None:
        return resolved
    return template.data if template is not None else {}


def _render(
    template: secretsync.Template | None,
    texts: Mapping[str, str],
    secrets: Mapping[str, binary.Value],
    done: Mapping[str, binary.Value] | None,
) -> dict[str, binary.Value]:
    if template is None:
        return dict(secrets)
    try:
        rendered: dict[str, binary.Value] = (
            dict(done) if done is not None else templating.render(texts, secrets)
        )
    except templating.TemplateRenderError as exc:
        failure = str(exc)
    else:
        return {**secrets, **rendered} if template.include_all else rendered
    # Raised outside the handler: no exception chain to carry anything along (none does today).
    raise problems.Problem(reasons.TEMPLATE_ERROR, failure)


def _check_keys(data: Mapping[str, binary.Value]) -> None:
    bad = sorted(k for k in data if not secretsync.is_data_key(k))
    if bad:
        raise problems.Problem(
            reasons.INVALID_KEY,
            "keys not allowed in Secret/ConfigMap data (letters, digits, '-', '_', '.'; not '.', '..'"
            f" or a key starting with '..'): {', '.join(bad)}; exclude them with excludeKeys or rename"
            " them with rewrite rules or a template",
        )


def _check_type(secret_type: str, data: Mapping[str, binary.Value]) -> None:
    missing = [k for k in _REQUIRED_ALL.get(secret_type, ()) if k not in data]
    if missing:
        raise problems.Problem(
            reasons.INVALID_SECRET_TYPE, f"type {secret_type} needs keys: {', '.join(missing)}"
        )
    wanted = _REQUIRED_ANY.get(secret_type)
    if wanted and not any(k in data for k in wanted):
        raise problems.Problem(
            reasons.INVALID_SECRET_TYPE, f"type {secret_type} needs one of: {', '.join(wanted)}"
        )
    required = _NOT_EMPTY.get(secret_type)
    if required is not None and not data[required]:
        raise problems.Problem(
            reasons.INVALID_SECRET_TYPE, f"type {secret_type} needs a non-empty {required}"
        )
    json_key = _JSON_KEYS.get(secret_type)
    json_value = data[json_key] if json_key is not None else ""
    # Bytes here are not UTF-8, which Go's JSON refuses (Python's would guess UTF-16 or -32).
    if json_key is not None and (isinstance(json_value, bytes) or not is_go_json_object(json_value)):
        raise problems.Problem(
            reasons.INVALID_SECRET_TYPE,
            f"{json_key} must hold a JSON object (strict JSON: no NaN or Infinity, numbers within"
            " float64 range)",
        )


def is_go_json_object(text: str) -> bool:
    """Whether Go's ``json.Unmarshal`` would read ``text`` as an object, as the apiserver does for
    docker config Secrets. Python's json module is laxer: it reads ``NaN``, ``Infinity`` and
    ``-Infinity``, and numbers beyond float64 as infinity; Go refuses all of them. (Stricter
    than Go: a top-level ``null``, which Go reads as an empty map, and nesting beyond Python's
    recursion limit, ~1,000 levels, where Go allows 10,000.)"""
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite, parse_int=_finite)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict)


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _finite(literal: str) -> float:
    """A JSON number as Go decodes it into interface{}: a float64, or an error out of range."""
    number = float(literal)  # float() of an out-of-range literal is inf, not an error
    if not math.isfinite(number):
        raise ValueError("number out of float64 range")
    return number


def _check_size(data: Mapping[str, binary.Value]) -> None:
    size = sum(len(k) + len(binary.as_bytes(v)) for k, v in data.items())
    if size > MAX_DATA_BYTES:
        raise problems.Problem(
            reasons.TARGET_TOO_LARGE, f"data is {size} bytes; the limit is {MAX_DATA_BYTES}"
        )


def sync_label(sync: secretsync.SecretSync, origin: ClusterOrigin | None) -> str:
    """The SYNC_LABEL value of the targets ``sync`` writes (its origin's, when expanded from one)."""
    if origin is not None:
        return labels.cluster_sync_label_value(origin.name)
    return labels.sync_label_value(sync.metadata.name)


def _labels(sync: secretsync.SecretSync, origin: ClusterOrigin | None) -> dict[str, str]:
    found = {
        **sync.spec.target.labels,
        labels.MANAGED_BY_LABEL: labels.MANAGED_BY_VALUE,
        labels.SYNC_LABEL: sync_label(sync, origin),
    }
    if origin is not None:
        found[labels.CLUSTER_SYNC_LABEL] = labels.sync_label_value(origin.name)
    return found


def _owner(sync: secretsync.SecretSync, origin: ClusterOrigin | None) -> OwnerReference:
    if origin is not None:
        # A cluster-scoped owner of a namespaced object: the garbage collector deletes the target
        # when the ClusterSecretSync goes.
        return OwnerReference(
            api_version=base.API_VERSION,
            kind=clustersecretsync.CLUSTER_SECRET_SYNC_KIND,
            name=origin.name,
            uid=origin.uid,
        )
    if sync.metadata.uid is None:
        raise ValueError("an owned target needs the SecretSync's uid")
    return OwnerReference(
        api_version=base.API_VERSION, kind=sync.KIND, name=sync.metadata.name, uid=sync.metadata.uid
    )

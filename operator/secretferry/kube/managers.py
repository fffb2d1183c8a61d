"""Server-side apply field managers: one per SecretSync, and the hand-over from the old shared one.

Why one per SecretSync: server-side apply treats each apply as the *whole* intent of its field
manager, and removes what that manager owned before and no longer sends. With one manager for
every write (``secretferry``, up to 0.1), two ``Merge`` SecretSyncs writing into one Secret were
one manager whose intent flipped between their key sets, so each apply deleted the other's keys.
With ``secretferry/<name>`` each SecretSync owns its own keys; the apiserver keeps both sets, and
two SecretSyncs that want one key with different values get a named ``Conflict`` instead of
overwriting each other.

Why the name alone, not the namespace: a SecretSync writes only into its own namespace, so the
managers that meet in one object are those of SecretSyncs of one namespace, and names are unique
there. Names longer than fits the apiserver's 128 characters keep a readable prefix and end in
``~`` plus 128 bits of SHA-256 of the whole name: ``~`` never occurs in a Kubernetes name, so a
hashed manager never equals a plain one, and two long names share a manager only by a SHA-256
collision on 128 bits (a birthday search of ~2^64 hashes) — and even then the names' author could
only make two of their own SecretSyncs share keys.

Upgrading: objects written by 0.1 carry ``secretferry``'s entries (``Apply``, and ``Update`` from
a create). Left alone they would co-own our fields forever: a Merge SecretSync changing a value
would hit a ``Conflict`` with ``secretferry``, and a key or label it stops sending would never be
removed. :func:`hand_over` moves those fields to the SecretSync's own manager by rewriting
``metadata.managedFields`` (the way ``kubectl``'s client-side-apply upgrade does, client-go
``util/csaupgrade``), guarded by ``resourceVersion``; values are not touched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final

LEGACY: Final = "secretferry"
"""The one field manager every write used before managers per SecretSync (and, from the client's
User-Agent, the apiserver's default manager for our status patches, which are not applies)."""
PREFIX: Final = "secretferry/"
# The apiserver refuses a fieldManager longer than 128 characters
# (k8s.io/apiserver pkg/endpoints/handlers/rest.go, ValidateFieldManager).
MAX_LENGTH: Final = 128
# 32 hex digits = 128 bits of SHA-256: collision-free for any number of SecretSyncs.
_HASH_HEX: Final = 32
_HASH_MARK: Final = "~"  # never in a Kubernetes name (DNS subdomain: [a-z0-9.-])

FieldSet = dict[str, Any]
"""A ``fieldsV1`` trie: ``{"f:data": {"f:key": {}}, "f:metadata": {"f:labels": {".": {}}}}``."""


def for_sync(name: str) -> str:
    """The field manager of the SecretSync ``name``: ``secretferry/<name>``, hashed when too long."""
    plain = PREFIX + name
    if len(plain) <= MAX_LENGTH:
        return plain
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_HEX]
    keep = MAX_LENGTH - len(PREFIX) - len(_HASH_MARK) - _HASH_HEX
    return f"{PREFIX}{name[:keep]}{_HASH_MARK}{digest}"


def fields_of(manifest: Mapping[str, Any], *, data_keys: Collection[str] = ()) -> FieldSet:
    """The fields a Merge apply of ``manifest`` claims: its data keys (plus ``data_keys``, the keys
    it wrote before), labels and annotations — never the maps themselves, which the owner owns."""
    metadata = manifest.get("metadata") or {}
    out: FieldSet = {}
    keys = set(manifest.get("data") or {}) | set(data_keys)
    if keys:
        out["f:data"] = {f"f:{k}": {} for k in sorted(keys)}
    meta: FieldSet = {}
    for field in ("labels", "annotations"):
        if metadata.get(field):
            meta[f"f:{field}"] = {f"f:{k}": {} for k in sorted(metadata[field])}
    if meta:
        out["f:metadata"] = meta
    return out


def legacy_owns(managed_fields: Iterable[Mapping[str, Any]] | None, only: FieldSet | None = None) -> bool:
    """Whether the old shared manager owns anything (of ``only``, when given)."""
    owned = _legacy_fields(managed_fields or ())
    return bool(owned if only is None else _intersect(owned, only))


def hand_over(
    managed_fields: Iterable[Mapping[str, Any]] | None, *, to: str, only: FieldSet | None = None
) -> list[dict[str, Any]] | None:
    """``managedFields`` with the old shared manager's fields moved to ``to``'s Apply entry, or None
    when it owns nothing to move.

    ``only=None`` moves everything it owns (an Owner/Orphan target: the SecretSync is the only
    writer, so all that the old manager wrote was its); otherwise only the fields in ``only`` (a
    Merge target, where the old manager may also hold other SecretSyncs' keys until they move).
    """
    entries = [dict(e) for e in managed_fields or ()]
    moved: FieldSet = {}
    kept: list[dict[str, Any]] = []
    for entry in entries:
        if not _is_legacy(entry):
            kept.append(entry)
            continue
        fields = entry.get("fieldsV1") or {}
        take = fields if only is None else _intersect(fields, only)
        moved = _union(moved, take)
        rest = {} if only is None else _subtract(fields, only)
        if rest:
            kept.append({**entry, "fieldsV1": rest})
    if not moved:
        return None
    for entry in kept:
        if entry.get("manager") == to and entry.get("operation") == "Apply" and not entry.get("subresource"):
            entry["fieldsV1"] = _union(entry.get("fieldsV1") or {}, moved)
            return kept
    kept.append(
        {"manager": to, "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": moved}
    )
    return kept


def _is_legacy(entry: Mapping[str, Any]) -> bool:
    return entry.get("manager") == LEGACY and not entry.get("subresource")


def _legacy_fields(entries: Iterable[Mapping[str, Any]]) -> FieldSet:
    owned: FieldSet = {}
    for entry in entries:
        if _is_legacy(entry):
            owned = _union(owned, entry.get("fieldsV1") or {})
    return owned


def _union(a: FieldSet, b: FieldSet) -> FieldSet:
    out = dict(a)
    for key, sub in b.items():
        out[key] = _union(out[key], sub) if key in out else sub
    return out


def _intersect(fields: FieldSet, select: FieldSet) -> FieldSet:
    """The part of ``fields`` that ``select`` names; a leaf of ``select`` takes the whole subtree."""
    out: FieldSet = {}
    for key, sub in fields.items():
        if key not in select:
            continue
        if not select[key]:
            out[key] = sub
        elif sub:
            inner = _intersect(sub, select[key])
            if inner:
                out[key] = inner
    return out


def _subtract(fields: FieldSet, select: FieldSet) -> FieldSet:
    """``fields`` without what ``select`` names (a field owned as a whole stays unless named whole)."""
    out: FieldSet = {}
    for key, sub in fields.items():
        if key not in select:
            out[key] = sub
        elif select[key] and sub:
            inner = _subtract(sub, select[key])
            if inner:
                out[key] = inner
        elif select[key]:
            out[key] = sub
    return out

"""Compact copies of what the controller keeps in memory per object.

Why: at 10,000 SecretSyncs every kilobyte kept per object is 10 MiB of the operator's 200 MiB
budget. Measured per object (5 keys, one source): the body as the apiserver sends it 12.2 KB
(half of it ``managedFields``), its parsed pydantic model 9.2 KB, its status dict 2.8 KB, the
cached target Secret 3.6 KB. What is kept instead: the body without ``managedFields``, status
and ``last-applied-configuration`` (1.1 KB), parsed again at each reconcile (~20 µs); status
and the target with their dict keys and short values interned (1.1 KB and 1.4 KB), because JSON
decoding gives every object its own copy of "lastTransitionTime", "Ready", "Synced" ...
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final, cast

LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
_SYNC_META: Final = ("name", "namespace", "uid", "generation", "labels", "annotations")
_TARGET_META: Final = ("name", "namespace", "resourceVersion", "labels", "annotations", "ownerReferences")
_INTERN_MAX: Final = 64
"""Strings up to this length are interned: keys, reasons, kinds, names, timestamps, short
messages. Longer ones (base64 data, HMACs) are rarely shared and stay as they are."""


def interned(value: Any) -> Any:
    """A copy of a JSON value whose dict keys and short strings are shared process-wide."""
    if isinstance(value, dict):
        return {sys.intern(k): interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [interned(v) for v in value]
    if isinstance(value, str) and len(value) <= _INTERN_MAX:
        return sys.intern(value)
    return value


def _metadata(meta: Mapping[str, Any], keep: tuple[str, ...]) -> dict[str, Any]:
    out = {k: meta[k] for k in keep if k in meta}
    annotations = out.get("annotations")
    if annotations and LAST_APPLIED in annotations:
        out["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    return out


def sync_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """What a SecretSync's reconcile parses: identity, metadata it reads, and the spec; no status."""
    slim = interned(
        {
            "apiVersion": body.get("apiVersion"),
            "kind": body.get("kind"),
            "metadata": _metadata(body.get("metadata") or {}, _SYNC_META),
            "spec": body.get("spec"),
        }
    )
    return cast("dict[str, Any]", slim)


def status(value: Mapping[str, Any] | None) -> dict[str, Any]:
    """A SecretSync's status as the baseline for "does status need a patch?"."""
    return cast("dict[str, Any]", interned(dict(value or {})))


def target(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A managed Secret/ConfigMap with only what the drift checks and echo detection read."""
    out: dict[str, Any] = {"kind": obj.get("kind", "Secret")}
    if "type" in obj:
        out["type"] = obj["type"]
    for field in ("data", "binaryData"):
        if obj.get(field) is not None:
            out[field] = obj[field]
    out["metadata"] = _metadata(obj.get("metadata") or {}, _TARGET_META)
    return cast("dict[str, Any]", interned(out))

"""Does the target need a write? A chain of small pure checks over (desired, actual).

``actual`` is the object as read from the apiserver (Secret ``data`` base64-encoded; a ConfigMap's
text in ``data`` and its bytes base64-encoded in ``binaryData``), or None. Values are compared
as the bytes they stand for (rendering/binary.py), so text and binary values alike. Each
check returns a reason or None; the first reason wins. Labels and annotations are compared as
subsets: other controllers and people may add their own, and that is not drift.

Key removal follows the policies carried by the DesiredObject:

=================  ==============================================  =============================
creationPolicy     deletionPolicy Delete removes                   deletionPolicy Retain removes
=================  ==============================================  =============================
Owner / Orphan     every key not desired                           keys neither desired nor
                                                                   previously synced (foreign)
Merge              previously synced keys no longer desired        nothing
=================  ==============================================  =============================

So with Retain, keys that vanished at the service stay in the target; the caller keeps reporting
them in ``status.syncedKeys`` (see retained_keys) so that they remain recognisably ours.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final

from secretferry.reconcile.desired import DesiredObject
from secretferry.reconcile.rendering import binary

MISSING: Final = "missing"
TYPE_CHANGED: Final = "type-changed"  # immutable: delete and recreate, if guards.py allows it
DATA_CHANGED: Final = "data-changed"
LABELS_CHANGED: Final = "labels-changed"
ANNOTATIONS_CHANGED: Final = "annotations-changed"
OWNER_MISSING: Final = "owner-missing"

Actual = Mapping[str, Any]


def actual_data(actual: Actual) -> dict[str, bytes | None]:
    """The target's data as bytes (a ConfigMap's ``binaryData`` too); a value that is not valid
    base64 reads as None (so: differs)."""
    raw: Mapping[str, str] = actual.get("data") or {}
    if actual.get("kind", "Secret") == "ConfigMap":
        binary_data: Mapping[str, str] = actual.get("binaryData") or {}
        return {
            **{key: _decode(value) for key, value in binary_data.items()},
            **{key: value.encode() for key, value in raw.items()},
        }
    return {key: _decode(value) for key, value in raw.items()}


def actual_keys(actual: Actual) -> set[str]:
    """Every key the target holds (a ConfigMap's ``binaryData`` keys too)."""
    return set(actual.get("data") or {}) | set(actual.get("binaryData") or {})


def _decode(value: str) -> bytes | None:
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error:
        return None


def previously_synced(status: Mapping[str, Any], *, kind: str, name: str) -> list[str]:
    """``status.syncedKeys`` if they were synced into this very target, else nothing.

    Keys written into a former target (``spec.target`` changed) say nothing about this one: taken
    for ours, a Merge with deletionPolicy Delete would remove the owner's keys of the same name. A
    status from before ``status.target`` existed is trusted, so that retained keys survive.
    """
    target = status.get("target")
    if target and (target.get("kind"), target.get("name")) != (kind, name):
        return []
    return list(status.get("syncedKeys") or [])


def keys_to_remove(
    desired: DesiredObject, actual: Actual | None, previously_synced: Collection[str]
) -> set[str]:
    """Keys present in the target that the next write must drop (see the module docstring)."""
    if actual is None:
        return set()
    extra = actual_keys(actual) - set(desired.string_data)
    if desired.creation_policy == "Merge":
        return extra & set(previously_synced) if desired.deletion_policy == "Delete" else set()
    return extra if desired.deletion_policy == "Delete" else extra - set(previously_synced)


def retained_keys(
    desired: DesiredObject, actual: Actual | None, previously_synced: Collection[str]
) -> set[str]:
    """Previously synced keys that stay in the target although no longer desired (Retain)."""
    if actual is None:
        return set()
    extra = actual_keys(actual) - set(desired.string_data)
    return (extra & set(previously_synced)) - keys_to_remove(desired, actual, previously_synced)


def _type(desired: DesiredObject, actual: Actual, _: Collection[str]) -> str | None:
    if desired.type is not None and actual.get("type", "Opaque") != desired.type:
        return TYPE_CHANGED
    return None


def _data(desired: DesiredObject, actual: Actual, previously_synced: Collection[str]) -> str | None:
    current = actual_data(actual)
    if any(current.get(key) != binary.as_bytes(value) for key, value in desired.string_data.items()):
        return DATA_CHANGED
    if desired.kind == "ConfigMap" and _moved(desired, actual):
        return DATA_CHANGED
    if keys_to_remove(desired, actual, previously_synced):
        return DATA_CHANGED
    return None


def _moved(desired: DesiredObject, actual: Actual) -> bool:
    """A ConfigMap value in the other map than it belongs in (text in ``binaryData``, bytes in
    ``data``): the same bytes, yet a write is due to put it where readers of text look."""
    text = actual.get("data") or {}
    return any((key in text) != isinstance(value, str) for key, value in desired.string_data.items())


def _subset(wanted: Mapping[str, str], present: Mapping[str, str] | None) -> bool:
    present = present or {}
    return all(present.get(k) == v for k, v in wanted.items())


def _labels(desired: DesiredObject, actual: Actual, _: Collection[str]) -> str | None:
    ok = _subset(desired.labels, actual.get("metadata", {}).get("labels"))
    return None if ok else LABELS_CHANGED


def _annotations(desired: DesiredObject, actual: Actual, _: Collection[str]) -> str | None:
    ok = _subset(desired.annotations, actual.get("metadata", {}).get("annotations"))
    return None if ok else ANNOTATIONS_CHANGED


def _owner(desired: DesiredObject, actual: Actual, _: Collection[str]) -> str | None:
    if desired.owner is None:
        return None
    refs = actual.get("metadata", {}).get("ownerReferences") or []
    return None if any(r.get("uid") == desired.owner.uid for r in refs) else OWNER_MISSING


_Check = Callable[[DesiredObject, Actual, Collection[str]], str | None]
# Type first: a type change needs a delete + create, which also rewrites everything else.
_CHECKS: Final[tuple[_Check, ...]] = (_type, _data, _labels, _annotations, _owner)


def needs_write(
    desired: DesiredObject, actual: Actual | None, *, previously_synced: Collection[str] = ()
) -> str | None:
    """Why the target must be written, or None when a write would change nothing.

    ``previously_synced`` is ``status.syncedKeys``: it tells keys we wrote (and may retain) from
    keys someone else put there.
    """
    if actual is None:
        return MISSING
    for check in _CHECKS:
        reason = check(desired, actual, previously_synced)
        if reason is not None:
            return reason
    return None

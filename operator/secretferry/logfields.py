"""Structured fields of a log line about one object, passed as ``extra=`` to a stdlib logger.

Why fields and not only text: a log collector can then select every line about one SecretSync,
identity or reason without parsing sentences. The JSON formatter (``handlers/runtime.py``) prints
them as top-level keys; kopf's own per-object lines (``extra["k8s_ref"]``) are mapped to the
same keys there. Values are names, kinds and reasons, never secret data.

The object's name travels as ``object_name`` because ``name`` is the ``LogRecord`` attribute
holding the logger's name (``extra={"name": ...}`` raises); the formatters print it as ``name``.
"""

from __future__ import annotations

from typing import Final

KIND: Final = "kind"
NAMESPACE: Final = "namespace"
NAME: Final = "object_name"
IDENTITY: Final = "identity"
SCOPE: Final = "scope"
REASON: Final = "reason"
TARGET: Final = "target"
# In this order in text lines; also what the formatters look for.
FIELDS: Final = (KIND, NAMESPACE, NAME, IDENTITY, SCOPE, REASON, TARGET)
SECRET_SYNC: Final = "SecretSync"  # models.secretsync.SECRET_SYNC_KIND; kube/ may not import models


def about(kind: str, namespace: str | None, name: str, **more: str | None) -> dict[str, str]:
    """Fields naming one object, plus ``more`` (``identity=``, ``scope=``, ``reason=``, ``target=``);
    None and empty values are left out, so a cluster-scoped object has no ``namespace``."""
    fields = {KIND: kind, NAMESPACE: namespace, NAME: name, **more}
    return {k: v for k, v in fields.items() if v}


def sync(key: tuple[str, str], **more: str | None) -> dict[str, str]:
    """Fields for a SecretSync by its (namespace, name) key."""
    return about(SECRET_SYNC, key[0], key[1], **more)

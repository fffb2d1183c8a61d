"""The rendered target as YAML: values masked by default.

Masked, each value is ``<redacted N bytes>`` (its length, which a template author checks against
what they expect, and nothing of its content), so the output can be pasted into a ticket. With
``--show-values``: text values under ``stringData`` and binary ones base64 in ``data`` — an
object that ``kubectl apply`` would turn into the same Secret, readable as it is. A ConfigMap
target keeps its ``data``/``binaryData`` shape either way.

The operator's data-HMAC annotation is left out: it is keyed with the operator's secret key,
which the command does not have (render.py).
"""

from __future__ import annotations

import base64
from typing import Any

import yaml

from secretferry.models import labels
from secretferry.reconcile import desired
from secretferry.reconcile.rendering import binary


def redacted(value: str | bytes) -> str:
    return f"<redacted {len(binary.as_bytes(value))} bytes>"


def manifest(want: desired.DesiredObject, *, show_values: bool) -> dict[str, Any]:
    body = want.manifest()
    annotations = body["metadata"].get("annotations") or {}
    annotations.pop(labels.DATA_HMAC_ANNOTATION, None)
    if not annotations:
        body["metadata"].pop("annotations", None)
    body.pop("data", None)
    body.pop("binaryData", None)
    values = want.string_data
    if not show_values:
        body["data"] = {k: redacted(v) for k, v in values.items()}
        return body
    # Bytes here are never UTF-8 text (desired.py keeps such values as str).
    texts = {k: v for k, v in values.items() if isinstance(v, str)}
    raw = {k: base64.b64encode(v).decode() for k, v in values.items() if isinstance(v, bytes)}
    if want.kind == "Secret":
        if texts:
            body["stringData"] = texts
        if raw:
            body["data"] = raw
    else:
        body["data"] = texts
        if raw:
            body["binaryData"] = raw
    return body


def render(want: desired.DesiredObject, *, show_values: bool) -> str:
    return yaml.safe_dump(manifest(want, show_values=show_values), sort_keys=False, allow_unicode=True)

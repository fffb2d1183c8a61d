"""A status patch checked against the committed CRD (``crds/``), as the apiserver would read it.

Why not just compare key sets: the apiserver silently prunes a field its structural schema does
not name, so a misspelt status field would be lost without an error. This walks the patch and the
schema together and reports every key the CRD lacks, every type, enum or limit it breaks, and
every timestamp not in the form Kubernetes writes (whole seconds, UTC, ``Z``).
"""

from __future__ import annotations

import math
import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml

CRD_DIR = Path(__file__).resolve().parents[3] / "crds"
_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "boolean": bool,
}
_WIRE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


@cache
def status_schema(plural: str) -> dict[str, Any]:
    crd = yaml.safe_load((CRD_DIR / f"{plural}.secretferry.io.yaml").read_text(encoding="utf-8"))
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    return schema


def problems(value: Any, schema: dict[str, Any], at: str = "status") -> list[str]:
    """Everything in ``value`` the schema would prune or refuse; empty when it fits."""
    kind = schema["type"]
    if not _is(value, kind):
        return [f"{at}: {value!r} is not {kind}"]
    found: list[str] = []
    if kind == "object":
        names = schema.get("properties", {})
        found += [f"{at}.{key}: not in the CRD" for key in value if key not in names]
        found += [f"{at}.{key}: required" for key in schema.get("required", []) if key not in value]
        for key, sub in value.items():
            if key in names:
                found += problems(sub, names[key], f"{at}.{key}")
    elif kind == "array":
        if len(value) > schema.get("maxItems", math.inf):
            found.append(f"{at}: more than {schema['maxItems']} items")
        if schema.get("x-kubernetes-list-type") == "map":
            keys = [tuple(item.get(k) for k in schema["x-kubernetes-list-map-keys"]) for item in value]
            if len(set(keys)) != len(keys):
                found.append(f"{at}: duplicate map keys {keys}")
        for i, item in enumerate(value):
            found += problems(item, schema["items"], f"{at}[{i}]")
    elif kind == "string":
        if "enum" in schema and value not in schema["enum"]:
            found.append(f"{at}: {value!r} not one of {schema['enum']}")
        if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", math.inf):
            found.append(f"{at}: length {len(value)} out of bounds")
        if schema.get("format") == "date-time" and not _WIRE_TIME.match(value):
            found.append(f"{at}: {value!r} is not a whole-second UTC timestamp")
    elif kind == "integer" and value < schema.get("minimum", -math.inf):
        found.append(f"{at}: below {schema['minimum']}")
    return found


def _is(value: Any, kind: str) -> bool:
    return isinstance(value, _TYPES[kind]) and not (kind == "integer" and isinstance(value, bool))

"""Building blocks shared by every custom resource model.

Every model parses a raw Kubernetes body (camelCase keys) and is also constructible by field name.
Unknown fields are ignored, not rejected: the apiserver already prunes them with the structural
schema, and an operator older than its CRD must still read newer objects.

CEL rules (``x-kubernetes-validations``) sit next to the pydantic validator that enforces the same
thing, so that ``secretferry crds`` and the operator cannot disagree about what is valid.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

GROUP: Final = "secretferry.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

# Go-style durations as CEL's duration() accepts them, restricted to whole h/m/s so that the
# pattern (RE2, as the apiserver evaluates it) and parse_duration() agree exactly.
DURATION_PATTERN: Final = r"^([0-9]+h)?([0-9]+m)?([0-9]+s)?$"
_DURATION_RE: Final = re.compile(r"(?:(?P<h>[0-9]+)h)?(?:(?P<m>[0-9]+)m)?(?:(?P<s>[0-9]+)s)?")

# A DNS-1123 subdomain: what Secret, ConfigMap and most object names must be.
DNS_SUBDOMAIN_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_SUBDOMAIN_MAX: Final = 253  # Kubernetes object-name limit


def parse_duration(text: str) -> float:
    """Seconds in a duration string such as ``30s``, ``5m``, ``1h30m``.

    Raises ValueError for anything else (empty string included); the message never repeats the
    input, because callers put it into status conditions.
    """
    match = _DURATION_RE.fullmatch(text) if text else None
    if match is None or not any(match.groupdict().values()):
        raise ValueError("must be a duration such as 30s, 5m, 1h or 1h30m")
    hours, minutes, seconds = (int(match.group(g) or 0) for g in ("h", "m", "s"))
    return float(hours * 3600 + minutes * 60 + seconds)


def cel(rule: str, message: str, *, field_path: str | None = None) -> dict[str, str]:
    """One ``x-kubernetes-validations`` entry."""
    entry = {"rule": rule, "message": message}
    if field_path is not None:
        entry["fieldPath"] = field_path
    return entry


def validations(*rules: dict[str, str]) -> dict[str, Any]:
    """``json_schema_extra`` carrying CEL rules for a model or field."""
    return {"x-kubernetes-validations": list(rules)}


class CRModel(BaseModel):
    """Base for every spec/status fragment: camelCase aliases, immutable, tolerant of new fields."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        frozen=True,
        extra="ignore",
    )


class ObjectMeta(CRModel):
    """The part of ``metadata`` the operator reads."""

    name: str
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class Condition(CRModel):
    """A Kubernetes-style status condition (the shape of ``metav1.Condition``)."""

    type: str = Field(min_length=1, max_length=316)  # metav1.Condition limits
    """Condition type, e.g. ``Ready``."""
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(default="", max_length=1024)
    """CamelCase reason, one of the constants in ``secretferry.reconcile.reasons``."""
    message: str = Field(default="", max_length=32768)
    """Human-readable detail. Names keys and fields, never secret values."""
    observed_generation: int | None = Field(default=None, ge=0)
    last_transition_time: datetime | None = None


def conditions_field() -> Any:
    """``conditions`` list, declared as a list-map keyed by type (server-side-apply friendly)."""
    return Field(
        default_factory=list,
        max_length=16,  # a handful of condition types exist; bounds the stored status
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


def find_condition(conditions: list[Condition], type_: str) -> Condition | None:
    """The condition of the given type, if present."""
    return next((c for c in conditions if c.type == type_), None)


class SecretKeyRef(CRModel):
    """A key of a Secret in the referring object's own namespace."""

    name: str = Field(min_length=1, max_length=DNS_SUBDOMAIN_MAX)
    key: str = Field(min_length=1, max_length=DNS_SUBDOMAIN_MAX)


class ClusterSecretKeyRef(SecretKeyRef):
    """A key of a Secret; a cluster-scoped referrer must say which namespace."""

    namespace: str = Field(min_length=1, max_length=63)  # namespace names are DNS labels


class LabelSelectorRequirement(CRModel):
    key: str = Field(min_length=1, max_length=317)  # prefix (253) + "/" + name (63)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list, max_length=256)


class LabelSelector(CRModel):
    """``metav1.LabelSelector``: all of matchLabels and matchExpressions must hold."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list, max_length=64)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy the selector (an empty selector matches everything)."""
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        for req in self.match_expressions:
            present = req.key in labels
            ok = {
                "In": present and labels.get(req.key) in req.values,
                "NotIn": not present or labels.get(req.key) not in req.values,
                "Exists": present,
                "DoesNotExist": not present,
            }[req.operator]
            if not ok:
                return False
        return True


def lenient_status(body: Mapping[str, Any], status_model: type[BaseModel]) -> dict[str, Any]:
    """The body with an unreadable status dropped: status is ours, a bad one must not block reconcile."""
    data = dict(body)
    status = data.get("status")
    if status is not None:
        try:
            status_model.model_validate(status)
        except ValueError:
            data.pop("status")
    return data

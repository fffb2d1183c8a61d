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
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, PlainSerializer
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
        # Built on first use, not at import: start-up is on the way to the first Secret written.
        defer_build=True,
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


TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"
"""How Kubernetes writes a ``metav1.Time``: RFC 3339 in UTC, whole seconds."""


def _wire_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime(TIME_FORMAT)


Time = Annotated[AwareDatetime, PlainSerializer(_wire_time, return_type=str, when_used="json")]
"""A timestamp in a status: written exactly as Kubernetes writes its own (``TIME_FORMAT``), so a
value read back compares equal to the one written, and a naive datetime cannot get in."""


class StatusModel(CRModel):
    """Base for every status fragment: written by this operator only, so a misspelt field is an error.

    Why ``extra="forbid"`` here and not in CRModel: with it the pydantic mypy plugin gives
    ``__init__`` no ``**kwargs``, so ``SecretSyncStatus(synced_key=...)`` fails type checking (and
    validation at run time) instead of silently dropping the value. Reading loses nothing: the
    apiserver prunes fields its CRD does not know, and a status this version cannot read is dropped
    by ``lenient_status``; the operator itself never reads status through these models.
    """

    model_config = ConfigDict(extra="forbid")


CONDITION_MESSAGE_MAX: Final = 32768  # metav1.Condition's limit on message


class Condition(StatusModel):
    """A Kubernetes-style status condition (the shape of ``metav1.Condition``)."""

    type: str = Field(min_length=1, max_length=316)  # metav1.Condition limits
    """Condition type, e.g. ``Ready``."""
    status: Literal["True", "False", "Unknown"]
    """Whether the condition holds."""
    reason: str = Field(default="", max_length=1024)
    """CamelCase reason, one of the constants in ``secretferry.reconcile.reasons``."""
    message: str = Field(default="", max_length=CONDITION_MESSAGE_MAX)
    """Human-readable detail. Names keys and fields, never secret values."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The metadata.generation this condition was set for: older than the object's means it is
    not up to date with the latest spec."""
    last_transition_time: Time | None = None
    """When status last changed (a new reason or message with the same status does not move it)."""


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
    """Name of the Secret."""
    key: str = Field(min_length=1, max_length=DNS_SUBDOMAIN_MAX)
    """Key in the Secret's data."""


class ClusterSecretKeyRef(SecretKeyRef):
    """A key of a Secret; a cluster-scoped referrer must say which namespace."""

    namespace: str = Field(min_length=1, max_length=63)  # namespace names are DNS labels
    """Namespace of the Secret."""


class LabelSelectorRequirement(CRModel):
    """One requirement on a label, e.g. ``{key: env, operator: In, values: [prod, staging]}``."""

    key: str = Field(min_length=1, max_length=317)  # prefix (253) + "/" + name (63)
    """Label key the requirement is about, e.g. ``env``."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """In: the label's value is one of values. NotIn: the label is absent or its value is none of
    values. Exists / DoesNotExist: the label is present / absent, whatever its value."""
    values: list[str] = Field(default_factory=list, max_length=256)
    """Label values for In and NotIn; ignored by Exists and DoesNotExist."""


class LabelSelector(CRModel):
    """``metav1.LabelSelector``: all of matchLabels and matchExpressions must hold."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    """Labels that must all be present with exactly these values, e.g. ``{team: payments}``."""
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list, max_length=64)
    """Label requirements that must all hold, in addition to matchLabels."""

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

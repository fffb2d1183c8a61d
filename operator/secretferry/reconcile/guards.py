"""May the target be written at all? Small pure checks over what was fetched and what is there.

drift.py answers "does the target differ?"; this module answers the question before it. Each
check returns a ``problems.Problem`` or None; the first problem wins, and any problem means that
nothing is written (status says why). Two chains:

- **sources**, before anything is built: a recursive listing that reaches the service's depth
  limit (``SourceTooDeep``: deeper folders are not listed, so the data may be incomplete); a
  source that lists nothing, or whose key filters keep nothing, while ``spec.allowEmpty`` is
  false (``SourceEmpty``). The service answers a folder that does not exist exactly like an
  empty one (200 with empty lists), so a mistyped or deleted path must not empty a Secret.
- **target**, before anything is read: names never written (Helm release records, Secrets and
  ConfigMaps alike; its own HMAC key: ``TargetProtected``); labels, annotations or a type that
  another controller reads as ownership or orders (``TargetMetadataForbidden``, see
  ``models.reserved``). Once the existing object is known: objects the operator never
  writes whatever their labels say (ServiceAccount and bootstrap tokens, Helm release records:
  ``TargetProtected``); Merge only into an existing object whose ``secretferry.io/merge-from``
  annotation names this SecretSync (``TargetNotFound``, ``TargetNotOptedIn``); Owner/Orphan
  only into objects labelled as this SecretSync's (``TargetConflict``); never a type change
  (a delete and a create) of an object holding keys this SecretSync did not write
  (``TargetConflict``).

Why an annotation for Merge: setting it takes write access to that very object, so a user who
may only create SecretSyncs cannot opt a Secret in; and it names SecretSyncs, so one opt-in does
not admit every SecretSync of the namespace. Messages name counts, kinds and names; never values,
and never the keys of an object the SecretSync's author may not be able to read.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from secretferry.models import labels, reserved, secretsync
from secretferry.reconcile import problems, reasons
from secretferry.reconcile.desired import DesiredObject, FetchedSource, select_keys

Actual = Mapping[str, Any]

# docs/service-api.md: a recursive list goes at most 20 folders deep and says nothing when it stops.
MAX_LIST_DEPTH: Final = 20
PROTECTED_SECRET_TYPES: Final = frozenset(secretsync.FORBIDDEN_SECRET_TYPES)
# Helm's Secret storage names every release record so (sh.helm.release.v1.<release>.v<revision>).
HELM_RELEASE_PREFIX: Final = "sh.helm.release.v1."
_ALLOW_EMPTY_HINT: Final = "the target was left as it is (spec.allowEmpty: true syncs an empty source)"


@dataclass(frozen=True, slots=True)
class Protected:
    """Where the operator keeps its own Secret, which no SecretSync may write."""

    namespace: str
    hmac_key_secret: str


# --- sources --------------------------------------------------------------------------------------


def relative_depth(root: str, path: str | None) -> int:
    """Folders between ``root`` and ``path``: 0 for the same folder, an unknown path, or one that
    is not below ``root`` (an import's folder, say, which the depth limit does not apply to)."""
    if not path:
        return 0
    base = [part for part in root.split("/") if part]
    parts = [part for part in path.split("/") if part]
    if parts[: len(base)] != base:
        return 0
    return len(parts) - len(base)


def source_problem(sync: secretsync.SecretSync, fetched: Sequence[FetchedSource]) -> problems.Problem | None:
    """Why the fetched sources must not be synced, or None. ``fetched`` follows ``spec.sources``."""
    pairs = list(zip(sync.spec.sources, fetched, strict=True))
    checks: list[_SourceCheck] = [_too_deep]
    if not sync.spec.allow_empty:
        checks.append(_empty)
    for check in checks:  # every source for one check before the next: depth outranks emptiness
        for index, (source, got) in enumerate(pairs, start=1):
            problem = check(index, source, got)
            if problem is not None:
                return problem
    return None


_SourceCheck = Callable[[int, secretsync.Source, FetchedSource], problems.Problem | None]


def _where(index: int, source: secretsync.Source) -> str:
    if source.generator_ref is not None:
        return f"source {index} ({source.generator_ref.kind} {source.generator_ref.name})"
    project = source.project_id or source.project_slug
    return f"source {index} (project {project} environment {source.environment} path {source.path})"


def _too_deep(index: int, source: secretsync.Source, got: FetchedSource) -> problems.Problem | None:
    if not source.recursive or got.depth < MAX_LIST_DEPTH:
        return None
    return problems.Problem(
        reasons.SOURCE_TOO_DEEP,
        f"{_where(index, source)} reaches the service's recursive depth limit of {MAX_LIST_DEPTH}"
        " folders: deeper folders are not listed, so the data may be incomplete and the target was"
        " left as it is; point path at a deeper folder, split the tree into several sources, or"
        " flatten it",
    )


def _empty(index: int, source: secretsync.Source, got: FetchedSource) -> problems.Problem | None:
    listed: dict[str, str] = {}
    for imported in got.imported:
        listed.update(imported)
    listed.update(got.direct)
    if not listed:
        return problems.Problem(
            reasons.SOURCE_EMPTY,
            f"{_where(index, source)} lists no secrets: the path does not exist, is empty, or its"
            f" tag/metadata filters match nothing, or environment {source.environment!r} does not"
            f" exist (some servers list an unknown environment as empty); {_ALLOW_EMPTY_HINT}",
        )
    if not select_keys(listed, include=source.include_keys, exclude=source.exclude_keys):
        return problems.Problem(
            reasons.SOURCE_EMPTY,
            f"{_where(index, source)} lists {len(listed)} secrets, but includeKeys/excludeKeys keep"
            f" none; {_ALLOW_EMPTY_HINT}",
        )
    return None


# --- target ---------------------------------------------------------------------------------------


def merge_admits(annotations: Mapping[str, str] | None, sync_name: str) -> bool:
    """Whether the object's merge-from annotation lists ``sync_name`` (comma-separated, exact)."""
    value = (annotations or {}).get(labels.MERGE_FROM_ANNOTATION) or ""
    return sync_name in {name.strip() for name in value.split(",") if name.strip()}


def protected_name(desired: DesiredObject, protected: Protected) -> problems.Problem | None:
    """Targets refused by name alone, before anything is read or created. Helm's ConfigMap driver
    names its records as its Secret driver does, and ``helm rollback`` reads them by name."""
    what = _what(desired)
    secret = desired.kind == "Secret"
    if secret and desired.namespace == protected.namespace and desired.name == protected.hmac_key_secret:
        return problems.Problem(
            reasons.TARGET_PROTECTED, f"{what} holds the operator's HMAC key; no SecretSync writes it"
        )
    if desired.name.startswith(HELM_RELEASE_PREFIX):
        return problems.Problem(
            reasons.TARGET_PROTECTED,
            f"{what} is named like a Helm release record; no SecretSync writes it",
        )
    return None


def reserved_marks(
    desired: DesiredObject, target: secretsync.Target, *, rules: reserved.Rules = reserved.NO_RULES
) -> problems.Problem | None:
    """Labels, annotations or a type the SecretSync asked for that another controller reads as
    ownership or orders (``models.reserved``): refused before anything is read or written,
    for every creation policy. Only what ``target`` asks for counts: the operator's own labels and
    annotations are added after it (desired.py). Keys are named, label values only for Helm's
    ``owner=helm``; ``rules`` are the admin's additions."""
    found = [
        f"label {key}={value} ({reader})"
        if (key, value) == reserved.HELM_OWNER_LABEL
        else f"label {key} ({reader})"
        for key, value in sorted(target.labels.items())
        if (reader := reserved.label_reader(key, value, rules)) is not None
    ]
    found += [
        f"annotation {key} ({reader})"
        for key in sorted(target.annotations)
        if (reader := reserved.key_reader(key, rules)) is not None
    ]
    if desired.type is not None and (reader := reserved.type_reader(desired.type)) is not None:
        found.append(f"type {desired.type} ({reader})")
    if not found:
        return None
    return problems.Problem(
        reasons.TARGET_METADATA_FORBIDDEN,
        f"spec.target asks for what other controllers read as ownership or orders: {'; '.join(found)};"
        f" no SecretSync sets these, and nothing was written to {_what(desired)}: remove them",
    )


def target_problem(
    desired: DesiredObject,
    actual: Actual | None,
    *,
    previously_synced: Collection[str],
    protected: Protected,
) -> problems.Problem | None:
    """``(reason, message)`` when the target must not be written at all, else None.

    ``actual`` is the object as read (None: it does not exist); ``previously_synced`` the keys
    this SecretSync wrote into this very target (see ``drift.previously_synced``).
    """
    problem = protected_name(desired, protected)
    if problem is not None:
        return problem
    if actual is None:
        if desired.creation_policy == "Merge":
            what = f"{desired.kind} {desired.name!r}"
            # A Merge target is not watched (it carries no label of ours): its creation is
            # noticed by trying again.
            return problems.Problem(
                reasons.TARGET_NOT_FOUND,
                f"{what} does not exist (creationPolicy Merge writes into it)",
                retriable=True,
            )
        return None
    for check in _TARGET_CHECKS:
        problem = check(desired, actual, previously_synced)
        if problem is not None:
            return problem
    return None


def _what(desired: DesiredObject) -> str:
    return f"{desired.kind} {desired.name!r}"


def _protected_type(desired: DesiredObject, actual: Actual, _: Collection[str]) -> problems.Problem | None:
    kind = actual.get("type")
    if desired.kind != "Secret" or kind not in PROTECTED_SECRET_TYPES:
        return None
    return problems.Problem(
        reasons.TARGET_PROTECTED, f"{_what(desired)} is of type {kind}, which no SecretSync writes"
    )


def _opted_in(desired: DesiredObject, actual: Actual, _: Collection[str]) -> problems.Problem | None:
    if desired.creation_policy != "Merge":
        return None
    if merge_admits((actual.get("metadata") or {}).get("annotations"), desired.sync_name):
        return None
    return problems.Problem(
        reasons.TARGET_NOT_OPTED_IN,
        f"{_what(desired)} has not opted in: creationPolicy Merge writes only into an object whose"
        f" annotation {labels.MERGE_FROM_ANNOTATION} lists this SecretSync ({desired.sync_name});"
        " whoever may write that object can add it",
        retriable=True,  # as for a missing Merge target: the opt-in is noticed by trying again
    )


def _labelled_ours(desired: DesiredObject, actual: Actual, _: Collection[str]) -> problems.Problem | None:
    if desired.creation_policy == "Merge":
        return None
    present = ((actual.get("metadata") or {}).get("labels") or {}).get(labels.SYNC_LABEL)
    if present == desired.labels.get(labels.SYNC_LABEL):
        return None
    owner = "another SecretSync" if present else "something else"
    return problems.Problem(
        reasons.TARGET_CONFLICT,
        f"{_what(desired)} exists and belongs to {owner}; to write into it, creationPolicy Merge and"
        f" its owner's opt-in ({labels.MERGE_FROM_ANNOTATION}) are needed",
    )


def _type_change(
    desired: DesiredObject, actual: Actual, previously_synced: Collection[str]
) -> problems.Problem | None:
    """A Secret's type is immutable: changing it means delete and create, which would lose every
    key we did not write. Only a Secret holding nothing but our keys may be replaced."""
    if desired.type is None:
        return None
    current = actual.get("type") or "Opaque"
    if current == desired.type:
        return None
    foreign = set(actual.get("data") or {}) - set(previously_synced)
    if not foreign:
        return None
    return problems.Problem(
        reasons.TARGET_CONFLICT,
        f"{_what(desired)} is of type {current} and holds {len(foreign)} key(s) this SecretSync did"
        f" not write; changing its type to {desired.type} would mean deleting it, which the operator"
        f" does not do: set spec.target.type to {current}, or replace the Secret yourself",
    )


_TargetCheck = Callable[[DesiredObject, Actual, Collection[str]], problems.Problem | None]
# Protection first: whatever else is true of a ServiceAccount token, it is not ours to write.
_TARGET_CHECKS: Final[tuple[_TargetCheck, ...]] = (_protected_type, _opted_in, _labelled_ours, _type_change)

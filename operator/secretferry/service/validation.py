"""Input checks run before a request is sent (limits from docs/service-api.md, rules of the real server
from docs/service-contract.md and the real request schemas).

A call that the service would refuse, or would silently read otherwise, fails here without a round
trip, as ``errors.ValidationError`` whose ``field`` is the field's wire name (``identityId``,
``slug``, ``permissions.0.action``, …). Messages name the field and the rule, never the value.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping, Sequence, Sized
from typing import Any

from secretferry.service import errors, models

# docs/service-api.md, Limits: privilege slugs are 1 to 60 characters long.
SLUG_MAX_LENGTH = 60
# The real slug rule (``slugSchema`` and the privilege routers): lowercase words of ASCII letters and
# digits joined by single hyphens. The server trims (and newer versions lowercase) before checking,
# so " a " or "A" would be stored under another slug than the one we asked for: refused instead.
_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*", re.ASCII)

# ``IdentityProjectAdditionalPrivilegeTemporaryMode`` has this one member.
TEMPORARY_MODES = ("relative",)

# zod's ``datetime()`` (what the v2 ``type`` takes as a start time): UTC with "Z", seconds required.
_ZOD_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?Z", re.ASCII)

# docs/service-api.md, event subscription: ``register`` carries 1 to 10 items.
MAX_EVENT_REGISTRATIONS = 10
MAX_METADATA_FILTERS = 10

# "a number followed by a unit letter, examples 1m, 1h, 1d"; the full grammar is not shown, so we
# accept the units the real service's duration parser (``ms``) understands in that short form.
_TEMPORARY_RANGE = re.compile(r"^[1-9][0-9]*(ms|s|m|h|d|w|y)$")

# Characters that separate pairs and members in ``metadataFilter`` (``key=a,value=b|key=c,value=d``).
_METADATA_FILTER_SEPARATORS = ("|", ",", "=")


def non_empty(value: str, *, field: str) -> str:
    """Require a string of at least one character (the API's ``minimum length 1``)."""
    if not isinstance(value, str) or not value:
        raise errors.ValidationError(f"{field} must be a non-empty string", field=field)
    return value


def slug(value: str, *, field: str = "slug") -> str:
    """Require a slug of 1 to ``SLUG_MAX_LENGTH`` characters in the real slug form (``_SLUG``)."""
    non_empty(value, field=field)
    if len(value) > SLUG_MAX_LENGTH:
        raise errors.ValidationError(
            f"{field} must be at most {SLUG_MAX_LENGTH} characters long", field=field
        )
    if not _SLUG.fullmatch(value):
        raise errors.ValidationError(
            f"{field} must be lowercase letters and digits joined by single hyphens", field=field
        )
    return value


def count(items: Sized, *, field: str, minimum: int, maximum: int | None = None) -> None:
    """Require ``minimum <= len(items) <= maximum``."""
    n = len(items)
    if n < minimum:
        raise errors.ValidationError(f"{field} needs at least {minimum} item(s), got {n}", field=field)
    if maximum is not None and n > maximum:
        raise errors.ValidationError(f"{field} takes at most {maximum} items, got {n}", field=field)


def temporary_range(value: str, *, field: str = "temporaryRange") -> str:
    """Require a duration such as ``30m``, ``1h`` or ``7d``."""
    if not isinstance(value, str) or not _TEMPORARY_RANGE.fullmatch(value):
        raise errors.ValidationError(
            f"{field} must be a positive number followed by a unit (s, m, h, d, w, y), e.g. 1h",
            field=field,
        )
    return value


def temporary_mode(value: str, *, field: str = "temporaryMode") -> str:
    """Require a mode the service knows (``TEMPORARY_MODES``)."""
    if value not in TEMPORARY_MODES:
        raise errors.ValidationError(f"{field} must be one of {', '.join(TEMPORARY_MODES)}", field=field)
    return value


def timestamp(value: datetime.datetime, *, field: str) -> str:
    """Format an aware datetime as ISO 8601 in UTC; naive datetimes are ambiguous and refused."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise errors.ValidationError(f"{field} must be timezone-aware", field=field)
    text = value.astimezone(datetime.UTC).isoformat()
    return text.removesuffix("+00:00") + "Z"


def metadata_filter_pair(key: str, value: str, *, field: str = "metadataFilter") -> None:
    """Refuse pairs that the ``key=..,value=..|..`` format cannot carry unambiguously: the service
    splits on the separators and trims, and silently DROPS a pair with an empty key or value, which
    would widen the listing to every secret."""
    non_empty(key, field=field)
    non_empty(value, field=field)
    for part in (key, value):
        if any(sep in part for sep in _METADATA_FILTER_SEPARATORS):
            raise errors.ValidationError(
                f"{field} keys and values must not contain '|', ',' or '='", field=field
            )
        if part != part.strip():
            raise errors.ValidationError(
                f"{field} keys and values must not start or end with whitespace (the service trims them)",
                field=field,
            )


# --- identity privileges -----------------------------------------------------------------------------
# The real server checks privilege bodies with zod, which STRIPS keys a schema does not name. In a
# permission that is not harmless: a dropped ``inverted`` turns a deny rule into an allow rule, a
# dropped condition widens the rule. So everything the service would drop is refused here, as is
# every shape it would refuse (with a 422, or with a 401 that reads as an expired token).

# v1 ``permissions`` items and ``privilegePermission.actions`` (``ProjectPermissionActions``).
V1_ACTIONS = ("read", "create", "edit", "delete")
# The only conditions of the v1 shapes: ``environment`` (a string) and ``secretPath: {$glob}``.
_V1_CONDITIONS = frozenset({"environment", "secretPath"})
_ANY_CONDITION = frozenset({"environment", "secretPath", "secretName", "secretTags", "eventType"})
_ENV_AND_PATH = frozenset({"environment", "secretPath"})
_NO_CONDITION: frozenset[str] = frozenset()  # conditions of its own, none that we can express
# v2 items (``ProjectPermissionV2Schema``): only these subjects take ``inverted`` and conditions; the
# value is which of the conditions ``models.PermissionConditions`` can carry that subject names.
_V2_CONDITIONS: Mapping[str, frozenset[str]] = {
    "secrets": _ANY_CONDITION,
    **dict.fromkeys(
        (
            "secret-folders",
            "secret-imports",
            "dynamic-secrets",
            "secret-rotation",
            "secret-syncs",
            "secret-events",
        ),
        _ENV_AND_PATH,
    ),
    **dict.fromkeys(
        (
            "identity",
            "certificate-authorities",
            "certificates",
            "certificate-templates",
            "ssh-hosts",
            "pki-subscribers",
            "pki-syncs",
            "app-connections",
            "pam-accounts",
            "certificate-profiles",
        ),
        _NO_CONDITION,
    ),
}


_WIDENS = " and the rule would cover more"
_ALLOWS = " and the deny rule would allow"


def _refuse(field: str, rule: str) -> errors.ValidationError:
    return errors.ValidationError(f"{field} {rule}", field=field)


def _only_keys(keys: Iterable[str], allowed: frozenset[str], *, field: str, why: str = "") -> None:
    """Keys the service would strip without a word are refused instead."""
    extra = sorted(set(keys) - allowed)
    if extra:
        raise _refuse(f"{field}.{extra[0]}", f"is not accepted here (the service would drop it{why})")


def privilege_rules(permissions: object | None, privilege_permission: object | None, *, field: str) -> None:
    """The v1 routes take their rules as ``permissions`` or ``privilegePermission``, exactly one.

    Neither: the real server answers 401 "Permission or privilegePermission must be provided", which
    reads as an expired token and would only make us log in again. Both: it silently ignores
    ``permissions``. An empty ``permissions`` list counts as given there (it grants nothing).
    """
    if (permissions is None) == (privilege_permission is None):
        raise _refuse(field, "needs exactly one of permissions and privilegePermission")


def _glob(value: object, *, field: str) -> None:
    """The v1 path condition: ``{$glob: <non-empty pattern>}`` and nothing else."""
    pattern = value.glob if isinstance(value, models.GlobPattern) else None
    if isinstance(value, Mapping):
        _only_keys(value, frozenset({"$glob"}), field=field)
        pattern = value.get("$glob")
    if not isinstance(pattern, str) or not pattern:
        raise _refuse(field, "must be {$glob: <pattern>} with a non-empty pattern")


def _subject(item: models.PermissionSent, *, field: str) -> str:
    if not isinstance(item.subject, str) or not item.subject:
        raise _refuse(f"{field}.subject", "must be one subject name")
    return item.subject


def _condition_keys(item: models.PermissionSent) -> set[str]:
    return set(item.conditions.model_dump(by_alias=True, exclude_none=True)) if item.conditions else set()


def v1_permissions(items: Sequence[models.PermissionSent], *, field: str) -> list[dict[str, Any]]:
    """v1 ``permissions`` items (``ProjectPermissionSchema``) in wire form: ONE basic action, no
    ``inverted``, conditions only ``environment`` and ``secretPath: {$glob}``."""
    for index, item in enumerate(items):
        at = f"{field}.{index}"
        _subject(item, field=at)
        if not isinstance(item.action, str) or item.action not in V1_ACTIONS:
            raise _refuse(f"{at}.action", f"must be one action of {', '.join(V1_ACTIONS)} (no list in v1)")
        if item.inverted:
            raise _refuse(f"{at}.inverted", f"is not accepted in v1 (the service would drop it{_ALLOWS})")
        _only_keys(_condition_keys(item), _V1_CONDITIONS, field=f"{at}.conditions", why=_WIDENS)
        if item.conditions is not None and item.conditions.secret_path is not None:
            _glob(item.conditions.secret_path, field=f"{at}.conditions.secretPath")
    return [item.to_wire() for item in items]


def privilege_permission(value: Mapping[str, Any], *, field: str) -> dict[str, Any]:
    """``privilegePermission`` (``ProjectSpecificPrivilegePermissionSchema``): ``actions`` (1+ basic),
    ``subject: "secrets"``, ``conditions`` with ``environment`` and optionally ``secretPath: {$glob}``."""
    _only_keys(value, frozenset({"actions", "subject", "conditions"}), field=field)
    actions = value.get("actions")
    if not isinstance(actions, list) or not actions or any(a not in V1_ACTIONS for a in actions):
        raise _refuse(f"{field}.actions", f"must be a non-empty list of {', '.join(V1_ACTIONS)}")
    if value.get("subject") != "secrets":
        raise _refuse(f"{field}.subject", "must be secrets")
    conditions = value.get("conditions")
    if not isinstance(conditions, Mapping):
        raise _refuse(f"{field}.conditions", "must be an object with environment")
    _only_keys(conditions, _V1_CONDITIONS, field=f"{field}.conditions")
    if not isinstance(conditions.get("environment"), str):
        raise _refuse(f"{field}.conditions.environment", "must be a string")
    if "secretPath" in conditions:
        _glob(conditions["secretPath"], field=f"{field}.conditions.secretPath")
    return dict(value)


def v2_permissions(items: Sequence[models.PermissionSent], *, field: str) -> list[dict[str, Any]]:
    """v2 items (``ProjectPermissionV2Schema``) in wire form: an action or a non-empty list of them;
    ``inverted`` and conditions only where the subject takes them. Action names per subject are left
    to the service (a wrong one is an honest 422)."""
    for index, item in enumerate(items):
        at = f"{field}.{index}"
        allowed = _V2_CONDITIONS.get(_subject(item, field=at))
        if not item.action:
            raise _refuse(f"{at}.action", "must be an action or a non-empty list of actions")
        if item.inverted and allowed is None:
            raise _refuse(f"{at}.inverted", f"is not accepted here (the service would drop it{_ALLOWS})")
        _only_keys(_condition_keys(item), allowed or _NO_CONDITION, field=f"{at}.conditions", why=_WIDENS)
        conditions = item.conditions
        if conditions is None:
            continue
        if isinstance(conditions.secret_path, str) and not conditions.secret_path.startswith("/"):
            raise _refuse(f"{at}.conditions.secretPath", "must start with /")
        tags = conditions.secret_tags
        if tags is not None and (tags.in_ is None or tags.all_ is not None):
            raise _refuse(f"{at}.conditions.secretTags", "takes $in only ($all would be dropped)")
    return [item.to_wire() for item in items]


def _start_time(value: object, *, field: str) -> str:
    if isinstance(value, datetime.datetime):
        return timestamp(value, field=field)
    if isinstance(value, str) and _ZOD_DATETIME.fullmatch(value):
        try:
            datetime.date.fromisoformat(value[:10])  # newer zod also refuses 2030-02-30
        except ValueError:
            pass
        else:
            return value
    raise _refuse(field, "must be an aware datetime or UTC ISO 8601 text ending in Z")


def privilege_type(value: Mapping[str, Any], *, field: str = "type") -> dict[str, Any]:
    """The v2 ``type``: ``{isTemporary: False}`` or a whole temporary window (mode, range, start).

    The real schema is a union discriminated on ``isTemporary`` (a JSON boolean), so ``{}`` is a
    422; keys the chosen member does not name (a range on a permanent privilege) would be dropped.
    A datetime start is formatted like the v1 calls do.
    """
    flag = value.get("isTemporary")
    if not isinstance(flag, bool):
        raise _refuse(f"{field}.isTemporary", "must be true or false")
    if not flag:
        _only_keys(value, frozenset({"isTemporary"}), field=field)
        return {"isTemporary": False}
    window = frozenset({"isTemporary", "temporaryMode", "temporaryRange", "temporaryAccessStartTime"})
    _only_keys(value, window, field=field)
    return {
        "isTemporary": True,
        "temporaryMode": temporary_mode(value.get("temporaryMode", ""), field=f"{field}.temporaryMode"),
        "temporaryRange": temporary_range(value.get("temporaryRange", ""), field=f"{field}.temporaryRange"),
        "temporaryAccessStartTime": _start_time(
            value.get("temporaryAccessStartTime"), field=f"{field}.temporaryAccessStartTime"
        ),
    }

"""Permission rules in privilege bodies, checked against the real server's names and shapes.

Source: Infisical ``backend/src/ee/services/permission/project-permission.ts`` (the
``ProjectPermissionSub`` subjects, one action enum per subject, ``ProjectPermissionV2Schema`` with
its condition schemas) and ``server/routes/sanitizedSchemas.ts`` (``ProjectPermissionSchema`` for
v1 ``permissions`` items, ``ProjectSpecificPrivilegePermissionSchema`` for ``privilegePermission``).

Three body shapes, three readers; each returns the rules as the dev server stores them (one
``{action, subject, conditions, inverted}`` per action) or raises 422 with zod-shaped issues:

- v1 ``permissions`` item: ``action`` ONE of read/create/edit/delete (not a list), ``subject`` any
  subject name, ``conditions`` only ``environment`` (string) and ``secretPath: {$glob}``.
- ``privilegePermission``: ``actions`` (1+), ``subject`` "secrets" only, ``conditions`` required
  with ``environment``.
- v2 item: ``subject`` picks the schema; ``action`` a name or a non-empty list from that subject's
  enum; ``inverted`` and ``conditions`` only where that subject has them.

zod strips keys a schema does not name (``inverted`` of a v1 item, an unknown condition, an unknown
operator), so they are dropped here too rather than kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from secretferry.devserver.errors import ApiError, BadRequest

Path = list[str | int]
Issue = dict[str, Any]

BASIC = ("read", "create", "edit", "delete")  # ProjectPermissionActions
SECRET_ACTIONS = ("read", "describeSecret", "readValue", "create", "edit", "delete")
_EQ_NE_IN = ("$eq", "$ne", "$in")
_WITH_GLOB = ("$eq", "$ne", "$in", "$glob")
_PATH = "path"  # a secret path: strings and operands must start with "/"
_TAGS = "tags"  # {$in: [...]} only
_METADATA = "metadata"  # {$elemMatch: {key: {...}, value: {...}}}

FieldRule = tuple[str, ...] | str  # allowed operators, or one of the special kinds above
_SECRET_V1_CONDITIONS: Mapping[str, FieldRule] = {"environment": _EQ_NE_IN, "secretPath": _PATH}
_SECRET_SYNC_CONDITIONS: Mapping[str, FieldRule] = {"environment": _WITH_GLOB, "secretPath": _PATH}


class _Subject:
    """One member of ``ProjectPermissionV2Schema``: its actions, and its conditions if it has any
    (a subject with conditions also takes ``inverted``)."""

    def __init__(self, actions: tuple[str, ...], conditions: Mapping[str, FieldRule] | None = None):
        self.actions = actions
        self.conditions = conditions


def _named(*names: str) -> Mapping[str, FieldRule]:
    return dict.fromkeys(names, _WITH_GLOB)


# In ProjectPermissionSub order; the keys are also every subject a v1 item may name.
V2_SUBJECTS: Mapping[str, _Subject] = {
    "role": _Subject(BASIC),
    "member": _Subject((*BASIC, "grant-privileges", "assume-privileges")),
    "groups": _Subject((*BASIC, "grant-privileges")),
    "settings": _Subject(BASIC),
    "integrations": _Subject(BASIC),
    "webhooks": _Subject(BASIC),
    "service-tokens": _Subject(BASIC),
    "environments": _Subject(BASIC),
    "tags": _Subject(BASIC),
    "audit-logs": _Subject(("read",)),
    "ip-allowlist": _Subject(BASIC),
    "workspace": _Subject(("edit", "delete")),
    "secrets": _Subject(
        SECRET_ACTIONS,
        {
            "environment": _WITH_GLOB,
            "secretPath": _PATH,
            "secretName": _WITH_GLOB,
            "secretTags": _TAGS,
            "eventType": _EQ_NE_IN,
        },
    ),
    "secret-folders": _Subject(BASIC, _SECRET_V1_CONDITIONS),
    "secret-imports": _Subject(BASIC, _SECRET_SYNC_CONDITIONS),
    "dynamic-secrets": _Subject(
        (
            "read-root-credential",
            "create-root-credential",
            "edit-root-credential",
            "delete-root-credential",
            "lease",
        ),
        {"environment": _WITH_GLOB, "secretPath": _PATH, "metadata": _METADATA},
    ),
    "secret-rollback": _Subject(("read", "create")),
    "secret-approval": _Subject(BASIC),
    "secret-rotation": _Subject(
        ("read", "read-generated-credentials", "create", "edit", "delete", "rotate-secrets"),
        _SECRET_V1_CONDITIONS,
    ),
    "commits": _Subject(("read", "perform-rollback")),
    "identity": _Subject(
        (
            *BASIC,
            "grant-privileges",
            "assume-privileges",
            "revoke-auth",
            "create-token",
            "get-token",
            "delete-token",
        ),
        {"identityId": _EQ_NE_IN},
    ),
    "certificate-authorities": _Subject((*BASIC, "renew", "sign-intermediate"), _named("name")),
    "certificates": _Subject(
        (*BASIC, "read-private-key", "import"),
        _named("commonName", "altNames", "serialNumber", "friendlyName", "status"),
    ),
    "certificate-templates": _Subject(
        (*BASIC, "issue-cert", "list-certs"), {"name": ("$eq", "$ne", "$glob", "$in")}
    ),
    "ssh-certificate-authorities": _Subject(BASIC),
    "ssh-certificates": _Subject(BASIC),
    "ssh-certificate-templates": _Subject(BASIC),
    "ssh-hosts": _Subject((*BASIC, "issue-host-cert"), {"hostname": ("$eq", "$glob", "$in")}),
    "ssh-host-groups": _Subject(BASIC),
    "pki-subscribers": _Subject((*BASIC, "issue-cert", "list-certs"), {"name": ("$eq", "$glob", "$in")}),
    "pki-alerts": _Subject(BASIC),
    "pki-collections": _Subject(BASIC),
    "kms": _Subject(("edit",)),
    "cmek": _Subject((*BASIC, "encrypt", "decrypt", "sign", "verify")),
    "secret-syncs": _Subject(
        (*BASIC, "sync-secrets", "import-secrets", "remove-secrets"), _SECRET_SYNC_CONDITIONS
    ),
    "pki-syncs": _Subject(
        (*BASIC, "sync-certificates", "import-certificates", "remove-certificates"),
        _named("name", "subscriberName"),
    ),
    "kmip": _Subject(
        ("create-clients", "update-clients", "delete-clients", "read-clients", "generate-client-certificates")
    ),
    "secret-scanning-data-sources": _Subject(
        (
            "read-data-sources",
            "create-data-sources",
            "edit-data-sources",
            "delete-data-sources",
            "trigger-data-source-scans",
            "read-data-source-scans",
            "read-data-source-resources",
        )
    ),
    "secret-scanning-findings": _Subject(("read-findings", "update-findings")),
    "secret-scanning-configs": _Subject(("read-configs", "update-configs")),
    "secret-events": _Subject(
        (
            "subscribe-on-created",
            "subscribe-on-updated",
            "subscribe-on-deleted",
            "subscribe-on-import-mutations",
        ),
        _SECRET_SYNC_CONDITIONS,
    ),
    "app-connections": _Subject(
        (
            "read-app-connections",
            "create-app-connections",
            "edit-app-connections",
            "delete-app-connections",
            "connect-app-connections",
        ),
        {"connectionId": _EQ_NE_IN},
    ),
    "pam-folders": _Subject(BASIC),
    "pam-resources": _Subject(BASIC),
    "pam-accounts": _Subject(
        ("access", *BASIC),
        {"resourceName": _WITH_GLOB, "accountName": _WITH_GLOB, "accountPath": _PATH},
    ),
    "pam-sessions": _Subject(("read",)),
    "certificate-profiles": _Subject(
        (*BASIC, "issue-cert", "reveal-acme-eab-secret", "rotate-acme-eab-secret"), _named("slug")
    ),
    "approval-requests": _Subject(("read", "create")),
}
SUBJECTS = tuple(V2_SUBJECTS)
_PATH_MESSAGE = "Invalid Secret Path; it must start with a '/'"


def _quoted(options: tuple[str, ...]) -> str:
    return " | ".join(f"'{option}'" for option in options)


def _kind(value: Any) -> str:
    """zod's name for a received type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "unknown"


class _Reader:
    """Walks one body part, collecting zod-shaped issues."""

    def __init__(self) -> None:
        self.issues: list[Issue] = []

    def issue(self, path: Path, code: str, message: str, **extra: Any) -> None:
        self.issues.append({"code": code, "path": path, "message": message, **extra})

    def object(self, value: Any, path: Path) -> dict[str, Any] | None:
        if isinstance(value, dict):
            return value
        if value is None:
            self.issue(path, "invalid_type", "Required", expected="object", received="undefined")
        else:
            received = _kind(value)
            self.issue(path, "invalid_type", f"Expected object, received {received}", received=received)
        return None

    def enum(self, value: Any, options: tuple[str, ...], path: Path) -> str | None:
        if isinstance(value, str) and value in options:
            return value
        if isinstance(value, str):
            message = f"Invalid enum value. Expected {_quoted(options)}, received '{value}'"
            self.issue(path, "invalid_enum_value", message, options=list(options), received=value)
        elif value is None:
            self.issue(path, "invalid_type", "Required", received="undefined")
        else:
            received = _kind(value)
            message = f"Expected {_quoted(options)}, received {received}"
            self.issue(path, "invalid_type", message, received=received)
        return None

    def string(self, value: Any, path: Path, *, required: bool) -> str | None:
        if isinstance(value, str):
            return value
        if value is None and not required:
            return None
        received = "undefined" if value is None else _kind(value)
        message = "Required" if value is None else f"Expected string, received {received}"
        self.issue(path, "invalid_type", message, expected="string", received=received)
        return None

    def glob_path(self, value: Any, path: Path) -> dict[str, str] | None:
        """``secretPath: {$glob: <non-empty string>}`` of the v1 shapes (other operators stripped)."""
        found = self.object(value, path)
        if found is None:
            return None
        glob = self.string(found.get("$glob"), [*path, "$glob"], required=True)
        if glob is not None and not glob:
            self.issue([*path, "$glob"], "too_small", "String must contain at least 1 character(s)")
        return {"$glob": glob} if glob else None

    def raise_if_any(self) -> None:
        if self.issues:
            raise ApiError(self.issues, name="ValidationFailure", status=422)


def _stored(
    actions: list[str], subject: str, conditions: dict[str, Any], inverted: bool
) -> list[dict[str, Any]]:
    return [
        {"action": action, "subject": subject, "conditions": conditions, "inverted": inverted}
        for action in actions
    ]


def _v1_conditions(reader: _Reader, value: Any, path: Path, *, env_required: bool) -> dict[str, Any]:
    found = reader.object(value, path)
    if found is None:
        return {}
    out: dict[str, Any] = {}
    environment = reader.string(found.get("environment"), [*path, "environment"], required=env_required)
    if environment is not None:
        out["environment"] = environment
    if found.get("secretPath") is not None:
        glob = reader.glob_path(found["secretPath"], [*path, "secretPath"])
        if glob is not None:
            out["secretPath"] = glob
    return out


def v1_permissions(items: list[Any], *, field: str = "permissions") -> list[dict[str, Any]]:
    """The deprecated v1 ``permissions`` array (``ProjectPermissionSchema`` items)."""
    reader = _Reader()
    out: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        path: Path = [field, index]
        found = reader.object(item, path)
        if found is None:
            continue
        action = reader.enum(found.get("action"), BASIC, [*path, "action"])
        subject = reader.enum(found.get("subject"), SUBJECTS, [*path, "subject"])
        conditions = {}
        if found.get("conditions") is not None:
            conditions = _v1_conditions(
                reader, found["conditions"], [*path, "conditions"], env_required=False
            )
        if action is not None and subject is not None:
            out.extend(_stored([action], subject, conditions, False))  # zod strips ``inverted`` here
    reader.raise_if_any()
    return out


def privilege_permission(
    value: dict[str, Any], *, field: str = "privilegePermission"
) -> list[dict[str, Any]]:
    """``privilegePermission``: actions on secrets in one environment (and optionally a path glob)."""
    reader = _Reader()
    raw_actions = value.get("actions")
    actions: list[str] = []
    if raw_actions is None:
        reader.issue([field, "actions"], "invalid_type", "Required", expected="array", received="undefined")
    elif not isinstance(raw_actions, list):
        received = _kind(raw_actions)
        reader.issue([field, "actions"], "invalid_type", f"Expected array, received {received}")
    elif not raw_actions:
        reader.issue([field, "actions"], "too_small", "Array must contain at least 1 element(s)")
    else:
        for index, action in enumerate(raw_actions):
            if reader.enum(action, BASIC, [field, "actions", index]) is not None:
                actions.append(action)
    subject = reader.enum(value.get("subject"), ("secrets",), [field, "subject"])
    conditions = _v1_conditions(reader, value.get("conditions"), [field, "conditions"], env_required=True)
    reader.raise_if_any()
    return _stored(actions, subject or "secrets", conditions, False)


def _operand(reader: _Reader, op: str, operand: Any, path: Path, *, is_path: bool) -> Any:
    """One operator's operand: ``$in`` a list of strings, the others a string."""
    if op == "$in":
        if not isinstance(operand, list) or not all(isinstance(v, str) for v in operand):
            reader.issue(path, "invalid_union", "Invalid input")
            return None
        if is_path and not all(v.startswith("/") for v in operand):
            reader.issue([*path, op], "custom", _PATH_MESSAGE)
        return list(operand)
    if not isinstance(operand, str):
        reader.issue(path, "invalid_union", "Invalid input")
        return None
    if is_path and op != "$glob" and not operand.startswith("/"):
        reader.issue([*path, op], "custom", _PATH_MESSAGE)
    return operand


def _operators(reader: _Reader, value: Any, operators: tuple[str, ...], path: Path, *, is_path: bool) -> Any:
    """An operator object (``.partial()``: absent operators are fine, unknown ones stripped)."""
    found = reader.object(value, path)
    if found is None:
        return None
    return {op: _operand(reader, op, found[op], path, is_path=is_path) for op in operators if op in found}


def _condition(reader: _Reader, rule: FieldRule, value: Any, path: Path) -> Any:
    """One condition field: a plain string (where the schema has one) or an operator object."""
    if rule == _TAGS:
        return _operators(reader, value, ("$in",), path, is_path=False)
    if rule == _METADATA:
        found = reader.object(value, path)
        if found is None or found.get("$elemMatch") is None:
            return {} if found is not None else None
        match = reader.object(found["$elemMatch"], [*path, "$elemMatch"])
        if match is None:
            return None
        inner = {
            part: _operators(reader, match[part], _EQ_NE_IN, [*path, "$elemMatch", part], is_path=False)
            for part in ("key", "value")
            if part in match
        }
        return {"$elemMatch": inner}
    is_path = rule == _PATH
    operators = _WITH_GLOB if is_path else tuple(rule)
    if isinstance(value, str):
        if is_path and not value.startswith("/"):
            reader.issue(path, "custom", _PATH_MESSAGE)
        return value
    if not isinstance(value, dict):  # neither member of z.union([string, object]) fits
        reader.issue(path, "invalid_union", "Invalid input")
        return None
    return _operators(reader, value, operators, path, is_path=is_path)


def _actions(reader: _Reader, value: Any, options: tuple[str, ...], path: Path) -> list[str]:
    """``CASL_ACTION_SCHEMA``: one action name, or a non-empty list of them."""
    if isinstance(value, str) and value in options:
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) and v in options for v in value):
        return list(dict.fromkeys(value))
    if isinstance(value, list) and not value:
        reader.issue(path, "too_small", "Array must contain at least 1 element(s)")
    else:
        reader.issue(path, "invalid_union", "Invalid input")
    return []


def v2_permissions(items: list[Any], *, field: str = "permissions") -> list[dict[str, Any]]:
    """``ProjectPermissionV2Schema`` items, then the real ``checkForInvalidPermissionCombination``."""
    reader = _Reader()
    out: list[dict[str, Any]] = []
    checked: list[tuple[str, list[str]]] = []
    for index, item in enumerate(items):
        path: Path = [field, index]
        found = reader.object(item, path)
        if found is None:
            continue
        name = found.get("subject")
        subject = V2_SUBJECTS.get(name) if isinstance(name, str) else None
        if subject is None:
            message = f"Invalid discriminator value. Expected {_quoted(SUBJECTS)}"
            reader.issue([*path, "subject"], "invalid_union_discriminator", message, options=list(SUBJECTS))
            continue
        actions = _actions(reader, found.get("action"), subject.actions, [*path, "action"])
        inverted = False
        conditions: dict[str, Any] = {}
        if subject.conditions is not None:
            raw_inverted = found.get("inverted")
            if raw_inverted is not None and not isinstance(raw_inverted, bool):
                reader.issue(
                    [*path, "inverted"], "invalid_type", f"Expected boolean, received {_kind(raw_inverted)}"
                )
            inverted = raw_inverted is True
            raw = found.get("conditions")
            given = reader.object(raw, [*path, "conditions"]) if raw is not None else None
            for key, rule in subject.conditions.items():
                if given is not None and key in given:
                    conditions[key] = _condition(reader, rule, given[key], [*path, "conditions", key])
        assert isinstance(name, str)
        out.extend(_stored(actions, name, conditions, inverted))
        checked.append((name, actions))
    reader.raise_if_any()
    for name, actions in checked:
        _check_combination(name, actions)
    return out


def _check_combination(subject: str, actions: list[str]) -> None:
    """A secrets item may not combine the legacy "read" with its replacements (the real refine
    throws a ``BadRequestError`` out of zod: 400, not 422)."""
    chosen = set(actions)
    if subject == "secrets" and "read" in chosen and chosen & {"readValue", "describeSecret"}:
        raise BadRequest(
            "You cannot select Read Value or Describe Secret if you have selected Read. The Read "
            "permission is a legacy action which has been replaced by Describe Secret and Read Value."
        )

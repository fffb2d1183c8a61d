"""Who may do what: project roles plus additional privileges with conditions.

The real service evaluates CASL rules; this is the subset the operator relies on: a role grants
whole subjects, a privilege grants actions on a subject under conditions on ``environment``,
``secretPath`` and ``identityId`` (a string is equality; an object takes ``$glob``, ``$eq``,
``$ne``, ``$in``), inverted rules deny, temporary privileges count only between their start and
end time. A condition this module cannot evaluate (another field, another operator) never widens
access: it keeps an allow rule from granting and lets a deny rule deny.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from secretferry.devserver import globs
from secretferry.devserver.errors import PermissionDenied
from secretferry.devserver.identity_store import IdentityStore
from secretferry.devserver.timeutil import parse_iso

SECRETS = "secrets"
SECRET_FOLDERS = "secret-folders"
SECRET_IMPORTS = "secret-imports"
SECRET_EVENTS = "secret-events"
WEBHOOKS = "webhooks"
DYNAMIC_SECRETS = "dynamic-secrets"
IDENTITY = "identity"
ALL = "*"

# "Identity" actions (real service names): privileges are read with "read"; changing them takes
# "edit" plus the right to grant them.
GRANT_PRIVILEGES = "grant-privileges"

# "Dynamic Secrets" actions (real service names). Reading a definition returns its provider inputs
# (root credentials), so the real service wants both of these for it, not a plain "read".
READ_ROOT_CREDENTIAL = "read-root-credential"
EDIT_ROOT_CREDENTIAL = "edit-root-credential"

# Event kind → the "Secret Events" action that allows subscribing to it (real service names).
EVENT_ACTIONS = {
    "secret:create": "subscribe-on-created",
    "secret:update": "subscribe-on-updated",
    "secret:delete": "subscribe-on-deleted",
    "secret:import-mutation": "subscribe-on-import-mutations",
}
_SUBSCRIBE = frozenset(EVENT_ACTIONS.values())
_WRITE = frozenset({"read", "create", "edit", "delete"})
_DYNAMIC_ALL = frozenset(
    {READ_ROOT_CREDENTIAL, EDIT_ROOT_CREDENTIAL, "create-root-credential", "delete-root-credential", "lease"}
)

# The real default roles: members and viewers may read identities (and so their privileges), only
# admins may grant privileges.
ROLE_GRANTS: dict[str, dict[str, frozenset[str]]] = {
    "admin": {ALL: frozenset({ALL})},
    "member": {
        SECRETS: _WRITE,
        SECRET_FOLDERS: _WRITE,
        SECRET_IMPORTS: _WRITE,
        SECRET_EVENTS: _SUBSCRIBE,
        DYNAMIC_SECRETS: _DYNAMIC_ALL,
        IDENTITY: _WRITE,
    },
    "viewer": {
        SECRETS: frozenset({"read"}),
        SECRET_FOLDERS: frozenset({"read"}),
        SECRET_IMPORTS: frozenset({"read"}),
        SECRET_EVENTS: _SUBSCRIBE,
        DYNAMIC_SECRETS: frozenset({READ_ROOT_CREDENTIAL}),
        IDENTITY: frozenset({"read"}),
    },
    "no-access": {},
}
_PATH_FIELDS = frozenset({"secretPath"})


def _role_allows(role: str, action: str, subject: str) -> bool:
    grants = ROLE_GRANTS.get(role, {})
    for granted_subject in (subject, ALL):
        actions = grants.get(granted_subject, frozenset())
        if action in actions or ALL in actions:
            return True
    return False


def _cond_matches(cond: Any, value: str | None, *, path: bool) -> bool | None:
    """Whether ``value`` meets one condition; None when it cannot be evaluated here.

    A field the checked object lacks (``value`` None) meets no condition, as in CASL.
    """
    norm = globs.normalize_path if path else (lambda v: v)
    if value is None:
        return False
    if isinstance(cond, str):
        return norm(cond) == value
    if not isinstance(cond, dict) or not cond or set(cond) - {"$glob", "$eq", "$ne", "$in"}:
        return None
    if "$glob" in cond and not globs.glob_match(str(cond["$glob"]), value):
        return False
    if "$eq" in cond and norm(str(cond["$eq"])) != value:
        return False
    if "$ne" in cond and norm(str(cond["$ne"])) == value:
        return False
    return not ("$in" in cond and value not in [norm(str(v)) for v in cond["$in"]])


def rule_matches(
    rule: dict[str, Any],
    *,
    action: str,
    subject: str,
    environment: str | None = None,
    secret_path: str | None = None,
    identity_id: str | None = None,
) -> bool | None:
    """Whether one privilege permission covers (action, subject) for the given fields; None when
    one of its conditions cannot be evaluated here."""
    actions = rule.get("action", [])
    actions = [actions] if isinstance(actions, str) else list(actions)
    if rule.get("subject") not in (subject, "all", ALL):
        return False
    if not ({action, "manage", ALL} & set(actions)):
        return False
    fields = {"environment": environment, "secretPath": secret_path, "identityId": identity_id}
    result: bool | None = True
    for key, cond in (rule.get("conditions") or {}).items():
        met = _cond_matches(cond, fields.get(key), path=key in _PATH_FIELDS) if key in fields else None
        if met is False:
            return False
        if met is None:
            result = None
    return result


def privilege_active(doc: dict[str, Any], now: float) -> bool:
    if not doc.get("isTemporary"):
        return True
    start, end = doc.get("temporaryAccessStartTime"), doc.get("temporaryAccessEndTime")
    if not start or not end:
        return False
    return parse_iso(start) <= now < parse_iso(end)


def evaluate(
    role: str | None,
    privileges: Iterable[dict[str, Any]],
    now: float,
    *,
    action: str,
    subject: str,
    environment: str | None = None,
    secret_path: str | None = None,
    identity_id: str | None = None,
) -> bool:
    """Role grant or a matching active privilege, unless an inverted privilege denies it."""
    allowed = role is not None and _role_allows(role, action, subject)
    for doc in privileges:
        if not privilege_active(doc, now):
            continue
        for rule in doc.get("permissions", []):
            met = rule_matches(
                rule,
                action=action,
                subject=subject,
                environment=environment,
                secret_path=secret_path,
                identity_id=identity_id,
            )
            if rule.get("inverted") and met is not False:
                return False
            if met is True and not rule.get("inverted"):
                allowed = True
    return allowed


class Permissions:
    """Permission checks for one identity in one project, backed by the identity store."""

    def __init__(self, identities: IdentityStore) -> None:
        self.identities = identities

    def role(self, identity_id: str, project_id: str) -> str | None:
        membership = self.identities.membership(project_id, identity_id)
        return membership.role if membership else None

    def allowed(
        self,
        identity_id: str,
        project_id: str,
        now: float,
        *,
        action: str,
        subject: str,
        environment: str | None = None,
        secret_path: str | None = None,
        target_identity_id: str | None = None,
    ) -> bool:
        """``target_identity_id``: the identity acted on, for ``identity`` rules' ``identityId``."""
        membership = self.identities.membership(project_id, identity_id)
        if membership is None:
            return False
        return evaluate(
            membership.role,
            self.identities.privileges(membership.id),
            now,
            action=action,
            subject=subject,
            environment=environment,
            secret_path=secret_path,
            identity_id=target_identity_id,
        )

    def check(
        self,
        identity_id: str,
        project_id: str,
        now: float,
        *,
        action: str,
        subject: str,
        environment: str | None = None,
        secret_path: str | None = None,
        target_identity_id: str | None = None,
    ) -> None:
        """Raise 403 ``PermissionDenied`` with ``details`` naming what was missing."""
        if not self.allowed(
            identity_id,
            project_id,
            now,
            action=action,
            subject=subject,
            environment=environment,
            secret_path=secret_path,
            target_identity_id=target_identity_id,
        ):
            fields = {"environment": environment, "secretPath": secret_path, "identityId": target_identity_id}
            raise PermissionDenied(
                f"You are not allowed to {action} on {subject}",
                details=[
                    {
                        "action": action,
                        "subject": subject,
                        "conditions": {k: v for k, v in fields.items() if v is not None},
                    }
                ],
            )

    def require_member(self, identity_id: str, project_id: str) -> None:
        """403 for an identity that is not a member: the real service refuses it before it looks at
        folders or rules, so a non-member learns nothing about what the project holds."""
        if self.role(identity_id, project_id) is None:
            raise PermissionDenied(
                "You are not a member of this project",
                details=[{"action": "read", "subject": "project", "conditions": {}}],
            )

    def require_org_admin(self, identity_id: str, org_id: str) -> None:
        identity = self.identities.identity(identity_id)
        if identity is None or identity.org_id != org_id or identity.org_role != "admin":
            raise PermissionDenied(
                "You are not allowed to manage this organization",
                details=[{"action": "edit", "subject": "organization", "conditions": {}}],
            )

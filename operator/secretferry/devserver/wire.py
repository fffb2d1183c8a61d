"""Wire (JSON) forms of stored objects, shared by the list, write and batch endpoints."""

from __future__ import annotations

from typing import Any

from secretferry.devserver.store import Import, Secret, Store
from secretferry.devserver.timeutil import iso

# What the real service puts in secretValue when values are hidden (viewSecretValue=false).
HIDDEN_VALUE = "<hidden-by-infisical>"


def secret(
    s: Secret,
    *,
    project_id: str,
    env_slug: str,
    value: str | None = None,
    hidden: bool = False,
    tags: dict[str, dict[str, str]] | None = None,
    with_path: bool = True,
    with_times: bool = True,
) -> dict[str, Any]:
    """A Secret; ``with_path`` adds secretPath/tags/secretMetadata (list form), ``with_times`` the dates."""
    body: dict[str, Any] = {
        "id": s.id,
        "_id": s.id,
        "workspace": project_id,
        "environment": env_slug,
        "version": s.version,
        "type": s.type,
        "secretKey": s.key,
        "secretValue": HIDDEN_VALUE if hidden else (s.value if value is None else value),
        "secretComment": s.comment,
        "secretValueHidden": hidden,
        "secretReminderNote": s.reminder_note,
        "secretReminderRepeatDays": s.reminder_days,
        "skipMultilineEncoding": s.skip_multiline,
        "actor": None,
        "isRotatedSecret": False,
        "rotationId": None,
    }
    if with_times:
        body["createdAt"] = iso(s.created_at)
        body["updatedAt"] = iso(s.updated_at)
    if with_path:
        known = tags or {}
        body["secretPath"] = s.path
        body["secretMetadata"] = s.metadata
        body["tags"] = [known[t] for t in s.tag_ids if t in known]
    return body


def secret_import(imp: Import, store: Store) -> dict[str, Any]:
    env = store.environment_by_id(imp.import_env_id)
    folder = store.folder(imp.env_id, imp.path)
    return {
        "id": imp.id,
        "importPath": imp.import_path,
        "position": imp.position,
        "createdAt": iso(imp.created_at),
        "updatedAt": iso(imp.updated_at),
        "folderId": folder["id"] if folder else None,
        "importEnv": {"name": env.name, "slug": env.slug, "id": env.id} if env else None,
        "version": imp.version,
        "isReplication": imp.is_replication,
        "isReplicationSuccess": None,
        "replicationStatus": None,
        "lastReplicated": None,
        "isReserved": False,
    }


def folder(row: Any) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "createdAt": iso(row["created_at"]),
        "updatedAt": iso(row["updated_at"]),
        "envId": row["env_id"],
        "path": row["path"],
        "version": row["version"],
        "parentId": row["parent_id"],
        "isReserved": False,
        "description": row["description"],
        "lastSecretModified": None,
    }

"""Data access for projects, environments, folders, tags, secrets and imports.

Only storage lives here: no permission checks, no events, no HTTP. Callers pass normalized paths.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from secretferry.devserver import db as dbm
from secretferry.devserver import globs
from secretferry.devserver.errors import BadRequest, NotFound


@dataclass(frozen=True)
class Project:
    id: str
    slug: str
    name: str
    org_id: str


@dataclass(frozen=True)
class Environment:
    id: str
    project_id: str
    slug: str
    name: str


@dataclass(slots=True)  # not frozen: built 1,000s of times per list, frozen init is slower
class Secret:
    id: str
    env_id: str
    path: str
    key: str
    type: str
    owner_id: str
    value: str
    comment: str
    tag_ids: list[str]
    metadata: list[dict[str, Any]]
    version: int
    skip_multiline: bool
    reminder_note: str | None
    reminder_days: int | None
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class Import:
    id: str
    env_id: str
    path: str
    import_env_id: str
    import_path: str
    position: int
    version: int
    is_replication: bool
    created_at: float
    updated_at: float


def new_id() -> str:
    return str(uuid.uuid4())


def _secret(row: dbm.Row) -> Secret:
    return Secret(
        id=row["id"],
        env_id=row["env_id"],
        path=row["path"],
        key=row["key"],
        type=row["type"],
        owner_id=row["owner_id"],
        value=row["value"],
        comment=row["comment"],
        tag_ids=dbm.load(row["tag_ids"]),
        metadata=dbm.load(row["metadata"]),
        version=row["version"],
        skip_multiline=bool(row["skip_multiline"]),
        reminder_note=row["reminder_note"],
        reminder_days=row["reminder_days"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _import(row: dbm.Row) -> Import:
    return Import(
        id=row["id"],
        env_id=row["env_id"],
        path=row["path"],
        import_env_id=row["import_env_id"],
        import_path=row["import_path"],
        position=row["position"],
        version=row["version"],
        is_replication=bool(row["is_replication"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class Store:
    """Typed queries over the secrets side of the schema."""

    def __init__(self, database: dbm.Database) -> None:
        self.db = database

    # -- projects and environments -------------------------------------------------------------
    def upsert_org(self, org_id: str, name: str, slug: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO orgs (id, name, slug) VALUES (?, ?, ?)", (org_id, name, slug))

    def upsert_project(self, project: Project, now: float) -> None:
        self.db.execute(
            "INSERT INTO projects (id, slug, name, org_id, created_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET slug = excluded.slug, name = excluded.name, "
            "org_id = excluded.org_id",
            (project.id, project.slug, project.name, project.org_id, now),
        )

    def project(self, project_id: str) -> Project | None:
        row = self.db.one("SELECT id, slug, name, org_id FROM projects WHERE id = ?", (project_id,))
        return Project(row["id"], row["slug"], row["name"], row["org_id"]) if row else None

    def project_by_slug(self, slug: str) -> Project | None:
        row = self.db.one("SELECT id, slug, name, org_id FROM projects WHERE slug = ?", (slug,))
        return Project(row["id"], row["slug"], row["name"], row["org_id"]) if row else None

    def project_by_ref(self, ref: str) -> Project | None:
        """A project by id or, failing that, by slug (seed documents may use either)."""
        return self.project(ref) or self.project_by_slug(ref)

    def require_project(self, project_id: str) -> Project:
        project = self.project(project_id)
        if project is None:
            raise NotFound(f"Project with ID '{project_id}' not found")
        return project

    def upsert_environment(self, project_id: str, slug: str, name: str) -> Environment:
        existing = self.environment(project_id, slug)
        if existing is not None:
            self.db.execute("UPDATE environments SET name = ? WHERE id = ?", (name, existing.id))
            return Environment(existing.id, project_id, slug, name)
        env = Environment(new_id(), project_id, slug, name)
        self.db.execute(
            "INSERT INTO environments (id, project_id, slug, name) VALUES (?, ?, ?, ?)",
            (env.id, project_id, slug, name),
        )
        return env

    def environment(self, project_id: str, slug: str) -> Environment | None:
        row = self.db.one(
            "SELECT id, project_id, slug, name FROM environments WHERE project_id = ? AND slug = ?",
            (project_id, slug),
        )
        return Environment(row["id"], row["project_id"], row["slug"], row["name"]) if row else None

    def environment_by_id(self, env_id: str) -> Environment | None:
        row = self.db.one("SELECT id, project_id, slug, name FROM environments WHERE id = ?", (env_id,))
        return Environment(row["id"], row["project_id"], row["slug"], row["name"]) if row else None

    def environments(self, project_id: str) -> list[Environment]:
        rows = self.db.all(
            "SELECT id, project_id, slug, name FROM environments WHERE project_id = ? ORDER BY rowid",
            (project_id,),
        )
        return [Environment(r["id"], r["project_id"], r["slug"], r["name"]) for r in rows]

    def require_environment(self, project_id: str, slug: str) -> Environment:
        env = self.environment(project_id, slug)
        if env is None:
            raise NotFound(f"Environment with slug '{slug}' in project with ID {project_id} not found")
        return env

    # -- folders --------------------------------------------------------------------------------
    def folder(self, env_id: str, path: str) -> dbm.Row | None:
        return self.db.one("SELECT * FROM folders WHERE env_id = ? AND path = ?", (env_id, path))

    def folder_paths(self, env_id: str) -> set[str]:
        return {row["path"] for row in self.db.all("SELECT path FROM folders WHERE env_id = ?", (env_id,))}

    def ensure_folder(self, env_id: str, path: str, now: float, *, description: str | None = None) -> dbm.Row:
        """Create ``path`` and any missing parents; the root folder always exists implicitly."""
        path = globs.normalize_path(path)
        parent_id: str | None = None
        current = ""
        row: dbm.Row | None = self._root(env_id, now)
        parent_id = row["id"] if row else None
        for part in [p for p in path.split("/") if p]:
            current += "/" + part
            row = self.folder(env_id, current)
            if row is None:
                self.db.execute(
                    "INSERT INTO folders (id, env_id, path, name, parent_id, description, created_at, "
                    "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        new_id(),
                        env_id,
                        current,
                        part,
                        parent_id,
                        description if current == path else None,
                        now,
                        now,
                    ),
                )
                row = self.folder(env_id, current)
            assert row is not None
            parent_id = row["id"]
        assert row is not None
        return row

    def _root(self, env_id: str, now: float) -> dbm.Row | None:
        row = self.folder(env_id, "/")
        if row is None:
            self.db.execute(
                "INSERT INTO folders (id, env_id, path, name, parent_id, created_at, updated_at) "
                "VALUES (?, ?, '/', 'root', NULL, ?, ?)",
                (new_id(), env_id, now, now),
            )
            row = self.folder(env_id, "/")
        return row

    # -- tags -------------------------------------------------------------------------------------
    def upsert_tag(self, project_id: str, slug: str, name: str, color: str, tag_id: str | None = None) -> str:
        row = self.db.one("SELECT id FROM tags WHERE project_id = ? AND slug = ?", (project_id, slug))
        if row is not None:
            self.db.execute("UPDATE tags SET name = ?, color = ? WHERE id = ?", (name, color, row["id"]))
            return str(row["id"])
        new = tag_id or new_id()
        self.db.execute(
            "INSERT INTO tags (id, project_id, slug, name, color) VALUES (?, ?, ?, ?, ?)",
            (new, project_id, slug, name, color),
        )
        return new

    def tags(self, project_id: str) -> dict[str, dict[str, str]]:
        """Tag id → wire object ``{id, slug, name, color}``."""
        rows = self.db.all("SELECT id, slug, name, color FROM tags WHERE project_id = ?", (project_id,))
        return {
            r["id"]: {"id": r["id"], "slug": r["slug"], "name": r["name"], "color": r["color"]} for r in rows
        }

    def tag_ids_for(self, project_id: str, refs: list[str]) -> list[str]:
        """Tag ids for ids or slugs; unknown slugs are created so seeds stay short."""
        known = self.tags(project_id)
        by_slug = {tag["slug"]: tag_id for tag_id, tag in known.items()}
        out = []
        for ref in refs:
            if ref in known:
                out.append(ref)
            elif ref in by_slug:
                out.append(by_slug[ref])
            else:
                out.append(self.upsert_tag(project_id, ref, ref, ""))
        return out

    # -- secrets ----------------------------------------------------------------------------------
    def secrets_in(self, env_id: str, path: str) -> list[Secret]:
        rows = self.db.all("SELECT * FROM secrets WHERE env_id = ? AND path = ? ORDER BY key", (env_id, path))
        return [_secret(r) for r in rows]

    def secrets_under(self, env_id: str, root: str) -> list[Secret]:
        """Secrets at ``root`` and below, ordered by path then key."""
        if root == "/":
            rows = self.db.all("SELECT * FROM secrets WHERE env_id = ? ORDER BY path, key", (env_id,))
        else:
            rows = self.db.all(
                "SELECT * FROM secrets WHERE env_id = ? AND (path = ? OR path LIKE ? ESCAPE '\\') "
                "ORDER BY path, key",
                (env_id, root, _like_prefix(root) + "/%"),
            )
        return [_secret(r) for r in rows]

    def secret(
        self, env_id: str, path: str, key: str, *, type_: str = "shared", owner_id: str = ""
    ) -> Secret | None:
        row = self.db.one(
            "SELECT * FROM secrets WHERE env_id = ? AND path = ? AND key = ? AND type = ? AND owner_id = ?",
            (env_id, path, key, type_, owner_id),
        )
        return _secret(row) if row else None

    def put_secret(
        self,
        env_id: str,
        path: str,
        key: str,
        now: float,
        *,
        value: str | None = None,
        comment: str | None = None,
        tag_ids: list[str] | None = None,
        metadata: list[dict[str, Any]] | None = None,
        type_: str = "shared",
        owner_id: str = "",
        skip_multiline: bool | None = None,
        reminder_note: str | None = None,
        reminder_days: int | None = None,
        new_key: str | None = None,
    ) -> tuple[Secret, bool]:
        """Create or update one secret; returns it and whether it was created."""
        self.ensure_folder(env_id, path, now)
        existing = self.secret(env_id, path, key, type_=type_, owner_id=owner_id)
        if existing is None:
            self.db.execute(
                "INSERT INTO secrets (id, env_id, path, key, type, owner_id, value, comment, tag_ids, "
                "metadata, "
                "skip_multiline, reminder_note, reminder_days, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    new_id(),
                    env_id,
                    path,
                    new_key or key,
                    type_,
                    owner_id,
                    value or "",
                    comment or "",
                    dbm.dump(tag_ids or []),
                    dbm.dump(_metadata(metadata or [])),
                    int(bool(skip_multiline)),
                    reminder_note,
                    reminder_days,
                    now,
                    now,
                ),
            )
            created = self.secret(env_id, path, new_key or key, type_=type_, owner_id=owner_id)
            assert created is not None
            return created, True
        if new_key and new_key != key and self.secret(env_id, path, new_key, type_=type_, owner_id=owner_id):
            raise BadRequest(f"Secret with name '{new_key}' already exists")
        self.db.execute(
            "UPDATE secrets SET key = ?, value = ?, comment = ?, tag_ids = ?, metadata = ?, "
            "skip_multiline = ?, "
            "reminder_note = ?, reminder_days = ?, version = version + 1, updated_at = ? WHERE id = ?",
            (
                new_key or key,
                existing.value if value is None else value,
                existing.comment if comment is None else comment,
                dbm.dump(existing.tag_ids if tag_ids is None else tag_ids),
                dbm.dump(existing.metadata if metadata is None else _metadata(metadata)),
                int(existing.skip_multiline if skip_multiline is None else skip_multiline),
                existing.reminder_note if reminder_note is None else reminder_note,
                existing.reminder_days if reminder_days is None else reminder_days,
                now,
                existing.id,
            ),
        )
        updated = self.secret(env_id, path, new_key or key, type_=type_, owner_id=owner_id)
        assert updated is not None
        return updated, False

    def delete_secret(self, secret: Secret) -> None:
        self.db.execute("DELETE FROM secrets WHERE id = ?", (secret.id,))

    # -- imports ----------------------------------------------------------------------------------
    def imports_in(self, env_id: str, path: str) -> list[Import]:
        rows = self.db.all(
            "SELECT * FROM imports WHERE env_id = ? AND path = ? ORDER BY position, created_at",
            (env_id, path),
        )
        return [_import(r) for r in rows]

    def importers_of(self, env_id: str, path: str) -> list[Import]:
        rows = self.db.all(
            "SELECT * FROM imports WHERE import_env_id = ? AND import_path = ?", (env_id, path)
        )
        return [_import(r) for r in rows]

    def import_by_id(self, import_id: str) -> Import | None:
        row = self.db.one("SELECT * FROM imports WHERE id = ?", (import_id,))
        return _import(row) if row else None

    def add_import(
        self,
        env_id: str,
        path: str,
        import_env_id: str,
        import_path: str,
        now: float,
        *,
        position: int | None = None,
        import_id: str | None = None,
        is_replication: bool = False,
    ) -> Import:
        self.ensure_folder(env_id, path, now)
        if position is None:
            row = self.db.one(
                "SELECT COALESCE(MAX(position), 0) AS p FROM imports WHERE env_id = ? AND path = ?",
                (env_id, path),
            )
            position = int(row["p"]) + 1 if row else 1
        new = import_id or new_id()
        self.db.execute(
            "INSERT OR REPLACE INTO imports (id, env_id, path, import_env_id, import_path, position, "
            "is_replication, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (new, env_id, path, import_env_id, import_path, position, int(is_replication), now, now),
        )
        found = self.import_by_id(new)
        assert found is not None
        return found

    def update_import(
        self, imp: Import, now: float, *, import_env_id: str, import_path: str, position: int | None
    ) -> Import:
        """Move an import to ``position`` exactly as the real service does, without clamping.

        Real ``secret-import-service.ts`` ``updateImport`` + ``updateAllPosition``: for a non-zero
        position, the siblings between the old and the new position shift by one towards the old
        one; then the import takes the position as given (beyond the last one, 0 or negative alike).
        """
        if position:
            low, high, step = (
                (imp.position, position, -1) if position > imp.position else (position, imp.position, 1)
            )
            self.db.execute(
                "UPDATE imports SET position = position + ? WHERE env_id = ? AND path = ? AND id != ? "
                "AND position BETWEEN ? AND ? AND position != ?",
                (step, imp.env_id, imp.path, imp.id, low, high, imp.position),
            )
        self.db.execute(
            "UPDATE imports SET import_env_id = ?, import_path = ?, position = ?, version = version + 1, "
            "updated_at = ? WHERE id = ?",
            (import_env_id, import_path, imp.position if position is None else position, now, imp.id),
        )
        found = self.import_by_id(imp.id)
        assert found is not None
        return found


def _like_prefix(path: str) -> str:
    return path.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _metadata(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "key": str(i["key"]),
            "value": str(i.get("value", "")),
            "isEncrypted": bool(i.get("isEncrypted", False)),
        }
        for i in items
    ]

"""The SQLite schema and connection.

All access happens on the event loop thread with one connection: every query is local and short,
so a thread pool would only add hand-offs. Documents whose fields are only ever read back as a whole
(auth configs, privileges, memberships, dynamic secrets) are stored as JSON to keep the schema small.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS orgs (id TEXT PRIMARY KEY, name TEXT NOT NULL, slug TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS projects (
  id TEXT PRIMARY KEY, slug TEXT NOT NULL UNIQUE, name TEXT NOT NULL, org_id TEXT NOT NULL,
  created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS environments (
  id TEXT PRIMARY KEY, project_id TEXT NOT NULL, slug TEXT NOT NULL, name TEXT NOT NULL,
  UNIQUE (project_id, slug));
CREATE TABLE IF NOT EXISTS folders (
  id TEXT PRIMARY KEY, env_id TEXT NOT NULL, path TEXT NOT NULL, name TEXT NOT NULL,
  parent_id TEXT, description TEXT, version INTEGER NOT NULL DEFAULT 1,
  created_at REAL NOT NULL, updated_at REAL NOT NULL, UNIQUE (env_id, path));
CREATE TABLE IF NOT EXISTS tags (
  id TEXT PRIMARY KEY, project_id TEXT NOT NULL, slug TEXT NOT NULL, name TEXT NOT NULL,
  color TEXT NOT NULL DEFAULT '', UNIQUE (project_id, slug));
CREATE TABLE IF NOT EXISTS secrets (
  id TEXT PRIMARY KEY, env_id TEXT NOT NULL, path TEXT NOT NULL, key TEXT NOT NULL,
  type TEXT NOT NULL, owner_id TEXT NOT NULL DEFAULT '', value TEXT NOT NULL,
  comment TEXT NOT NULL DEFAULT '', tag_ids TEXT NOT NULL DEFAULT '[]',
  metadata TEXT NOT NULL DEFAULT '[]', version INTEGER NOT NULL DEFAULT 1,
  skip_multiline INTEGER NOT NULL DEFAULT 0, reminder_note TEXT, reminder_days INTEGER,
  created_at REAL NOT NULL, updated_at REAL NOT NULL, UNIQUE (env_id, path, key, type, owner_id));
CREATE INDEX IF NOT EXISTS secrets_by_path ON secrets (env_id, path);
CREATE TABLE IF NOT EXISTS imports (
  id TEXT PRIMARY KEY, env_id TEXT NOT NULL, path TEXT NOT NULL, import_env_id TEXT NOT NULL,
  import_path TEXT NOT NULL, position INTEGER NOT NULL, version INTEGER NOT NULL DEFAULT 1,
  is_replication INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, updated_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS imports_by_source ON imports (import_env_id, import_path);
CREATE TABLE IF NOT EXISTS identities (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, org_id TEXT NOT NULL, org_role TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS auth_methods (
  identity_id TEXT NOT NULL, method TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (identity_id, method));
CREATE TABLE IF NOT EXISTS project_memberships (
  id TEXT PRIMARY KEY, project_id TEXT NOT NULL, identity_id TEXT NOT NULL, role TEXT NOT NULL,
  created_at REAL NOT NULL, UNIQUE (project_id, identity_id));
CREATE TABLE IF NOT EXISTS privileges (
  id TEXT PRIMARY KEY, membership_id TEXT NOT NULL, slug TEXT NOT NULL, doc TEXT NOT NULL,
  UNIQUE (membership_id, slug));
CREATE TABLE IF NOT EXISTS org_memberships (id TEXT PRIMARY KEY, org_id TEXT NOT NULL, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS dynamic_secrets (
  id TEXT PRIMARY KEY, env_id TEXT NOT NULL, path TEXT NOT NULL, name TEXT NOT NULL, doc TEXT NOT NULL,
  UNIQUE (env_id, path, name));
CREATE TABLE IF NOT EXISTS tokens (
  token TEXT PRIMARY KEY, identity_id TEXT NOT NULL, method TEXT NOT NULL, created_at REAL NOT NULL,
  renewed_at REAL NOT NULL, ttl INTEGER NOT NULL, max_ttl INTEGER NOT NULL,
  uses_limit INTEGER NOT NULL, uses INTEGER NOT NULL DEFAULT 0, revoked INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS tokens_by_identity ON tokens (identity_id);
CREATE TABLE IF NOT EXISTS lockouts (
  client_id TEXT PRIMARY KEY, failures INTEGER NOT NULL, first_failure REAL NOT NULL,
  locked_until REAL NOT NULL);
"""

Row = sqlite3.Row


class Database:
    """One SQLite connection with the schema applied; ``fresh`` tells whether seeding is due."""

    def __init__(self, path: Path | str) -> None:
        if str(path) != ":memory:" and not Path(path).exists():
            # The file holds secret values, tokens and dynamic-secret inputs: the user's alone
            # (created empty with 0600 first, as SQLite would create it with the umask's 0644).
            Path(path).touch(mode=0o600)
        self.conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        # WAL + NORMAL: durable across clean restarts, fast enough for a dev server.
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.executescript(SCHEMA)

    @property
    def fresh(self) -> bool:
        return self.one("SELECT value FROM meta WHERE key = 'seeded'") is None

    def mark_seeded(self) -> None:
        self.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('seeded', '1')")

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        """Run one statement; returns the number of changed rows."""
        return self.conn.execute(sql, params).rowcount

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> Row | None:
        row: Row | None = self.conn.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: tuple[Any, ...] = ()) -> list[Row]:
        return list(self.conn.execute(sql, params).fetchall())

    def close(self) -> None:
        self.conn.close()


def dump(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def load(text: str) -> Any:
    if text == "[]":  # most tag/metadata columns: skip the JSON parser on the hot list path
        return []
    return json.loads(text)

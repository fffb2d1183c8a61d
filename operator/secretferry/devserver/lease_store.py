"""Dynamic secret leases: rows of the real service's ``dynamic_secret_leases`` table, in SQLite.

A lease records which dynamic secret it belongs to (and so its folder, environment and project),
the provider's ``externalEntityId`` (the role name), ``expireAt`` and the lease's ``createdAt``,
from which the real service measures ``maxTTL`` on renewal. Credentials are never stored: the
real service returns them once, in the create response.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from secretferry.devserver import db as dbm
from secretferry.devserver.store import new_id
from secretferry.devserver.timeutil import iso

SCHEMA = """
CREATE TABLE IF NOT EXISTS dynamic_secret_leases (
  id TEXT PRIMARY KEY, dynamic_secret_id TEXT NOT NULL, env_id TEXT NOT NULL, path TEXT NOT NULL,
  external_entity_id TEXT NOT NULL, expire_at REAL NOT NULL, version INTEGER NOT NULL DEFAULT 1,
  status TEXT, status_details TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS leases_by_secret ON dynamic_secret_leases (dynamic_secret_id);
"""


@dataclass(frozen=True)
class Lease:
    id: str
    dynamic_secret_id: str
    env_id: str
    path: str
    external_entity_id: str
    expire_at: float
    version: int
    status: str | None
    status_details: str | None
    created_at: float
    updated_at: float

    def wire(self) -> dict[str, Any]:
        """The lease as the real service answers it (``DynamicSecretLeasesSchema``)."""
        return {
            "id": self.id,
            "version": self.version,
            "externalEntityId": self.external_entity_id,
            "expireAt": iso(self.expire_at),
            "status": self.status,
            "statusDetails": self.status_details,
            "dynamicSecretId": self.dynamic_secret_id,
            "createdAt": iso(self.created_at),
            "updatedAt": iso(self.updated_at),
            "config": None,
        }


def _lease(row: dbm.Row) -> Lease:
    return Lease(
        id=row["id"],
        dynamic_secret_id=row["dynamic_secret_id"],
        env_id=row["env_id"],
        path=row["path"],
        external_entity_id=row["external_entity_id"],
        expire_at=row["expire_at"],
        version=row["version"],
        status=row["status"],
        status_details=row["status_details"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class LeaseStore:
    def __init__(self, database: dbm.Database) -> None:
        self.db = database
        database.conn.executescript(SCHEMA)

    def create(
        self, *, dynamic_secret_id: str, env_id: str, path: str, entity_id: str, expire_at: float, now: float
    ) -> Lease:
        lease_id = new_id()
        self.db.execute(
            "INSERT INTO dynamic_secret_leases (id, dynamic_secret_id, env_id, path, external_entity_id,"
            " expire_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (lease_id, dynamic_secret_id, env_id, path, entity_id, expire_at, now, now),
        )
        lease = self.get(lease_id)
        assert lease is not None
        return lease

    def get(self, lease_id: str) -> Lease | None:
        row = self.db.one("SELECT * FROM dynamic_secret_leases WHERE id = ?", (lease_id,))
        return _lease(row) if row else None

    def count(self, dynamic_secret_id: str) -> int:
        row = self.db.one(
            "SELECT COUNT(*) AS n FROM dynamic_secret_leases WHERE dynamic_secret_id = ?",
            (dynamic_secret_id,),
        )
        return int(row["n"]) if row else 0

    def expired(self, now: float) -> list[Lease]:
        return [
            _lease(r) for r in self.db.all("SELECT * FROM dynamic_secret_leases WHERE expire_at <= ?", (now,))
        ]

    def renewed(self, lease_id: str, expire_at: float, now: float) -> Lease:
        self.db.execute(
            "UPDATE dynamic_secret_leases SET expire_at = ?, version = version + 1, updated_at = ?"
            " WHERE id = ?",
            (expire_at, now, lease_id),
        )
        lease = self.get(lease_id)
        assert lease is not None
        return lease

    def failed(self, lease_id: str, details: str, now: float) -> Lease:
        self.db.execute(
            "UPDATE dynamic_secret_leases SET status = ?, status_details = ?, updated_at = ? WHERE id = ?",
            ("Failed to delete", details[:255], now, lease_id),
        )
        lease = self.get(lease_id)
        assert lease is not None
        return lease

    def delete(self, lease_id: str) -> None:
        self.db.execute("DELETE FROM dynamic_secret_leases WHERE id = ?", (lease_id,))

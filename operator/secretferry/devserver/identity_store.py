"""Data access for machine identities, their auth methods, memberships, privileges and dynamic secrets.

Auth-method configs, privileges, organization memberships and dynamic secrets are kept as the JSON
documents the API returns (plus private fields prefixed ``_``), so reading one back is one query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from secretferry.devserver import db as dbm
from secretferry.devserver.store import new_id

UNIVERSAL = "universal"
KUBERNETES = "kubernetes"
OIDC = "oidc"
JWT = "jwt"
# Defaults when an auth method is attached: 30 days TTL and max TTL, unlimited uses (contract).
DEFAULT_TTL_SECONDS = 2_592_000
DEFAULT_NUM_USES = 0


@dataclass(frozen=True)
class Identity:
    id: str
    name: str
    org_id: str
    org_role: str


@dataclass(frozen=True)
class Membership:
    id: str
    project_id: str
    identity_id: str
    role: str


def public(doc: dict[str, Any]) -> dict[str, Any]:
    """The wire form of a stored document: private ``_`` fields removed."""
    return {k: v for k, v in doc.items() if not k.startswith("_")}


class IdentityStore:
    """Typed queries over the identity side of the schema."""

    def __init__(self, database: dbm.Database) -> None:
        self.db = database

    # -- identities -----------------------------------------------------------------------------
    def upsert_identity(self, identity: Identity) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO identities (id, name, org_id, org_role) VALUES (?, ?, ?, ?)",
            (identity.id, identity.name, identity.org_id, identity.org_role),
        )

    def identity(self, identity_id: str) -> Identity | None:
        row = self.db.one("SELECT * FROM identities WHERE id = ?", (identity_id,))
        return Identity(row["id"], row["name"], row["org_id"], row["org_role"]) if row else None

    # -- auth methods ---------------------------------------------------------------------------
    def put_auth(self, identity_id: str, method: str, doc: dict[str, Any]) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO auth_methods (identity_id, method, doc) VALUES (?, ?, ?)",
            (identity_id, method, dbm.dump(doc)),
        )

    def auth(self, identity_id: str, method: str) -> dict[str, Any] | None:
        row = self.db.one(
            "SELECT doc FROM auth_methods WHERE identity_id = ? AND method = ?", (identity_id, method)
        )
        return dict(dbm.load(row["doc"])) if row else None

    def universal_by_client_id(self, client_id: str) -> dict[str, Any] | None:
        for row in self.db.all("SELECT doc FROM auth_methods WHERE method = ?", (UNIVERSAL,)):
            doc = dict(dbm.load(row["doc"]))
            if doc.get("clientId") == client_id:
                return doc
        return None

    def remove_auth(self, identity_id: str, method: str) -> dict[str, Any] | None:
        doc = self.auth(identity_id, method)
        if doc is not None:
            self.db.execute(
                "DELETE FROM auth_methods WHERE identity_id = ? AND method = ?", (identity_id, method)
            )
            self.db.execute(
                "UPDATE tokens SET revoked = 1 WHERE identity_id = ? AND method = ?", (identity_id, method)
            )
        return doc

    # -- project memberships --------------------------------------------------------------------
    def put_membership(self, project_id: str, identity_id: str, role: str, now: float) -> Membership:
        existing = self.membership(project_id, identity_id)
        if existing is not None:
            self.db.execute("UPDATE project_memberships SET role = ? WHERE id = ?", (role, existing.id))
            return Membership(existing.id, project_id, identity_id, role)
        membership = Membership(new_id(), project_id, identity_id, role)
        self.db.execute(
            "INSERT INTO project_memberships (id, project_id, identity_id, role, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (membership.id, project_id, identity_id, role, now),
        )
        return membership

    def membership(self, project_id: str, identity_id: str) -> Membership | None:
        row = self.db.one(
            "SELECT * FROM project_memberships WHERE project_id = ? AND identity_id = ?",
            (project_id, identity_id),
        )
        return Membership(row["id"], row["project_id"], row["identity_id"], row["role"]) if row else None

    def membership_by_id(self, membership_id: str) -> Membership | None:
        row = self.db.one("SELECT * FROM project_memberships WHERE id = ?", (membership_id,))
        return Membership(row["id"], row["project_id"], row["identity_id"], row["role"]) if row else None

    # -- additional privileges --------------------------------------------------------------------
    def put_privilege(self, membership_id: str, doc: dict[str, Any]) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO privileges (id, membership_id, slug, doc) VALUES (?, ?, ?, ?)",
            (doc["id"], membership_id, doc["slug"], dbm.dump(doc)),
        )

    def privileges(self, membership_id: str) -> list[dict[str, Any]]:
        rows = self.db.all(
            "SELECT doc FROM privileges WHERE membership_id = ? ORDER BY rowid", (membership_id,)
        )
        return [dict(dbm.load(r["doc"])) for r in rows]

    def privilege_by_slug(self, membership_id: str, slug: str) -> dict[str, Any] | None:
        row = self.db.one(
            "SELECT doc FROM privileges WHERE membership_id = ? AND slug = ?", (membership_id, slug)
        )
        return dict(dbm.load(row["doc"])) if row else None

    def privilege_by_id(self, privilege_id: str) -> tuple[str, dict[str, Any]] | None:
        row = self.db.one("SELECT membership_id, doc FROM privileges WHERE id = ?", (privilege_id,))
        return (row["membership_id"], dict(dbm.load(row["doc"]))) if row else None

    def delete_privilege(self, privilege_id: str) -> None:
        self.db.execute("DELETE FROM privileges WHERE id = ?", (privilege_id,))

    # -- organization memberships ---------------------------------------------------------------
    def put_org_membership(self, org_id: str, doc: dict[str, Any]) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO org_memberships (id, org_id, doc) VALUES (?, ?, ?)",
            (doc["id"], org_id, dbm.dump(doc)),
        )

    def pop_org_membership(self, org_id: str, membership_id: str) -> dict[str, Any] | None:
        row = self.db.one(
            "SELECT doc FROM org_memberships WHERE id = ? AND org_id = ?", (membership_id, org_id)
        )
        if row is None:
            return None
        self.db.execute("DELETE FROM org_memberships WHERE id = ?", (membership_id,))
        return dict(dbm.load(row["doc"]))

    # -- dynamic secrets ------------------------------------------------------------------------
    def put_dynamic_secret(self, env_id: str, path: str, doc: dict[str, Any]) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO dynamic_secrets (id, env_id, path, name, doc) VALUES (?, ?, ?, ?, ?)",
            (doc["id"], env_id, path, doc["name"], dbm.dump(doc)),
        )

    def dynamic_secret(self, env_id: str, path: str, name: str) -> dict[str, Any] | None:
        row = self.db.one(
            "SELECT doc FROM dynamic_secrets WHERE env_id = ? AND path = ? AND name = ?", (env_id, path, name)
        )
        return dict(dbm.load(row["doc"])) if row else None

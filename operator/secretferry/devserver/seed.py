"""The seed document: what a fresh dev server contains (format: ``example-seed.yaml``).

Applied once when the database is fresh, and at runtime through ``POST /_admin/seed`` (then every
item is an upsert, and secret writes emit events like any other write). Ids may be given so that
tests and manifests can name them; missing ids are generated. Projects, organizations and
identities may be referenced by id or slug/name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from secretferry.devserver import globs, identity_store, mutations, privileges, routes_oidc_jwt
from secretferry.devserver.errors import BadRequest
from secretferry.devserver.identity_store import Identity
from secretferry.devserver.state import DevState
from secretferry.devserver.store import Project, new_id
from secretferry.devserver.timeutil import iso

DEFAULT_ENVIRONMENTS = [("dev", "Development"), ("staging", "Staging"), ("prod", "Production")]
DEFAULT_ORG = {
    "id": "00000000-0000-4000-8000-000000000001",
    "name": "Default organization",
    "slug": "default",
}


def load(source: dict[str, Any] | Path | str) -> dict[str, Any]:
    """A seed from a dict, a YAML/JSON file path, or YAML text."""
    if isinstance(source, dict):
        return source
    text = Path(source).read_text() if isinstance(source, Path) else source
    doc = yaml.safe_load(text) or {}
    if not isinstance(doc, dict):
        raise BadRequest("A seed document must be a mapping")
    return doc


def apply(state: DevState, doc: dict[str, Any]) -> dict[str, int]:
    """Upsert everything the document declares; returns counts per kind."""
    counts = {"organizations": 0, "projects": 0, "secrets": 0, "identities": 0, "memberships": 0}
    orgs = doc.get("organizations") or []
    if not orgs and state.db.one("SELECT id FROM orgs LIMIT 1") is None:
        orgs = [DEFAULT_ORG]
    for org in orgs:
        state.store.upsert_org(
            str(org.get("id") or new_id()), org.get("name", org.get("slug", "org")), org.get("slug", "org")
        )
        counts["organizations"] += 1
    for project in doc.get("projects") or []:
        counts["secrets"] += _project(state, project)
        counts["projects"] += 1
    for identity in doc.get("identities") or []:
        _identity(state, identity)
        counts["identities"] += 1
    for membership in doc.get("memberships") or []:
        _org_membership(state, membership)
        counts["memberships"] += 1
    return counts


def _org_id(state: DevState, ref: Any) -> str:
    if ref:
        row = state.db.one("SELECT id FROM orgs WHERE id = ? OR slug = ? OR name = ?", (ref, ref, ref))
        if row is None:
            raise BadRequest(f"Seed references unknown organization '{ref}'")
        return str(row["id"])
    row = state.db.one("SELECT id FROM orgs ORDER BY rowid LIMIT 1")
    assert row is not None
    return str(row["id"])


def _project(state: DevState, doc: dict[str, Any]) -> int:
    now = state.now()
    slug = str(doc["slug"])
    existing = state.store.project_by_ref(str(doc.get("id") or slug))
    project = Project(
        id=str(doc.get("id") or (existing.id if existing else new_id())),
        slug=slug,
        name=str(doc.get("name", slug)),
        org_id=_org_id(state, doc.get("organization")),
    )
    state.store.upsert_project(project, now)
    envs = doc.get("environments")
    if envs is None and not state.store.environments(project.id):
        envs = [{"slug": s, "name": n} for s, n in DEFAULT_ENVIRONMENTS]
    for env in envs or []:
        created = state.store.upsert_environment(
            project.id, str(env["slug"]), str(env.get("name", env["slug"]))
        )
        state.store.ensure_folder(created.id, "/", now)
    for tag in doc.get("tags") or []:
        state.store.upsert_tag(
            project.id, tag["slug"], tag.get("name", tag["slug"]), tag.get("color", ""), tag.get("id")
        )
    for folder in doc.get("folders") or []:
        env = state.store.require_environment(project.id, folder["environment"])
        state.store.ensure_folder(env.id, folder["path"], now, description=folder.get("description"))
    written = 0
    for secret in doc.get("secrets") or []:
        written += _secret(state, project, secret)
    for imp in doc.get("imports") or []:
        env = state.store.require_environment(project.id, imp["environment"])
        source = imp.get("from") or {}
        source_env = state.store.require_environment(
            project.id, source.get("environment", imp["environment"])
        )
        state.store.add_import(
            env.id,
            globs.normalize_path(imp.get("path")),
            source_env.id,
            globs.normalize_path(source.get("path")),
            now,
            position=imp.get("position"),
            import_id=imp.get("id"),
            is_replication=bool(imp.get("isReplication")),
        )
    for dynamic in doc.get("dynamicSecrets") or []:
        env = state.store.require_environment(project.id, dynamic["environment"])
        path = globs.normalize_path(dynamic.get("path"))
        folder = state.store.ensure_folder(env.id, path, now)
        state.identities.put_dynamic_secret(env.id, path, _dynamic(dynamic, folder["id"], now))
    return written


def _secret(state: DevState, project: Project, doc: dict[str, Any]) -> int:
    env = state.store.require_environment(project.id, doc["environment"])
    path = globs.normalize_path(doc.get("path"))
    mutations.write_secret(
        state,
        env,
        path,
        str(doc["key"]),
        mode="upsert",
        value=str(doc.get("value", "")),
        comment=str(doc.get("comment", "")),
        skip_multiline=doc.get("skipMultilineEncoding"),
        tag_refs=list(doc.get("tags") or []),
        metadata=list(doc.get("metadata") or []),
    )
    for override in doc.get("personalOverrides") or []:
        mutations.write_secret(
            state,
            env,
            path,
            str(doc["key"]),
            mode="upsert",
            type_="personal",
            owner_id=str(override["identity"]),
            value=str(override.get("value", "")),
            comment=str(override.get("comment", "")),
        )
    return 1


def _dynamic(doc: dict[str, Any], folder_id: str, now: float) -> dict[str, Any]:
    return {
        "id": str(doc.get("id") or new_id()),
        "name": str(doc["name"]),
        "version": 1,
        "type": str(doc.get("type", "sql-database")),
        "defaultTTL": str(doc.get("defaultTTL", "1h")),
        "maxTTL": doc.get("maxTTL"),
        "folderId": folder_id,
        "createdAt": iso(now),
        "updatedAt": iso(now),
        "status": doc.get("status"),
        "statusDetails": doc.get("statusDetails"),
        "projectGatewayId": None,
        "gatewayId": None,
        "usernameTemplate": doc.get("usernameTemplate"),
        "gatewayV2Id": None,
        "metadata": [{"key": m["key"], "value": m.get("value", "")} for m in doc.get("metadata") or []],
        "inputs": doc.get("inputs") or {},
    }


_UA_FIELDS = {
    "accessTokenTTL": identity_store.DEFAULT_TTL_SECONDS,
    "accessTokenMaxTTL": identity_store.DEFAULT_TTL_SECONDS,
    "accessTokenNumUsesLimit": identity_store.DEFAULT_NUM_USES,
    "accessTokenPeriod": 0,
    "lockoutEnabled": True,
    "lockoutThreshold": 3,
    "lockoutDurationSeconds": 300,
    "lockoutCounterResetSeconds": 30,
}
_K8S_FIELDS = {
    "allowedNamespaces": "",
    "allowedNames": "",
    "allowedAudience": "",
    "accessTokenTTL": identity_store.DEFAULT_TTL_SECONDS,
    "accessTokenMaxTTL": identity_store.DEFAULT_TTL_SECONDS,
    "accessTokenNumUsesLimit": identity_store.DEFAULT_NUM_USES,
    "tokenReviewMode": "api",
    "kubernetesHost": "",
}


def _identity(state: DevState, doc: dict[str, Any]) -> None:
    now = state.now()
    identity = Identity(
        id=str(doc.get("id") or new_id()),
        name=str(doc.get("name", "identity")),
        org_id=_org_id(state, doc.get("organization")),
        org_role=str(doc.get("orgRole", "member")),
    )
    state.identities.upsert_identity(identity)
    base = {"identityId": identity.id, "createdAt": iso(now), "updatedAt": iso(now)}
    if ua := doc.get("universalAuth"):
        fields = {k: ua.get(k, default) for k, default in _UA_FIELDS.items()}
        state.identities.put_auth(
            identity.id,
            identity_store.UNIVERSAL,
            {
                "id": str(ua.get("id") or new_id()),
                **base,
                "clientId": str(ua["clientId"]),
                **fields,
                "clientSecretTrustedIps": [{"ipAddress": "0.0.0.0/0"}],
                "accessTokenTrustedIps": [{"ipAddress": "0.0.0.0/0"}],
                "_clientSecret": str(ua["clientSecret"]),
            },
        )
    if k8s := doc.get("kubernetesAuth"):
        if state.config.require_token_reviewer_jwt and not k8s.get("tokenReviewerJwt"):
            # The 2024-10 release's attach schema requires it (later ones fall back to the client's jwt).
            raise BadRequest(
                f"Identity '{identity.name}': kubernetesAuth needs tokenReviewerJwt on this server"
            )
        fields = {k: k8s.get(k, default) for k, default in _K8S_FIELDS.items()}
        state.identities.put_auth(
            identity.id,
            identity_store.KUBERNETES,
            {
                "id": str(k8s.get("id") or new_id()),
                **base,
                **fields,
                "gatewayId": None,
                "accessTokenTrustedIps": [{"ipAddress": "0.0.0.0/0"}],
                "_caCert": k8s.get("caCert", ""),
                "_tokenReviewerJwt": k8s.get("tokenReviewerJwt", ""),
            },
        )
    for key, method, schema in (
        ("oidcAuth", identity_store.OIDC, routes_oidc_jwt.OidcAttach),
        ("jwtAuth", identity_store.JWT, routes_oidc_jwt.JwtAttach),
    ):
        if block := doc.get(key):
            try:
                body = schema.model_validate(block)
            except ValueError as exc:
                raise BadRequest(f"Identity '{identity.name}': {key}: {exc}") from exc
            state.identities.put_auth(
                identity.id, method, routes_oidc_jwt.stored_doc(identity.id, body, now=now)
            )
    for token in doc.get("accessTokens") or []:
        state.tokens.issue(
            identity.id,
            "token",
            now,
            token=str(token["token"]),
            ttl=int(token.get("accessTokenTTL", identity_store.DEFAULT_TTL_SECONDS)),
            max_ttl=int(token.get("accessTokenMaxTTL", identity_store.DEFAULT_TTL_SECONDS)),
            uses_limit=int(token.get("accessTokenNumUsesLimit", 0)),
        )
    for grant in doc.get("projects") or []:
        project = state.store.project_by_ref(str(grant["project"]))
        if project is None:
            raise BadRequest(f"Seed references unknown project '{grant['project']}'")
        membership = state.identities.put_membership(
            project.id, identity.id, str(grant.get("role", "viewer")), now
        )
        for priv in grant.get("privileges") or []:
            _privilege(state, membership.id, priv, now)


def _privilege(state: DevState, membership_id: str, doc: dict[str, Any], now: float) -> None:
    permissions = []
    for item in doc.get("permissions") or []:
        actions = item.get("action", item.get("actions", []))
        for action in [actions] if isinstance(actions, str) else actions:
            permissions.append(
                {
                    "action": action,
                    "subject": item["subject"],
                    "conditions": item.get("conditions") or {},
                    "inverted": bool(item.get("inverted", False)),
                }
            )
    temporary = doc.get("temporary")
    fields = privileges.temporary_fields(
        bool(temporary),
        "relative",
        (temporary or {}).get("range"),
        (temporary or {}).get("start") or iso(now),
    )
    existing = state.identities.privilege_by_slug(membership_id, str(doc["slug"]))
    state.identities.put_privilege(
        membership_id,
        privileges.new_doc(
            membership_id,
            str(doc["slug"]),
            permissions,
            fields,
            now,
            privilege_id=str(doc.get("id") or (existing["id"] if existing else new_id())),
        ),
    )


def _org_membership(state: DevState, doc: dict[str, Any]) -> None:
    now = iso(state.now())
    org_id = _org_id(state, doc.get("organization"))
    state.identities.put_org_membership(
        org_id,
        {
            "id": str(doc.get("id") or new_id()),
            "role": doc.get("role", "member"),
            "createdAt": now,
            "updatedAt": now,
            "orgId": org_id,
            "status": doc.get("status", "invited"),
            "inviteEmail": doc.get("inviteEmail"),
            "userId": doc.get("userId"),
            "roleId": doc.get("roleId"),
            "projectFavorites": doc.get("projectFavorites", []),
            "isActive": bool(doc.get("isActive", True)),
            "lastInvitedAt": doc.get("lastInvitedAt"),
            "lastLoginAuthMethod": doc.get("lastLoginAuthMethod"),
            "lastLoginTime": doc.get("lastLoginTime"),
        },
    )

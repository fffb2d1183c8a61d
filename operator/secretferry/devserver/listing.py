"""``GET /api/v4/secrets`` semantics, separate from HTTP so they can be table-tested.

Order of work: permission on the requested path → secrets (recursive to depth 20, unreadable
subfolders skipped) → personal overrides → tag and metadata filters → reference expansion → values
hidden or not → imports (position order, nested imports flattened after their importer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from secretferry.devserver import globs, wire, zodrules
from secretferry.devserver.errors import NotFound
from secretferry.devserver.permissions import SECRETS, Permissions
from secretferry.devserver.store import Environment, Import, Secret, Store

MAX_DEPTH = 20  # docs/service-api.md: recursive listing goes at most 20 folders deep
MAX_IMPORT_DEPTH = 5  # nested imports followed this deep (cycles are cut by a visited set)
MAX_EXPANSION_DEPTH = 10  # references inside references expanded this deep
_REFERENCE = re.compile(r"\$\{([^}]+)\}")


@dataclass(frozen=True)
class ListQuery:
    """One list request; the defaults are the real v4 route's (not docs/service-api.md's): references
    and imports are off unless asked for."""

    project_id: str
    environment: str
    secret_path: str = "/"
    view_secret_value: bool = True
    expand_secret_references: bool = False
    recursive: bool = False
    include_personal_overrides: bool = False
    include_imports: bool = False
    tag_slugs: list[str] = field(default_factory=list)
    metadata_filter: list[tuple[str, str]] = field(default_factory=list)


# The real v4 route's reading of ``metadataFilter`` (incomplete pairs dropped, never "any value").
parse_metadata_filter = zodrules.metadata_filter_pairs
MAX_METADATA_FILTERS = zodrules.METADATA_FILTER_MAX_PAIRS


class _Resolver:
    """Looks up referenced secrets by (environment slug, path, key), caching each folder once."""

    def __init__(self, store: Store, project_id: str) -> None:
        self.store = store
        self.project_id = project_id
        self.cache: dict[tuple[str, str], dict[str, str]] = {}

    def lookup(self, env_slug: str, path: str, key: str) -> str | None:
        if (env_slug, path) not in self.cache:
            env = self.store.environment(self.project_id, env_slug)
            found = self.store.secrets_in(env.id, path) if env else []
            self.cache[(env_slug, path)] = {s.key: s.value for s in found if s.type == "shared"}
        return self.cache[(env_slug, path)].get(key)

    def expand(
        self, value: str, env_slug: str, path: str, depth: int = 0, seen: frozenset[str] = frozenset()
    ) -> str:
        if "${" not in value or depth >= MAX_EXPANSION_DEPTH:
            return value

        def replace(match: re.Match[str]) -> str:
            ref = match.group(1).strip()
            parts = ref.split(".")
            if len(parts) == 1:
                target = (env_slug, path, parts[0])
            else:
                target = (parts[0], globs.normalize_path("/".join(parts[1:-1])), parts[-1])
            marker = "|".join(target)
            if marker in seen:
                return ""
            found = self.lookup(*target)
            if found is None:
                return ""  # the real service expands unknown references to an empty string
            return self.expand(found, target[0], target[1], depth + 1, seen | {marker})

        return _REFERENCE.sub(replace, value)


def _apply_overrides(secrets: list[Secret], identity_id: str, include: bool) -> list[Secret]:
    personal = {(s.path, s.key): s for s in secrets if s.type == "personal" and s.owner_id == identity_id}
    out = []
    for s in secrets:
        if s.type == "personal":
            continue
        out.append(personal.pop((s.path, s.key), s) if include else s)
    if include:
        out.extend(personal.values())  # personal secrets without a shared twin
        out.sort(key=lambda s: (s.path, s.key))
    return out


def _matches_filters(s: Secret, tag_ids: set[str] | None, metadata: list[tuple[str, str]]) -> bool:
    if tag_ids is not None and not tag_ids.intersection(s.tag_ids):
        return False
    for key, value in metadata:
        if not any(
            m["key"] == key and not m.get("isEncrypted") and m.get("value") == value for m in s.metadata
        ):
            return False
    return True


class Lister:
    """Builds list responses; one instance per app."""

    def __init__(
        self, store: Store, permissions: Permissions, *, unknown_environment_empty: bool = False
    ) -> None:
        self.store = store
        self.permissions = permissions
        # Self-hosted 2024-10 answers an unknown environment 200 with empty lists, not 404.
        self.unknown_environment_empty = unknown_environment_empty

    def list_secrets(self, query: ListQuery, *, identity_id: str, now: float) -> dict[str, Any]:
        project = self.store.require_project(query.project_id)
        env = self.store.environment(project.id, query.environment)
        if env is None and self.unknown_environment_empty:
            self.permissions.require_member(identity_id, project.id)
            return {"secrets": [], "imports": []}
        if env is None:
            raise NotFound(
                f"Environment with slug '{query.environment}' in project with ID {project.id} not found"
            )
        root = globs.normalize_path(query.secret_path)

        own_env = env.slug

        def readable(path: str, env_slug: str = own_env) -> bool:
            return self.permissions.allowed(
                identity_id,
                project.id,
                now,
                action="read",
                subject=SECRETS,
                environment=env_slug,
                secret_path=path,
            )

        self.permissions.check(
            identity_id,
            project.id,
            now,
            action="read",
            subject=SECRETS,
            environment=env.slug,
            secret_path=root,
        )
        if query.recursive:
            base = globs.depth(root)
            allowed: dict[str, bool] = {root: True}
            secrets = []
            for s in self.store.secrets_under(env.id, root):
                if globs.depth(s.path) - base > MAX_DEPTH:
                    continue
                if s.path not in allowed:
                    allowed[s.path] = readable(s.path)
                if allowed[s.path]:
                    secrets.append(s)
            paths = sorted(p for p, ok in allowed.items() if ok)
        else:
            secrets = self.store.secrets_in(env.id, root)
            paths = [root]
        secrets = _apply_overrides(secrets, identity_id, query.include_personal_overrides)
        tags = self.store.tags(project.id)
        tag_ids = None
        if query.tag_slugs:
            wanted = set(query.tag_slugs)
            tag_ids = {tag_id for tag_id, tag in tags.items() if tag["slug"] in wanted}
        secrets = [s for s in secrets if _matches_filters(s, tag_ids, query.metadata_filter)]
        resolver = _Resolver(self.store, project.id)
        hidden = not query.view_secret_value
        expand = query.expand_secret_references and not hidden
        body: dict[str, Any] = {
            "secrets": [
                wire.secret(
                    s,
                    project_id=project.id,
                    env_slug=env.slug,
                    hidden=hidden,
                    tags=tags,
                    value=resolver.expand(s.value, env.slug, s.path) if expand else None,
                )
                for s in secrets
            ]
        }
        if query.include_imports:
            body["imports"] = self._imports(
                env, paths, resolver, hidden=hidden, expand=expand, readable=readable
            )
        return body

    def _imports(
        self,
        env: Environment,
        paths: list[str],
        resolver: _Resolver,
        *,
        hidden: bool,
        expand: bool,
        readable: Any,
    ) -> list[dict[str, Any]]:
        groups: list[dict[str, Any]] = []
        visited: set[tuple[str, str]] = {(env.id, p) for p in paths}

        def walk(imports: list[Import], depth: int) -> None:
            for imp in imports:
                source = self.store.environment_by_id(imp.import_env_id)
                if source is None or (imp.import_env_id, imp.import_path) in visited:
                    continue
                visited.add((imp.import_env_id, imp.import_path))
                if not readable(imp.import_path, source.slug):
                    continue
                folder = self.store.folder(source.id, imp.import_path)
                secrets = [s for s in self.store.secrets_in(source.id, imp.import_path) if s.type == "shared"]
                groups.append(
                    {
                        "secretPath": imp.import_path,
                        "environment": source.slug,
                        "folderId": folder["id"] if folder else None,
                        "secrets": [
                            wire.secret(
                                s,
                                project_id=env.project_id,
                                env_slug=source.slug,
                                hidden=hidden,
                                value=resolver.expand(s.value, source.slug, s.path) if expand else None,
                                with_path=False,
                                with_times=False,
                            )
                            for s in secrets
                        ],
                    }
                )
                if depth < MAX_IMPORT_DEPTH:
                    walk(self.store.imports_in(source.id, imp.import_path), depth + 1)

        for path in paths:
            walk(self.store.imports_in(env.id, path), 1)
        return groups

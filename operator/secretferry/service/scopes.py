"""Scopes: what one list call selects, as a hashable key shared by every resource that needs it.

Why a key of our own rather than the query model: N resources with the same source must share one
fetch, one cache entry and one stream filter, so equal selections must compare equal (tags and
metadata filters sorted, paths normalized) and carry the identity that reads them.

``SlugCache`` resolves a project slug to its id once per (identity, slug): the list and stream
endpoints want ids, resources may name slugs, and thousands of resources must not cost thousands
of look-ups. A missing project (404) is remembered briefly so a typo does not hammer the service.
Which route answers a slug on each host (v1, or v2 on older servers) is ``slugroutes``'s business.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterable

from secretferry.service import auth, errors, models, slugroutes


def normalize_path(path: str | None) -> str:
    """``"a/b/"`` → ``"/a/b"``; empty → ``"/"`` (the service's folder paths)."""
    parts = [part for part in (path or "/").split("/") if part]
    return "/" + "/".join(parts)


def path_parts(path: str) -> tuple[str, ...]:
    return tuple(part for part in path.split("/") if part)


def is_within(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it (both normalized)."""
    return root == "/" or path == root or path.startswith(root + "/")


@dataclasses.dataclass(frozen=True, slots=True)
class Scope:
    """One distinct selection of secrets, as read by one identity (normalized on creation)."""

    identity_key: str
    project_id: str
    environment: str
    path: str = "/"
    recursive: bool = False
    include_imports: bool = True
    expand_references: bool = True
    tag_slugs: tuple[str, ...] = ()
    metadata_filter: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", normalize_path(self.path))
        object.__setattr__(self, "tag_slugs", tuple(sorted(set(self.tag_slugs))))
        pairs = {(str(key), str(value)) for key, value in self.metadata_filter}
        object.__setattr__(self, "metadata_filter", tuple(sorted(pairs)))

    def to_query(self) -> models.ListSecretsQuery:
        return models.ListSecretsQuery(
            project_id=self.project_id,
            environment=self.environment,
            secret_path=self.path,
            recursive=self.recursive,
            include_imports=self.include_imports,
            expand_secret_references=self.expand_references,
            tag_slugs=self.tag_slugs,
            metadata_filter=self.metadata_filter,
        )

    def covers(self, environment: str, secret_path: str) -> bool:
        """Whether a change at ``environment``/``secret_path`` can change what this scope lists."""
        if environment != self.environment:
            return False
        path = normalize_path(secret_path)
        return path == self.path or (self.recursive and is_within(path, self.path))

    def describe(self) -> str:
        """For logs and status: where, never what."""
        flag = "/**" if self.recursive and self.path != "/" else ("**" if self.recursive else "")
        return f"{self.project_id}:{self.environment}:{self.path}{flag}"


def covering(scopes: Iterable[Scope], environment: str, secret_path: str) -> set[Scope]:
    return {scope for scope in scopes if scope.covers(environment, secret_path)}


@dataclasses.dataclass
class _SlugEntry:
    project_id: str | None = None
    not_found: errors.NotFound | None = None
    expires_at: float | None = None  # monotonic; None = keep
    pending: asyncio.Task[str] | None = None


class SlugCache:
    """Project slug → id, per identity (identities may see different projects under one slug)."""

    def __init__(
        self,
        *,
        # Project ids never change, so positives are kept until a call names the project gone. A
        # slug is re-pointed only when a project is deleted and recreated under it; the old id
        # then answers 404 and the caller ``forget``s it, so the next look-up finds the new one.
        ttl_seconds: float | None = None,
        # Long enough to absorb a burst of resources with the same typo, short enough that
        # creating the project is noticed within a reconcile or two.
        negative_ttl_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        routes: slugroutes.SlugRoutes | None = None,
    ) -> None:
        """``routes`` is shared with the identity status, which shows a host's slug route."""
        self.routes = routes if routes is not None else slugroutes.SlugRoutes()
        self._ttl = ttl_seconds
        self._negative_ttl = negative_ttl_seconds
        self._clock = clock
        self._entries: dict[tuple[str, str], _SlugEntry] = {}
        self.lookups = 0

    async def resolve(self, identity_key: str, slug: str, session: auth.AuthSession) -> str:
        """The project id for ``slug``; one look-up for many concurrent callers; NotFound is cached."""
        key = (identity_key, slug)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _SlugEntry()
        if entry.expires_at is None or self._clock() < entry.expires_at:
            if entry.project_id is not None:
                return entry.project_id
            if entry.not_found is not None:
                raise _copy_not_found(entry.not_found)
        if entry.pending is None:
            # A task of its own, so that a cancelled caller does not cancel the others' look-up.
            entry.pending = asyncio.create_task(self._lookup(entry, slug, session))
            entry.pending.add_done_callback(_retrieve)
        return await asyncio.shield(entry.pending)

    def forget(self, identity_key: str, slug: str, project_id: str) -> bool:
        """Drop ``slug`` → ``project_id`` after the service said that project is not found.

        Only that mapping: a look-up that found another id meanwhile is kept. Returns whether
        something was dropped.
        """
        key = (identity_key, slug)
        entry = self._entries.get(key)
        if entry is None or entry.project_id != project_id or entry.pending is not None:
            return False
        del self._entries[key]
        return True

    def known_slugs(self) -> dict[tuple[str, str], str]:
        """(identity key, project id) → the slug it was looked up by (the first, if several), for
        the identity's status: a SecretSync that names its project by slug finds its scope there."""
        found: dict[tuple[str, str], str] = {}
        for (identity_key, slug), entry in sorted(self._entries.items()):
            if entry.project_id is not None:
                found.setdefault((identity_key, entry.project_id), slug)
        return found

    async def _lookup(self, entry: _SlugEntry, slug: str, session: auth.AuthSession) -> str:
        self.lookups += 1
        try:
            project = await session.call(lambda client: self.routes.project(client, slug))
        except errors.NotFound as exc:
            entry.project_id, entry.not_found = None, exc
            entry.expires_at = self._clock() + self._negative_ttl
            raise
        finally:
            entry.pending = None
        entry.project_id, entry.not_found = project.id, None
        entry.expires_at = None if self._ttl is None else self._clock() + self._ttl
        return project.id


def _retrieve(task: asyncio.Task[str]) -> None:
    """Mark a failure as seen: callers that were cancelled meanwhile must not cause a warning."""
    if not task.cancelled():
        task.exception()


def _copy_not_found(exc: errors.NotFound) -> errors.NotFound:
    return errors.NotFound(exc.message, status_code=exc.status_code, req_id=exc.req_id)

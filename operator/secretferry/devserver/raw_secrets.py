"""v3 "raw" secret semantics on top of the v4 code paths, separate from HTTP.

What v3 adds to v4 (from the real ``secret-v2-bridge`` service):

- the project may be named by slug (``extractProjectIdFromSlug``: the id wins when both are sent,
  neither is a 400);
- one secret by name: read through the same ``Lister`` as ``GET /api/v4/secrets`` (permissions,
  reference expansion, hidden values, imports), then picked; a miss falls back to the imports,
  the last import first, when ``include_imports`` is on;
- before a write: the folder must exist (404 named after the operation), a machine identity
  cannot write personal secrets (400), tags are ids that must exist (404), and existence is
  checked before the permission, in the real order.

Writes themselves go through ``mutations`` so a v3 write emits exactly the events a v4 one does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from secretferry.devserver import globs, listing, wire
from secretferry.devserver.errors import BadRequest, NotFound
from secretferry.devserver.permissions import SECRETS
from secretferry.devserver.state import DevState
from secretferry.devserver.store import Environment, Project


@dataclass(frozen=True)
class ReadOptions:
    """``GET /api/v3/secrets/raw/{name}`` query options (real defaults in the route)."""

    type_: str = "shared"
    version: float | None = None
    view_secret_value: bool = True
    expand_secret_references: bool = False
    include_imports: bool = False


def project_id_from(state: DevState, caller_id: str, *, project_id: str | None, slug: str | None) -> str:
    """The project id a v3 request names: ``workspaceId`` as is, else ``workspaceSlug``/``projectSlug``
    resolved within the caller's reach (a non-member learns nothing: 403)."""
    if project_id:
        return project_id
    if not slug:
        raise BadRequest("You must provide projectSlug or workspaceId")
    project = state.store.project_by_slug(slug)
    if project is None:
        raise NotFound(f"No project found with slug {slug}")
    state.permissions.require_member(caller_id, project.id)
    return project.id


def folder_exists(state: DevState, env: Environment, path: str) -> bool:
    return path == "/" or state.store.folder(env.id, path) is not None


def _located(
    state: DevState, caller_id: str, project_id: str, env_slug: str, path: str, operation: str
) -> tuple[Project, Environment]:
    """Project (404), membership (403), then environment and folder: one 404 named ``operation``,
    as the real service looks both up in a single folder query."""
    project = state.store.require_project(project_id)
    state.permissions.require_member(caller_id, project.id)
    env = state.store.environment(project.id, env_slug)
    if env is None or not folder_exists(state, env, path):
        raise NotFound(
            f"Folder with path '{path}' in environment with slug '{env_slug}' not found", name=operation
        )
    return project, env


def get_secret(
    state: DevState,
    caller_id: str,
    *,
    project_id: str,
    env_slug: str,
    path: str,
    name: str,
    options: ReadOptions,
) -> dict[str, Any]:
    """One secret by name in the list form (with ``secretPath``, tags and metadata)."""
    project, env = _located(state, caller_id, project_id, env_slug, path, "GetSecretByName")
    query = listing.ListQuery(
        project_id=project.id,
        environment=env.slug,
        secret_path=path,
        view_secret_value=options.view_secret_value,
        expand_secret_references=options.expand_secret_references,
        include_personal_overrides=options.type_ == "personal",
        include_imports=options.include_imports,
    )
    listed = state.lister.list_secrets(query, identity_id=caller_id, now=state.now())
    for item in listed["secrets"]:
        if item["secretKey"] != name or item["type"] != options.type_:
            continue
        # Only the current version is kept; an older one is as missing as an unknown one.
        if options.version is None or item["version"] == options.version:
            return dict(item)
    for group in reversed(listed.get("imports") or []):
        for item in group["secrets"]:
            if item["secretKey"] == name:
                return _imported(state, project, group, item)
    raise NotFound(f"Secret with name '{name}' not found")


def _imported(
    state: DevState, project: Project, group: dict[str, Any], item: dict[str, Any]
) -> dict[str, Any]:
    """An imported secret as the real service returns it: in its own environment and path, with
    dates (the list's import groups leave those out)."""
    source = state.store.require_environment(project.id, group["environment"])
    stored = state.store.secret(source.id, group["secretPath"], item["secretKey"])
    if stored is None:  # listed a moment ago: only a concurrent delete gets here
        raise NotFound(f"Secret with name '{item['secretKey']}' not found")
    return wire.secret(
        stored,
        project_id=project.id,
        env_slug=source.slug,
        value=item["secretValue"],
        hidden=bool(item["secretValueHidden"]),
        tags=state.store.tags(project.id),
    )


@dataclass(frozen=True)
class WriteTarget:
    project: Project
    env: Environment
    path: str


def write_target(
    state: DevState,
    caller_id: str,
    *,
    project_id: str,
    env_slug: str,
    secret_path: str,
    type_: str,
    operation: str,
) -> WriteTarget:
    """Checks every v3 write makes before looking at the secret itself."""
    path = globs.normalize_path(secret_path)
    project, env = _located(state, caller_id, project_id, env_slug, path, operation)
    if type_ == "personal":
        verb = "delete" if operation == "DeleteSecret" else "create"
        raise BadRequest(f"Must be user to {verb} personal secret")
    return WriteTarget(project, env, path)


def require_tags(state: DevState, project: Project, tag_ids: list[str] | None) -> None:
    """Tags are sent by id and must all exist (the real service: 404 naming those it found)."""
    if not tag_ids:
        return
    known = state.store.tags(project.id)
    found = [known[t]["slug"] for t in dict.fromkeys(tag_ids) if t in known]
    if len(found) != len(tag_ids):
        raise NotFound(f"Tag not found. Found {','.join(found)}")


def require_permission(state: DevState, caller_id: str, target: WriteTarget, action: str) -> None:
    state.permissions.check(
        caller_id,
        target.project.id,
        state.now(),
        action=action,
        subject=SECRETS,
        environment=target.env.slug,
        secret_path=target.path,
    )


def value_hidden(state: DevState, caller_id: str, target: WriteTarget) -> bool:
    """Write answers show the value only to callers who may read it."""
    return not state.permissions.allowed(
        caller_id,
        target.project.id,
        state.now(),
        action="read",
        subject=SECRETS,
        environment=target.env.slug,
        secret_path=target.path,
    )

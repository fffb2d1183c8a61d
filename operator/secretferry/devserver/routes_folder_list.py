"""``GET /api/v2/folders``: list the folders below a path (the official SDKs' ``list_folders``).

As the real service: project members may list folders (no folder permission is checked), an
unknown environment is 404, a missing parent folder is an empty list, ``recursive`` lists the
whole subtree with ``relativePath``, and ``lastSecretModified`` keeps folders whose secrets changed
since then. The dev server does not record that time (it is always null), so with the filter
nothing is listed, as the real service does for folders without one.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from secretferry.devserver import globs, query, wire
from secretferry.devserver.auth import CallerDep, StateDep
from secretferry.devserver.errors import NotFound
from secretferry.devserver.timeutil import parse_iso

router = APIRouter()


def _required(value: str | None, name: str, issues: query.Issues) -> str:
    if value is None:
        issues.add(name, "invalid_type", "Required")
        return ""
    return value


@router.get("/api/v2/folders")
async def list_folders(request: Request, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    params = request.query_params
    issues = query.Issues()
    project_id = _required(query.text(params, "projectId", issues), "projectId", issues)
    env_slug = _required(query.text(params, "environment", issues), "environment", issues)
    raw_path = _required(query.text(params, "path", issues), "path", issues)
    since = query.text(params, "lastSecretModified", issues)
    if since is not None:
        try:
            parse_iso(since)
        except ValueError:
            issues.add("lastSecretModified", "invalid_string", "Invalid datetime")
    recursive = query.lenient_flag(params, "recursive", default=False)
    issues.raise_if_any()

    project = state.store.require_project(project_id)
    state.permissions.require_member(caller.identity_id, project.id)
    env = state.store.environment(project.id, env_slug)
    if env is None:
        raise NotFound(f"Environment with slug '{env_slug}' not found")
    parent = globs.normalize_path(raw_path)
    if parent != "/" and state.store.folder(env.id, parent) is None:
        return {"folders": []}
    if since is not None:
        return {"folders": []}  # no folder here has a lastSecretModified to compare
    paths = sorted(
        p
        for p in state.store.folder_paths(env.id)
        if p != parent
        and globs.is_within(p, parent)
        and (recursive or globs.depth(p) == globs.depth(parent) + 1)
    )
    folders = []
    for path in paths:
        row = state.store.folder(env.id, path)
        if row is None:
            continue
        item = wire.folder(row)
        del item["path"]  # the real list schema has no path; a recursive list adds relativePath
        if recursive:
            item["relativePath"] = path
        folders.append(item)
    return {"folders": folders}

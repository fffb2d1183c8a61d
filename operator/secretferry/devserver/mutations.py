"""Writes that other parties must hear about: secret changes and the events they cause.

Shared by the v4 write endpoints, batch delete and the admin API so that every write path emits
the same events: the direct ``secret:*`` event to subscribers of the written path, and
``secret:import-mutation`` to subscribers of every path importing it (transitively).
"""

from __future__ import annotations

from typing import Any

from secretferry.devserver import events
from secretferry.devserver.errors import BadRequest, NotFound
from secretferry.devserver.state import DevState
from secretferry.devserver.store import Environment, Secret

MAX_IMPORT_HOPS = 5  # same depth as listing follows nested imports


def notify(state: DevState, env: Environment, event: str, secrets: list[Secret]) -> None:
    now = state.now()
    changes = [events.Change(env.slug, s.path, s.key, s.id) for s in secrets]
    state.bus.publish(env.project_id, event, changes, now)
    for path in sorted({s.path for s in secrets}):
        notify_importers(state, env, path)


def notify_importers(state: DevState, env: Environment, path: str) -> None:
    """Send import-mutation to subscribers of each path that (transitively) imports ``env``/``path``."""
    seen: set[tuple[str, str]] = {(env.id, path)}
    frontier = [(env.id, path)]
    changes: list[events.Change] = []
    for _ in range(MAX_IMPORT_HOPS):
        next_frontier = []
        for env_id, source_path in frontier:
            for imp in state.store.importers_of(env_id, source_path):
                if (imp.env_id, imp.path) in seen:
                    continue
                seen.add((imp.env_id, imp.path))
                importer_env = state.store.environment_by_id(imp.env_id)
                if importer_env is not None:
                    changes.append(events.Change(importer_env.slug, imp.path))
                next_frontier.append((imp.env_id, imp.path))
        frontier = next_frontier
    state.bus.publish_each(env.project_id, events.IMPORT_MUTATION, changes, state.now())


def write_secret(
    state: DevState,
    env: Environment,
    path: str,
    key: str,
    *,
    mode: str,
    owner_id: str = "",
    type_: str = "shared",
    value: str | None = None,
    comment: str | None = None,
    tag_refs: list[str] | None = None,
    metadata: list[dict[str, Any]] | None = None,
    new_key: str | None = None,
    skip_multiline: bool | None = None,
    reminder_note: str | None = None,
    reminder_days: int | None = None,
) -> Secret:
    """``mode``: ``create`` (400 if it exists), ``update`` (404 if missing) or ``upsert``."""
    owner = owner_id if type_ == "personal" else ""
    existing = state.store.secret(env.id, path, key, type_=type_, owner_id=owner)
    if mode == "create" and existing is not None:
        raise BadRequest(f"Secret with name '{key}' already exists")
    if mode == "update" and existing is None:
        raise NotFound(f"Secret with name '{key}' not found")
    tag_ids = state.store.tag_ids_for(env.project_id, tag_refs) if tag_refs is not None else None
    secret, created = state.store.put_secret(
        env.id,
        path,
        key,
        state.now(),
        value=value,
        comment=comment,
        tag_ids=tag_ids,
        metadata=metadata,
        type_=type_,
        owner_id=owner,
        new_key=new_key,
        skip_multiline=skip_multiline,
        reminder_note=reminder_note,
        reminder_days=reminder_days,
    )
    notify(state, env, events.CREATE if created else events.UPDATE, [secret])
    return secret


def delete_secrets(
    state: DevState, env: Environment, path: str, items: list[tuple[str, str]], *, owner_id: str = ""
) -> list[Secret]:
    """Delete (key, type) pairs; all must exist or nothing is deleted (404)."""
    found = []
    for key, type_ in items:
        secret = state.store.secret(
            env.id, path, key, type_=type_, owner_id=owner_id if type_ == "personal" else ""
        )
        if secret is None:
            raise NotFound(f"Secret with name '{key}' not found")
        found.append(secret)
    for secret in found:
        state.store.delete_secret(secret)
    notify(state, env, events.DELETE, found)
    return found

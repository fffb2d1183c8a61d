"""A push and a pull that would feed each other: refused before anything is read or sent.

A PushSecret writing Secret S to folder F, and a SecretSync of the same namespace writing F into
that same Secret S (its target, ``creationPolicy: Merge`` or not), form a loop by construction:
an edit of a key the SecretSync writes is a hand edit it repairs from F, racing the push of the
new value into F, and the two may undo each other. A push and a pull of one folder into
*different* Secrets settle (the integration test counts the writes); this is the one shape that
cannot, so it is refused with ``PushLoop``, naming the SecretSync. Pure: it reads the SecretSync
bodies the controller keeps, those the table's index says write the pushed Secret (sync_table.py:
a pass costs O(SecretSyncs writing that Secret), not O(all SecretSyncs)).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from secretferry.models import pushsecret as push_models
from secretferry.reconcile import problems, reasons, sync_table


def _under(path: str, prefix: str) -> bool:
    path, prefix = path.rstrip("/") or "/", prefix.rstrip("/") or "/"
    return prefix == "/" or path == prefix or path.startswith(prefix + "/")


def _reads(source: Mapping[str, Any], dest: push_models.Destination) -> bool:
    same_project = (dest.project_id is not None and source.get("projectId") == dest.project_id) or (
        dest.project_slug is not None and source.get("projectSlug") == dest.project_slug
    )
    if not same_project or source.get("environment") != dest.environment:
        return False
    path = str(source.get("path") or "/")
    return path.rstrip("/") == dest.path.rstrip("/") or (
        bool(source.get("recursive")) and _under(dest.path, path)
    )


def pulling_into(
    syncs: Iterable[tuple[tuple[str, str], Mapping[str, Any]]],
    *,
    namespace: str,
    secret: str,
    destination: push_models.Destination,
) -> str | None:
    """The name of a SecretSync in ``namespace`` that writes ``secret`` from the destination.

    ``syncs``: candidates, usually ``SyncTable.writing(namespace, secret)``; any others are
    skipped here too."""
    for key, body in syncs:
        if sync_table.written_secret(key, body) != (namespace, secret):
            continue
        spec = body.get("spec") or {}
        if any(_reads(src, destination) for src in spec.get("sources") or []):
            return key[1]
    return None


def refusal(*, namespace: str, secret: str, sync: str) -> problems.Problem:
    return problems.Problem(
        reasons.PUSH_LOOP,
        f"SecretSync {namespace}/{sync} writes Secret {secret} from the folder this PushSecret pushes "
        "it to: the two would undo each other's changes; pull into another Secret, or push elsewhere; "
        "nothing was sent",
        # A SecretSync edit does not requeue PushSecrets: retried with backoff.
        retriable=True,
    )

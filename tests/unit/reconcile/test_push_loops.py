"""A push whose source Secret a SecretSync writes from the same folder is refused (loops.py)."""

from __future__ import annotations

from typing import Any

import pytest

from secretferry.models import pushsecret as push_models
from secretferry.reconcile import reasons
from secretferry.reconcile.push import loops

DEST = push_models.Destination(project_id="p1", environment="dev", path="/shared/db")


def sync(
    name: str, *, target: str | None = None, ns: str = "ns", **source: Any
) -> tuple[tuple[str, str], Any]:
    src = {"projectId": "p1", "environment": "dev", "path": "/shared/db", **source}
    spec: dict[str, Any] = {"sources": [src]}
    if target is not None:
        spec["target"] = {"name": target}
    return ((ns, name), {"spec": spec})


@pytest.mark.parametrize(
    ("syncs", "found"),
    [
        ([sync("src")], "src"),  # target defaults to the SecretSync's name
        ([sync("puller", target="src")], "puller"),
        ([sync("puller", target="other")], None),  # a pull into another Secret settles
        ([sync("src", ns="elsewhere")], None),
        ([sync("src", environment="prod")], None),
        ([sync("src", projectId="p2")], None),
        ([sync("src", path="/shared")], None),  # not recursive: another folder
        ([sync("src", path="/shared", recursive=True)], "src"),
        ([sync("src", path="/shared-x", recursive=True)], None),
    ],
)
def test_a_sync_writing_the_source_from_the_destination(syncs: list[Any], found: str | None) -> None:
    assert loops.pulling_into(syncs, namespace="ns", secret="src", destination=DEST) == found


def test_the_refusal_names_the_secretsync() -> None:
    problem = loops.refusal(namespace="ns", secret="src", sync="puller")
    assert problem.reason == reasons.PUSH_LOOP and "ns/puller" in problem.message

"""A push whose source Secret a SecretSync writes from the same folder is refused (loops.py)."""

from __future__ import annotations

from typing import Any

import pytest

from secretferry.models import pushsecret as push_models
from secretferry.reconcile import reasons, state, sync_table
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


# --- the index a pass asks instead of scanning every SecretSync (sync_table.py) ----------------


def entry(key: tuple[str, str], body: dict[str, Any]) -> state.SyncEntry:
    return state.SyncEntry(key=key, uid="u", generation=1, body=body, status={})


def test_the_table_indexes_the_secret_each_entry_writes() -> None:
    table = sync_table.SyncTable()
    for i in range(10_000):  # elsewhere: none of them is a candidate
        key, body = sync(f"s{i}", target=f"t{i}")
        table[key] = entry(key, body)
    key, body = sync("puller", target="src")
    table[key] = entry(key, body)
    assert table.writing("ns", "src") == [(("ns", "puller"), body)]
    assert loops.pulling_into(table.writing("ns", "src"), namespace="ns", secret="src", destination=DEST) == (
        "puller"
    )

    moved_key, moved = sync("puller", target="elsewhere")  # a new generation writes another Secret
    table[moved_key] = entry(moved_key, moved)
    assert table.writing("ns", "src") == []
    assert table.writing("ns", "elsewhere") == [(("ns", "puller"), moved)]
    assert table.pop(("ns", "puller")).body is moved  # the mixin's pop goes through the index
    assert table.writing("ns", "elsewhere") == []
    assert len(table) == 10_000 and ("ns", "s7") in table

    config_key = ("ns", "cm")
    table[config_key] = entry(config_key, {"spec": {"target": {"kind": "ConfigMap", "name": "src"}}})
    assert table.writing("ns", "src") == []  # a ConfigMap is not the pushed Secret
    del table[("ns", "s1")]
    assert table.writing("ns", "t1") == [] and table.get(("ns", "s1")) is None


def test_a_cluster_entry_writes_the_secret_named_after_its_clustersecretsync() -> None:
    """A ClusterSecretSync's entry without target.name writes a Secret named after the
    ClusterSecretSync (its pass's target_name), not after the entry's key."""
    table = sync_table.SyncTable()
    key = state.cluster_key("ns", "shared")
    body = {
        "metadata": {"name": "shared", "namespace": "ns"},
        "spec": {"sources": [{"projectId": "p1", "environment": "dev", "path": "/shared/db"}]},
    }
    table[key] = entry(key, body)
    found = loops.pulling_into(
        table.writing("ns", "shared"), namespace="ns", secret="shared", destination=DEST
    )
    assert found == key[1]

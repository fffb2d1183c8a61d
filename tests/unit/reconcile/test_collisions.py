"""A key listed from several folders of a recursive source: the deepest folder wins, and it is said."""

from __future__ import annotations

import pytest

from secretferry.reconcile import collisions
from secretferry.service import models

VALUE = "v-secret-value"


def _listed(*entries: tuple[str, str | None, str]) -> list[models.Secret]:
    return [models.Secret(secret_key=k, secret_path=p, secret_value=v) for k, p, v in entries]


@pytest.mark.parametrize(
    ("entries", "value", "folders"),
    [
        # Deeper wins, whichever order the service answered in.
        ((("K", "/app", "top"), ("K", "/app/prod", "deep")), "deep", ("/app/prod", "/app")),
        ((("K", "/app/prod", "deep"), ("K", "/app", "top")), "deep", ("/app/prod", "/app")),
        # Same depth: the path that sorts first, again independent of the answer's order.
        ((("K", "/app/b", "b"), ("K", "/app/a", "a")), "a", ("/app/a", "/app/b")),
        ((("K", "/app/a", "a"), ("K", "/app/b", "b")), "a", ("/app/a", "/app/b")),
        # Three folders, and a secret without secretPath standing for the root.
        (
            (("K", None, "root"), ("K", "/app/x/y", "deepest"), ("K", "/app/x", "mid")),
            "deepest",
            ("/app/x/y", "/app/x", "/app"),
        ),
    ],
)
def test_the_deepest_folder_wins(
    entries: tuple[tuple[str, str | None, str], ...], value: str, folders: tuple[str, ...]
) -> None:
    values, found = collisions.direct(_listed(*entries, ("OTHER", "/app", "o")), root="/app")
    assert values == {"K": value, "OTHER": "o"}
    assert found == [collisions.Collision("K", folders)]


def test_no_collision_no_note() -> None:
    values, found = collisions.direct(_listed(("A", "/", "a"), ("B", "/x", "b")), root="/")
    assert values == {"A": "a", "B": "b"} and found == []


def test_describe_names_keys_and_folders_never_values() -> None:
    _, found = collisions.direct(
        _listed(*((f"K{n}", path, VALUE) for n in range(7) for path in ("/a", "/a/b"))), root="/"
    )
    text = collisions.describe(found)
    assert text.startswith(
        "keys listed from several folders, the deepest synced: K0 in /a/b, /a (/a/b synced)"
    )
    assert "K4" in text and "K5" not in text and text.endswith(" and 2 more")
    assert VALUE not in text

"""The dev server's SQLite file holds secret values and tokens: only its owner may read it."""

from __future__ import annotations

import stat
from pathlib import Path

from secretferry.devserver import db


def test_a_new_database_file_is_private_to_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "devserver.sqlite"
    database = db.Database(path)
    database.mark_seeded()  # WAL and shared-memory files appear with the first write
    for file in tmp_path.iterdir():
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file.name
    database.conn.close()

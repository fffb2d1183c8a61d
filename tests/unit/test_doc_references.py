"""Every document the code cites is in the repository: a docstring that says "see X.md" must lead
a reader somewhere (the design notes the code grew from once lived outside it)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CITED = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.md)\b")
# Where the code is read: the package, its tests, the benchmarks and scripts, the chart.
SOURCES = ["operator/secretferry", "tests", "bench", "hack", "charts"]
SUFFIXES = {".py", ".sh", ".yaml", ".tpl", ".txt"}
# Files that quote document names as examples, not as citations.
_QUOTING = {Path(__file__).name, "test_crd_descriptions.py"}


def cited() -> dict[str, set[str]]:
    """Cited document -> the files citing it."""
    found: dict[str, set[str]] = {}
    for top in SOURCES:
        for path in (REPO / top).rglob("*"):
            if path.suffix not in SUFFIXES or not path.is_file() or path.name in _QUOTING:
                continue
            for name in CITED.findall(path.read_text(encoding="utf-8", errors="replace")):
                found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return found


def resolves(name: str, citing: str) -> bool:
    """From the repository root, next to the citing file, or in docs/ (``REPO / "docs" /
    "settings.md"`` cites it in two words; ``$REPO/README.md`` in a script is the root's)."""
    base = name.rsplit("/", 1)[-1]
    places = [REPO / name, (REPO / citing).parent / name, REPO / "docs" / base]
    if name.split("/", 1)[0].isupper():  # a variable in a script or path expression
        places.append(REPO / base)
    return any(place.is_file() for place in places)


def test_the_code_cites_documents_at_all() -> None:
    assert "docs/service-contract.md" in cited()


def test_every_cited_document_exists() -> None:
    missing = {
        name: sorted(files)
        for name, files in cited().items()
        if not all(resolves(name, citing) for citing in files)
    }
    assert not missing, f"documents cited but not in the repository: {missing}"

"""Shared constants and helpers for the chart tests (fixtures live in conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "secretferry"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))

Manifest = dict[str, Any]
Helm = Callable[..., str]
Render = Callable[..., list[Manifest]]


def by_kind(docs: Sequence[Manifest], kind: str) -> list[Manifest]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: Sequence[Manifest], kind: str) -> Manifest:
    found = by_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def operator_harness() -> Any:
    """The operator tests' ``harness`` module (dev server seed, CR helpers, ``eventually``).

    Imported by name so that a session which also ran the operator tests shares one module object.
    """
    import importlib
    import sys

    here = str(ROOT / "tests" / "integration" / "operator")
    if here not in sys.path:
        sys.path.append(here)
    return importlib.import_module("harness")

"""Helpers shared by the node tests."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

_OPERATOR_TESTS = str(Path(__file__).resolve().parents[1] / "operator")


def operator_harness() -> Any:
    """The operator tests' ``harness`` (seed, CR helpers, ``eventually``), shared by module name."""
    if _OPERATOR_TESTS not in sys.path:
        sys.path.append(_OPERATOR_TESTS)
    return importlib.import_module("harness")

"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from secretferry import metrics


@pytest.fixture
def per_object() -> Iterator[None]:
    """The opt-in per-object gauge turned on for one test (the process-wide switch goes back off)."""
    metrics.export_per_object(True)
    try:
        yield
    finally:
        metrics.export_per_object(False)

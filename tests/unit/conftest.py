"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from secretferry import metrics
from secretferry.kube import eventcache, events


@pytest.fixture(autouse=True)
def fresh_event_correlation() -> Iterator[None]:
    """Each test starts with no Event history: the process-wide correlation would otherwise count
    one test's Events into another's series or rate limit."""
    saved = events.CORRELATOR
    events.CORRELATOR = eventcache.Correlator()
    try:
        yield
    finally:
        events.CORRELATOR = saved


@pytest.fixture
def per_object() -> Iterator[None]:
    """The opt-in per-object gauge turned on for one test (the process-wide switch goes back off)."""
    metrics.export_per_object(True)
    try:
        yield
    finally:
        metrics.export_per_object(False)

"""Helpers shared by the node tests."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

_OPERATOR_TESTS = str(Path(__file__).resolve().parents[1] / "operator")


def operator_harness() -> Any:
    """The operator tests' ``harness`` (seed, CR helpers, ``eventually``), shared by module name."""
    if _OPERATOR_TESTS not in sys.path:
        sys.path.append(_OPERATOR_TESTS)
    return importlib.import_module("harness")


# Test timing only (nothing here changes what the operator may do): quick retries and heartbeats.
FAST_ENV: list[dict[str, str]] = [
    {"name": "SECRETFERRY_BACKOFF_INITIAL_SECONDS", "value": "0.5"},
    {"name": "SECRETFERRY_BACKOFF_MAX_SECONDS", "value": "3"},
    {"name": "SECRETFERRY_STREAM_HEARTBEAT_SECONDS", "value": "1"},
]


def checked_again(operator: Any) -> bool:
    """Whether the running operator pod has looked at a SecretSync and found nothing to write
    (its ``unchanged`` count, which starts at 0 in every new pod)."""
    try:
        metrics = operator.metrics()
    except OSError:  # Ready (running) before its metrics endpoint listens
        return False
    return any(
        sample.name == "secretferry_syncs_total"
        and sample.labels == {"result": "unchanged"}
        and sample.value >= 1
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
    )

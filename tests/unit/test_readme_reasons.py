"""README's troubleshooting table lists exactly the status reasons the operator writes.

The reasons are the constants of ``reconcile/reasons.py`` that some module of the operator uses;
a reason documented but never written (or written but not documented) fails here. The constants
that are not ``Ready`` reasons (the condition type, the ``status.updateMode`` words) are named
below, so a new constant must be placed on one side or the other.
"""

from __future__ import annotations

import re
from pathlib import Path

import health_table

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "operator" / "secretferry"
REASONS = health_table.REASONS
README = ROOT / "README.md"

# Constants of reasons.py that are not a Ready condition's reason.
NOT_REASONS = {
    "READY",  # the condition type
    "STALLED",  # kstatus' condition type, written beside Ready (conditions.set_condition)
    "STREAMING",  # status.updateMode and updateModeReason, documented below the table
    "POLLING",
    "INSTANT_UPDATES_DISABLED",
    "ON_CHANGE",  # status.updateMode under spec.refreshPolicy
    "CREATED_ONCE",
    # Event reasons of DynamicSecretLease, never a Ready reason (README, "DynamicSecretLease").
    "LEASE_REPLACED",
    "LEASE_REVOKED",
    "LEASE_RETAINED",
    "LEASE_REVOKE_FAILED",
}


def used(name: str) -> bool:
    """Whether a module other than reasons.py refers to ``reasons.<name>``."""
    pattern = re.compile(rf"\breasons\.{name}\b")
    return any(
        pattern.search(path.read_text())
        for path in PACKAGE.rglob("*.py")
        if path != REASONS and "devserver" not in path.parts
    )


def written_reasons() -> set[str]:
    return {
        value for name, value in health_table.constants().items() if name not in NOT_REASONS and used(name)
    }


def documented_reasons() -> set[str]:
    """First-column values of the table under README's troubleshooting heading."""
    section = README.read_text().split("\n## Troubleshooting by status reason\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([A-Za-z]+)` \|", section, flags=re.MULTILINE))


def test_the_parsers_find_what_they_look_for() -> None:
    names = health_table.constants()
    assert names["SYNCED"] == "Synced" and names["READY"] == "Ready"
    assert set(names) >= NOT_REASONS, "a name listed as not a reason is gone from reasons.py"
    assert used("SYNCED")
    assert {"Synced", "LoggedIn", "KubernetesError"} <= documented_reasons()


def test_readme_documents_exactly_the_reasons_the_operator_writes() -> None:
    written, documented = written_reasons(), documented_reasons()
    assert sorted(written - documented) == [], "written but missing from README's troubleshooting table"
    assert sorted(documented - written) == [], "in README's troubleshooting table but never written"


def test_every_reason_constant_is_used() -> None:
    """A reason nobody writes is dead vocabulary: drop it from reasons.py (and README)."""
    unused = [name for name in health_table.constants() if name not in NOT_REASONS and not used(name)]
    assert unused == []

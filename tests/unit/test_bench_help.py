"""Every benchmark answers ``--help`` and does nothing else.

A reader (and ``make bench-full``'s author) learns a script's knobs and clocks from ``--help``; a
script that ran its benchmark instead would hold two shared cores for minutes and start a control
plane nobody asked for.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "bench").glob("bench_*.py"))
# The ones that start a control plane, so they take --control-plane (bench_devserver runs the dev
# server alone).
WITH_CONTROL_PLANE = {
    "bench_cluster_secretsync.py",
    "bench_leases.py",
    "bench_login.py",
    "bench_node.py",
    "bench_operator_scale.py",
    "bench_refresh_policy.py",
    "bench_outage.py",
    "bench_push.py",
    "bench_ratelimit.py",
    "bench_streams.py",
    "bench_template_bomb.py",
    "bench_webhook.py",
}
# Generous: --help imports the script and its helpers (about half a second on an idle machine);
# this only turns a script that starts benchmarking into a failure instead of a hung test run.
HELP_TIMEOUT_SECONDS = 60


def test_every_script_is_listed() -> None:
    # bench_devserver runs the dev server alone, bench_rewrite pure code.
    assert {s.name for s in SCRIPTS} == WITH_CONTROL_PLANE | {"bench_devserver.py", "bench_rewrite.py"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_prints_usage_and_starts_nothing(script: Path, tmp_path: Path) -> None:
    # Every work directory (control plane, dev server, node) comes from tempfile, so an empty
    # TMPDIR afterwards means nothing was set up.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(script), "--help"],
        capture_output=True,
        text=True,
        timeout=HELP_TIMEOUT_SECONDS,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {script.name}"), done.stdout[:200]
    assert "Clocks" in done.stdout  # the module docstring, with where each clock starts and stops
    assert ("--control-plane {tuned,production}" in done.stdout) == (script.name in WITH_CONTROL_PLANE)
    assert list(tmp_path.iterdir()) == []

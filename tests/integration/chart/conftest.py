"""Helm helpers for the chart tests: the pinned helm binary, an isolated HELM_* home, rendering.

Rendering needs only the helm binary (from the control-plane cache), not a running cluster, so the
render and drift tests stay fast; install and dry-run tests take the ``control_plane`` fixture.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from chart_helpers import CHART, Helm, Manifest, Render

from secretferry.devcluster import binaries


@pytest.fixture(scope="session")
def helm_bin() -> Path:
    return binaries.ensure() / "helm"


@pytest.fixture(scope="session")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Keep helm's cache, config and data out of the developer's home directory."""
    home = tmp_path_factory.mktemp("helm-home")
    env = dict(os.environ)
    for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        env[var] = str(home / var.lower())
    env.pop("KUBECONFIG", None)
    return env


@pytest.fixture(scope="session")
def helm(helm_bin: Path, helm_env: dict[str, str]) -> Helm:
    def run(*args: str, check: bool = True) -> str:
        proc = subprocess.run(
            [str(helm_bin), *args], capture_output=True, text=True, env=helm_env, check=False
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
        return proc.stdout + proc.stderr if not check else proc.stdout

    return run


@pytest.fixture(scope="session")
def render(helm: Helm) -> Render:
    def run(
        *values_files: Path,
        release: str = "ci",
        namespace: str = "secretferry-system",
        set_values: Sequence[str] = (),
        api_versions: Sequence[str] = (),
    ) -> list[Manifest]:
        """``api_versions``: what the cluster would serve (``.Capabilities.APIVersions``), e.g.
        ``monitoring.coreos.com/v1/ServiceMonitor``; ``helm template`` knows no cluster."""
        args = ["template", release, str(CHART), "--namespace", namespace]
        for f in values_files:
            args += ["--values", str(f)]
        for s in set_values:
            args += ["--set", s]
        for api in api_versions:
            args += ["--api-versions", api]
        return [d for d in yaml.safe_load_all(helm(*args)) if d]

    return run

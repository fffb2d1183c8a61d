"""Helm helpers for the chart tests: the pinned helm binary, an isolated HELM_* home, rendering.

The e2e tests (test_chart_e2e.py, test_chart_two_releases.py) share ``service`` (the dev server)
and ``install`` (a real ``helm install``, uninstalled afterwards).

Rendering needs only the helm binary (from the control-plane cache), not a running cluster, so the
render and drift tests stay fast; install and dry-run tests take the ``control_plane`` fixture.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
import yaml
from chart_helpers import CHART, Helm, Installed, Manifest, Render, operator_harness

from secretferry.devcluster import binaries
from secretferry.devcluster.cluster import ControlPlane
from secretferry.devserver.testing import DevServer, run_dev_server


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


@pytest.fixture(scope="module")
def service(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """The dev server; its Kubernetes auth checks login JWTs with a real TokenReview."""
    reviewer = control_plane.reviewer_token(expiration_seconds=3600)
    with run_dev_server(
        seed=operator_harness().seed(control_plane, reviewer_token=reviewer),
        data_dir=tmp_path_factory.mktemp("devserver"),
        # Every MachineIdentity of these tests logs in as the one identity the harness seeds, so two
        # releases' identities share one stream cap (5 per project and identity at the service):
        # a namespace handed from A to B opened B's stream before A's closed, got 429 and waited out
        # the refusal retry (the two-release test failed so, now and then). Real installations have
        # one service identity per MachineIdentity; the cap itself is tested in the operator suite.
        extra_args=["--heartbeat-seconds", "1", "--recheck-seconds", "2", "--stream-cap", "20"],
    ) as server:
        operator_harness().record_values(server)
        yield server


@pytest.fixture
def install(control_plane: ControlPlane, helm: Helm) -> Iterator[Callable[..., Installed]]:
    installed: list[Installed] = []

    def run(release_ns: str, *set_values: str) -> Installed:
        name = f"sf-{uuid.uuid4().hex[:8]}"
        # The session's control plane is shared: the CRDs may exist already (other tests, other
        # releases), so adopt them and win field-manager conflicts, as test_chart.py does.
        args = ["install", name, str(CHART), "--namespace", release_ns]
        args += ["--kubeconfig", str(control_plane.kubeconfig)]
        args += ["--take-ownership", "--force-conflicts", "--wait=hookOnly", "--timeout=2m"]
        for s in set_values:
            args += ["--set", s]
        helm(*args)
        full = f"{name}-secretferry"
        release = Installed(name, release_ns, full, _deployment_env(control_plane, release_ns, full))
        installed.append(release)
        crds = ("secretsyncs", "machineidentities", "clustermachineidentities")
        control_plane.kubectl(
            "wait", "--for=condition=Established", "--timeout=30s", *[f"crd/{c}.secretferry.io" for c in crds]
        )
        return release

    yield run
    for release in installed:
        args = ["uninstall", release.release, "--namespace", release.namespace]
        helm(*args, "--kubeconfig", str(control_plane.kubeconfig), check=False)


def _deployment_env(cp: ControlPlane, namespace: str, name: str) -> dict[str, str]:
    deployment = json.loads(cp.kubectl("get", "deployment", name, "-n", namespace, "-o", "json"))
    env: dict[str, str] = {}
    for var in deployment["spec"]["template"]["spec"]["containers"][0]["env"]:
        if "valueFrom" not in var:
            env[var["name"]] = var.get("value", "")  # the apiserver drops empty values
        elif var["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name":
            env[var["name"]] = "local-operator"  # the pod's name; there is no pod here (tests set it)
        else:
            assert var["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace", var
            env[var["name"]] = namespace
    return env

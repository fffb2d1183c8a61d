"""Shared fixtures: one real control plane per test session, a fresh namespace per test.

Under ``CI=true`` a control plane that cannot start fails the run loudly; locally it fails too —
skipping would hide exactly the integration coverage this project is built on.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from secretferry.devcluster import cluster


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ControlPlane]:
    try:
        cp = cluster.start(tmp_path_factory.mktemp("control-plane"))
    except Exception as exc:
        pytest.fail(
            f"the local control plane could not start (CI={os.environ.get('CI')}): {exc}", pytrace=False
        )
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def namespace(control_plane: cluster.ControlPlane) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    control_plane.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)

"""Helpers shared by the node tests."""

from __future__ import annotations

import contextlib
import importlib
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_pod import OperatorPod
from secretferry.devserver.testing import DevServer

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


@contextlib.contextmanager
def installed_operator(
    cp: ControlPlane,
    service: DevServer,
    *,
    workdir: Path,
    release: str = "secretferry",
    namespace: str = "secretferry-system",
    uninstall_if: Callable[[OperatorPod], bool] = lambda pod: True,
) -> Iterator[OperatorPod]:
    """The chart installed with the operator image (``FAST_ENV``), talking to ``service``;
    uninstalled afterwards when ``uninstall_if(pod)`` (a test that uninstalls it itself says so)."""
    pod = OperatorPod(
        cp,
        workdir=workdir,
        default_host_api=service.base_url,
        release=release,
        namespace=namespace,
        values={"extraEnv": FAST_ENV},
    )
    pod.install()
    try:
        yield pod
    finally:
        if uninstall_if(pod):
            pod.uninstall()


@contextlib.contextmanager
def synced_namespace(
    cp: ControlPlane,
    service: DevServer,
    *,
    prefix: str,
    path: str,
    values: Mapping[str, str],
    sync: str,
    refresh: str = "3h",
) -> Iterator[str]:
    """A new namespace ``<prefix>-<random>`` with a Kubernetes-auth identity and SecretSync ``sync``
    of ``path`` (set to ``values`` first), once it is Synced; deleted afterwards, without waiting.

    ``refresh``: 3h by default, far beyond any test, so only the event stream explains a change."""
    harness = operator_harness()
    namespace = f"{prefix}-{uuid.uuid4().hex[:8]}"
    cp.kubectl("create", "namespace", namespace)
    for key, value in values.items():
        service.set_secret(harness.PROJECT_ID, "dev", path, key, value)
    harness.kubernetes_identity(cp, namespace)
    harness.secret_sync(cp, namespace, sync, sources=[harness.source(path)], refreshInterval=refresh)
    harness.wait_reason(cp, namespace, sync, "Synced", timeout=90)
    try:
        yield namespace
    finally:
        cp.kubectl("delete", "namespace", namespace, "--wait=false", check=False)

"""A tenant cannot relabel their way into (or out of) an operator's namespace selection.

The attack: an operator (or one of two releases) serves only namespaces labelled
``secretferry.test/release=<x>`` (SECRETFERRY_WATCH_NAMESPACE_SELECTOR). A tenant whose namespace
is not selected — or is selected by the release with the narrower settings — labels it to be
served by the other. Namespace labels are the cluster admin's: a namespace user, even one bound
to the built-in ``admin`` role in their namespace, has no right to patch the Namespace object.
Replayed with the tenant harness; the operator then serves exactly what the admin labelled.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import harness
import pytest
import tenant
from harness import PROJECT_ID, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

LABEL = "secretferry.test/release"
SELECTED = f"selected-{uuid.uuid4().hex[:8]}"  # unique per run: no other test's namespace matches
SETTLE_SECONDS = 4.0  # longer than a served namespace takes to sync here (about a second)


@pytest.fixture(scope="module")
def selecting_operator(
    control_plane: ControlPlane, crds: None, service: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    op = harness.start_operator(
        control_plane,
        service,
        tmp_path_factory.mktemp("operator-selector") / "operator.log",
        SECRETFERRY_WATCH_NAMESPACE_SELECTOR=f"{LABEL}={SELECTED}",
    )
    try:
        yield op
    finally:
        op.stop()
    harness.assert_no_values_leaked(control_plane, op)


def _admin_in_namespace(cp: ControlPlane, namespace: str) -> None:
    """The most a namespace owner is usually given: the built-in ``admin`` role, in their namespace."""
    cp.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "tenant-admin", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "ServiceAccount", "name": tenant.TENANT_SA, "namespace": namespace}],
        }
    )


def test_a_tenant_cannot_label_their_namespace_into_the_selection(
    control_plane: ControlPlane,
    service: DevServer,
    selecting_operator: OperatorProcess,
    hostile: tenant.Tenant,
    tmp_path: Path,
) -> None:
    cp, ns = control_plane, hostile.namespace
    path = f"/{ns}"
    service.set_secret(PROJECT_ID, "dev", path, "DB_PASS", "selector-tenant-value-1")
    # The credentials are the admin's to give (a tenant cannot annotate a ServiceAccount).
    harness.kubernetes_identity(cp, ns)
    hostile.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "SecretSync",
            "metadata": {"name": "app", "namespace": ns},
            "spec": {"identityRef": {"kind": "MachineIdentity", "name": "ferry"}, "sources": [source(path)]},
        }
    )
    _admin_in_namespace(cp, ns)
    for attempt in (
        ("label", "namespace", ns, f"{LABEL}={SELECTED}"),
        (
            "patch",
            "namespace",
            ns,
            "--type=merge",
            "-p",
            f'{{"metadata":{{"labels":{{"{LABEL}":"{SELECTED}"}}}}}}',
        ),
        ("annotate", "namespace", ns, "x=y"),
    ):
        with pytest.raises(RuntimeError, match=r"(?i)forbidden"):
            hostile.kubectl(*attempt)
    assert not hostile.can("patch", f"namespaces/{ns}")
    assert not hostile.can("update", f"namespaces/{ns}")
    labels = json.loads(cp.kubectl("get", "namespace", ns, "-o", "json"))["metadata"].get("labels") or {}
    assert LABEL not in labels

    # Not selected: nothing happens to the tenant's objects at all.
    time.sleep(SETTLE_SECONDS)
    assert harness.get(cp, "secret", "app", ns) is None
    # Only the CRD's default status: no operator wrote any (README, "GitOps").
    assert (harness.get(cp, "secretsync", "app", ns) or {}).get("status") == {"observedGeneration": 0}
    assert (harness.get(cp, "machineidentity", "ferry", ns) or {}).get("status") == {"observedGeneration": 0}

    # The admin labels it: served within seconds.
    cp.kubectl("label", "namespace", ns, f"{LABEL}={SELECTED}")
    harness.eventually(
        lambda: harness.secret_data(cp, ns, "app") == {"DB_PASS": "selector-tenant-value-1"},
        what="the namespace the admin selected to be served",
        timeout=15,
    )
    # ... and the tenant cannot take it out again (which would freeze their Secret's updates).
    with pytest.raises(RuntimeError, match=r"(?i)forbidden"):
        hostile.kubectl("label", "namespace", ns, f"{LABEL}-")

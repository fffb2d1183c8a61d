"""``kubectl secretferry status --cluster|-A`` and ``why clustersecretsync/NAME`` against the real
control plane, the operator and the dev server: a ClusterSecretSync over three namespaces, one in
step, one where a foreign Secret of the target's name is in the way (TargetConflict), one its
identity does not admit (IdentityNotAllowed). The plugin must show the counts, both failing
namespaces with their reasons, the identity and the Event; a namespace user is told the
cluster-scoped reads are forbidden. No value may be printed.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import harness
import pytest
from cluster_helpers import CSS, cluster_identity, counts, delete_namespaces, labelled_namespace, manifest
from harness import PROJECT_ID, eventually, secret_data
from test_operator_kubectl_plugin import no_values, plugin

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration
LABEL = "css-plugin-test"


def test_status_and_why_of_a_cluster_secret_sync(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str, tmp_path: Path
) -> None:
    cp = control_plane
    tag = uuid.uuid4().hex[:8]
    path = f"/css-plugin-{tag}"
    service.set_secret(PROJECT_ID, "dev", path, "TOKEN", f"css-plugin-value-{tag}")
    good, taken, refused = (labelled_namespace(cp, {LABEL: tag}) for _ in range(3))
    name, identity = f"css-{tag}", f"cid-{tag}"
    try:
        harness.VALUES.add(f"foreign-{tag}")
        cp.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "shared", "namespace": taken},
                "stringData": {"mine": f"foreign-{tag}"},
            }
        )
        cluster_identity(cp, identity, sa_namespace=namespace, allowed={"names": [good, taken]})
        cp.apply(manifest(name, identity=identity, path=path, selector={"matchLabels": {LABEL: tag}}))
        eventually(lambda: secret_data(cp, good, "shared") is not None, what="good synced")
        eventually(lambda: counts(cp, name) == (3, 1, 2), what="status counts 3/1/2")

        alone = plugin(cp, cp.kubeconfig, "status", "--cluster")
        assert alone.returncode == 0, alone.stderr
        header, *rows = (line.split() for line in alone.stdout.splitlines())
        assert header == [
            "CLUSTERSECRETSYNC",
            "READY",
            "REASON",
            "NAMESPACES",
            "FAILED",
            "IDENTITY",
            "TARGET",
        ]
        assert [
            name,
            "False",
            "NamespacesFailed",
            "1/3",
            "2",
            f"ClusterMachineIdentity/{identity}",
            "Secret/shared",
        ] in rows

        # -A: the SecretSyncs of every namespace, then a blank line and the ClusterSecretSyncs.
        harness.kubernetes_identity(cp, namespace)
        harness.secret_sync(cp, namespace, "plain", sources=[harness.source(path)], target={"name": "plain"})
        everything = plugin(cp, cp.kubeconfig, "status", "-A")
        assert everything.returncode == 0, everything.stderr
        syncs, clusters = everything.stdout.split("\n\nCLUSTERSECRETSYNC")
        assert syncs.startswith("NAMESPACE ") and f"\n{namespace}   plain " in syncs
        assert f"\n{name} " in clusters

        why = eventually(
            lambda: (
                (p := plugin(cp, cp.kubeconfig, "why", f"clustersecretsync/{name}"))
                and "NamespacesFailed" in p.stdout.split("\nEvents", 1)[-1]
                and p
            ),
            what="why shows the NamespacesFailed Event",
        )
        assert why.returncode == 0, why.stderr
        lines = why.stdout.splitlines()
        assert lines[0] == f"ClusterSecretSync {name}"
        assert any(line.startswith("  Ready:        False  reason NamespacesFailed") for line in lines)
        assert "  Namespaces:   3 selected, 1 ready, 2 failing" in lines
        assert f"  Selection:    selector {LABEL}={tag}" in lines
        assert "Failing namespaces (2)" in lines
        failing = {line.split()[0]: line.split()[1] for line in lines if line.startswith(("  css-",))}
        assert failing == {taken: "TargetConflict", refused: "IdentityNotAllowed"}
        assert f"Identity ClusterMachineIdentity/{identity}" in lines
        assert any("reason LoggedIn" in line for line in lines)
        event = [
            line.split() for line in why.stdout.split("\nEvents", 1)[1].splitlines() if "Warning" in line
        ]
        assert event and event[-1][1:3] == ["Warning", "NamespacesFailed"]

        spelled = plugin(cp, cp.kubeconfig, "why", "--cluster", name)
        ageless = re.compile(r"\b\d+[smhd]\b")  # "since 3s ago", LAST SEEN: a second may pass between
        assert spelled.returncode == 0
        assert ageless.sub("N", spelled.stdout) == ageless.sub("N", why.stdout)
        missing = plugin(cp, cp.kubeconfig, "why", "cssync/nope")
        assert (missing.returncode, missing.stderr) == (
            1,
            "kubectl-secretferry: cannot get ClusterSecretSync nope: not found\n",
        )

        # A namespace user may not read cluster-scoped objects: said so, no traceback.
        cp.kubectl("create", "serviceaccount", "viewer", "-n", namespace)
        viewer = cp.token_kubeconfig(
            cp.token_for(namespace, "viewer"), tmp_path / "viewer", namespace=namespace
        )
        denied = plugin(cp, viewer, "status", "--cluster")
        assert (denied.returncode, denied.stderr) == (
            1,
            "kubectl-secretferry: cannot list ClusterSecretSyncs: forbidden (your RBAC does not allow it)\n",
        )
        denied_why = plugin(cp, viewer, "why", f"clustersecretsync/{name}")
        assert denied_why.returncode == 1 and "cannot get ClusterSecretSync" in denied_why.stderr
        no_values(
            alone.stdout, everything.stdout, why.stdout, spelled.stdout, denied.stderr, denied_why.stderr
        )
    finally:
        cp.kubectl("delete", CSS, name, check=False)
        cp.kubectl("delete", "clustermachineidentity", identity, check=False)
        delete_namespaces(cp, good, taken, refused)

"""A tenant cannot make the operator write a mark another controller trusts (issue 20, item 1).

The headline attack, replayed with a real Helm: the admin installs a release; the tenant, who may
only create SecretSyncs, asks for a Secret labelled as revision 2 of it (Helm's Secret driver
finds its records by the labels ``owner=helm,name=<release>``), or a ConfigMap named as Helm's
ConfigMap driver names its records (``helm rollback`` reads them by name). Had either been
written, the admin's next ``helm upgrade``/``rollback`` would act on the tenant's manifest (a
cluster-admin binding, here). Two layers refuse it: the CRD's CEL rules at admission, and the
operator's own check, which must hold alone (a SecretSync created before those rules existed; the
admin's ``SECRETFERRY_FORBIDDEN_TARGET_KEYS``): ``crd_without_mark_rules`` takes the CEL rules
away to show it.
"""

from __future__ import annotations

import base64
import copy
import gzip
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import harness
import pytest
import tenant
import yaml
from harness import PROJECT_ID, eventually, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
SECRETSYNC_CRD = REPO / "crds" / "secretsyncs.secretferry.io.yaml"
# The admin's additions for this module's operator (SECRETFERRY_FORBIDDEN_TARGET_KEYS).
ADMIN_KEYS = "example.com/,team-controller"
# The test operator retries after at most 3 s (SECRETFERRY_BACKOFF_MAX_SECONDS): a little longer
# lets a retry pass before "nothing written" is judged.
SETTLE_SECONDS = 4.0
MARKS = "TargetMetadataForbidden"


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane, crds: None, service: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """This module's operator: the shared one plus the admin's forbidden keys."""
    op = harness.start_operator(
        control_plane,
        service,
        tmp_path_factory.mktemp("operator-marks") / "operator.log",
        SECRETFERRY_FORBIDDEN_TARGET_KEYS=ADMIN_KEYS,
    )
    try:
        yield op
    finally:
        op.stop()
    harness.assert_no_values_leaked(control_plane, op)


@pytest.fixture
def crd_without_mark_rules(control_plane: ControlPlane, crds: None) -> Iterator[None]:
    """The SecretSync CRD without its CEL rules on target marks (as an install from before them),
    so that only the operator's check stands between the tenant and the target."""
    crd = yaml.safe_load(SECRETSYNC_CRD.read_text())
    stripped = copy.deepcopy(crd)
    for version in stripped["spec"]["versions"]:
        target = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["target"]
        target["x-kubernetes-validations"] = [
            rule
            for rule in target["x-kubernetes-validations"]
            if "matches(" not in rule["rule"] and "'owner'" not in rule["rule"]
        ]
    control_plane.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump(stripped)
    )
    try:
        yield
    finally:
        control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(SECRETSYNC_CRD))


def sync_manifest(namespace: str, name: str, *, path: str, target: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"identityRef": {"name": "ferry"}, "sources": [source(path)], "target": target},
    }


def apply_when_admitted(hostile: tenant.Tenant, manifest: dict[str, Any]) -> None:
    """The tenant's apply, retried while the apiserver still holds the CRD's previous rules."""

    def attempt() -> bool:
        try:
            hostile.apply(manifest)
        except RuntimeError:
            return False
        return True

    eventually(attempt, timeout=20.0, what="the SecretSync to be admitted")


# --- Helm ---------------------------------------------------------------------------------------


class Helm:
    """The control plane's helm binary, against its cluster, with its own home and a driver."""

    def __init__(self, cp: ControlPlane, home: Path, *, driver: str) -> None:
        self.cp, self.home, self.driver = cp, home, driver

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["HELM_DRIVER"] = self.driver
        for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
            env[var] = str(self.home / var.lower())
        proc = subprocess.run(
            [str(self.cp.bin_dir / "helm"), *args, "--kubeconfig", str(self.cp.kubeconfig)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed: {proc.stderr}")
        return proc

    def revisions(self, release: str, namespace: str) -> list[int]:
        out = self("history", release, "-n", namespace, "-o", "json").stdout
        return sorted(int(entry["revision"]) for entry in json.loads(out))


@pytest.fixture
def chart(tmp_path: Path) -> Path:
    """The smallest chart: one ConfigMap."""
    root = tmp_path / "tiny"
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: tiny\nversion: 0.1.0\n")
    (root / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cfg\ndata:\n  a: b\n"
    )
    return root


def decode_release(encoded: str) -> dict[str, Any]:
    """A Helm record's ``release`` field: base64 of gzipped JSON."""
    record: dict[str, Any] = json.loads(gzip.decompress(base64.b64decode(encoded)))
    return record


def forged_revision(record: str, *, namespace: str) -> str:
    """Revision 2 of the real release, deployed, whose manifest makes the tenant cluster-admin."""
    release = decode_release(record)
    release["version"] = 2
    release["info"]["status"] = "deployed"
    release["manifest"] = yaml.safe_dump(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"pwned-{namespace}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": tenant.TENANT_SA, "namespace": namespace}],
        }
    )
    return base64.b64encode(gzip.compress(json.dumps(release).encode())).decode()


HELM_LABELS = {"owner": "helm", "status": "deployed", "version": "2"}


def test_a_forged_helm_secret_record_is_never_written(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
    chart: Path,
    tmp_path: Path,
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "helm-forgery-value-1")
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    helm = Helm(control_plane, tmp_path / "helm", driver="secret")
    helm("install", "web", str(chart), "-n", namespace)
    assert helm.revisions("web", namespace) == [1]
    real = harness.get(control_plane, "secret", "sh.helm.release.v1.web.v1", namespace)
    assert real is not None
    forged = forged_revision(base64.b64decode(real["data"]["release"]).decode(), namespace=namespace)
    labels = {**HELM_LABELS, "name": "web"}

    # The control: this very object, written by anyone, is a revision Helm trusts.
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "forged", "namespace": namespace, "labels": labels},
            "type": "Opaque",
            "stringData": {"release": forged},
        }
    )
    assert helm.revisions("web", namespace) == [1, 2]
    control_plane.kubectl("delete", "secret", "forged", "-n", namespace)
    assert helm.revisions("web", namespace) == [1]

    target = {"name": "forged", "labels": labels, "template": {"data": {"release": forged}}}
    manifest = sync_manifest(namespace, "forged", path=path, target=target)
    # Admission refuses it outright.
    with pytest.raises(RuntimeError, match="owner=helm marks Helm's release records"):
        hostile.apply(manifest)
    assert harness.get(control_plane, "secretsync", "forged", namespace) is None
    assert harness.get(control_plane, "secret", "forged", namespace) is None
    assert helm.revisions("web", namespace) == [1]


def test_the_operator_alone_refuses_forged_helm_records(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
    chart: Path,
    tmp_path: Path,
    crd_without_mark_rules: None,
) -> None:
    """With no CEL rule in the way: the Secret forgery by labels, and the ConfigMap forgeries by
    labels and by name (Helm's ConfigMap driver)."""
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "helm-forgery-value-2")
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    secrets = Helm(control_plane, tmp_path / "helm", driver="secret")
    configmaps = Helm(control_plane, tmp_path / "helm", driver="configmap")
    secrets("install", "web", str(chart), "-n", namespace)
    configmaps("install", "cmweb", str(chart), "-n", namespace)
    real = harness.get(control_plane, "configmap", "sh.helm.release.v1.cmweb.v1", namespace)
    assert real is not None and real["metadata"]["labels"]["owner"] == "helm"
    forged = forged_revision(real["data"]["release"], namespace=namespace)
    record = "sh.helm.release.v1.cmweb.v2"

    # The control for the name: an object so named is what `helm rollback cmweb 2` would apply.
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": record, "namespace": namespace},
            "data": {"release": forged},
        }
    )
    shown = configmaps("get", "manifest", "cmweb", "--revision", "2", "-n", namespace).stdout
    assert f"pwned-{namespace}" in shown
    control_plane.kubectl("delete", "configmap", record, "-n", namespace)

    attempts = {
        # Secret driver, by labels.
        "forge-secret": ("Secret", "forged", {**HELM_LABELS, "name": "web"}, MARKS),
        # ConfigMap driver, by labels (what `helm history` lists) ...
        "forge-cm-labels": ("ConfigMap", "forged-cm", {**HELM_LABELS, "name": "cmweb"}, MARKS),
        # ... and by name (what `helm rollback cmweb 2` reads), with no label at all.
        "forge-cm-name": ("ConfigMap", record, {}, "TargetProtected"),
    }
    for name, (kind, target_name, labels, _) in attempts.items():
        target = {
            "kind": kind,
            "name": target_name,
            "labels": labels,
            "template": {"data": {"release": forged}},
        }
        apply_when_admitted(hostile, sync_manifest(namespace, name, path=path, target=target))
    for name, (_, _, _, reason) in attempts.items():
        cond = harness.wait_reason(control_plane, namespace, name, reason)
        assert cond["status"] == "False"
        if reason == MARKS:
            assert "label owner=helm (Helm's release records)" in cond["message"]
            assert "nothing was written" in cond["message"]
        else:
            assert "named like a Helm release record" in cond["message"]
    time.sleep(SETTLE_SECONDS)
    for _, (kind, target_name, _, _) in attempts.items():
        assert harness.get(control_plane, kind.lower(), target_name, namespace) is None, target_name
    assert secrets.revisions("web", namespace) == [1]
    assert configmaps.revisions("cmweb", namespace) == [1]
    refused = configmaps("rollback", "cmweb", "2", "-n", namespace, check=False)
    assert refused.returncode != 0  # there is no revision 2 to roll back to
    binding = control_plane.kubectl_run("get", "clusterrolebinding", f"pwned-{namespace}")
    assert binding.returncode != 0 and "NotFound" in binding.stderr


# --- every other mark -----------------------------------------------------------------------------

BUILT_IN = [
    ("labels", "app.kubernetes.io/instance"),  # Argo CD's default tracking label
    ("annotations", "argocd.argoproj.io/tracking-id"),
    ("annotations", "argocd.argoproj.io/sync-options"),
    ("annotations", "argocd.argoproj.io/compare-options"),
    ("annotations", "argocd.argoproj.io/hook"),
    ("labels", "argocd.argoproj.io/secret-type"),  # Argo CD's cluster/repository credentials
    ("labels", "kustomize.toolkit.fluxcd.io/name"),
    ("labels", "helm.toolkit.fluxcd.io/name"),
    ("annotations", "fluxcd.io/ignore"),
    ("annotations", "meta.helm.sh/release-name"),
    ("annotations", "helm.sh/resource-policy"),
    ("annotations", "kubectl.kubernetes.io/last-applied-configuration"),
    ("labels", "node.kubernetes.io/exclude-from-external-load-balancers"),
    ("labels", "app.kubernetes.io/managed-by"),
    ("labels", "secretferry.io/sync"),
    ("annotations", "storage.k8s.io/x"),
]


@pytest.mark.parametrize(("field", "key"), BUILT_IN)
def test_admission_refuses_built_in_marks(
    namespace: str, hostile: tenant.Tenant, field: str, key: str
) -> None:
    manifest = sync_manifest(namespace, "mark", path="/", target={field: {key: "x"}})
    with pytest.raises(RuntimeError, match="are read by other controllers"):
        hostile.apply(manifest)


def _refused_marks(control_plane: ControlPlane, namespace: str, cases: dict[str, tuple[str, str]]) -> None:
    for name, (_, key) in cases.items():
        cond = harness.wait_reason(control_plane, namespace, name, MARKS)
        assert key in cond["message"], (key, cond["message"])
    time.sleep(SETTLE_SECONDS)
    for name in cases:
        assert harness.get(control_plane, "secret", name, namespace) is None, name


def test_the_operator_alone_refuses_every_built_in_mark(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
    crd_without_mark_rules: None,
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "mark-guard-value-1")
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    cases = {f"mark-{i}": case for i, case in enumerate(BUILT_IN)}
    for name, (field, key) in cases.items():
        apply_when_admitted(hostile, sync_manifest(namespace, name, path=path, target={field: {key: "x"}}))
    _refused_marks(control_plane, namespace, cases)


def test_the_admins_keys_are_refused_and_plain_labels_still_work(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    """SECRETFERRY_FORBIDDEN_TARGET_KEYS, through the real CRD (admission knows nothing of it);
    and the labels nobody acts on, beside the operator's own, are written as before."""
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "mark-guard-value-2")
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    cases = {
        "admin-domain": ("labels", "ci.example.com/owner"),
        "admin-key": ("annotations", "team-controller"),
    }
    for name, (field, key) in cases.items():
        hostile.apply(sync_manifest(namespace, name, path=path, target={field: {key: "x"}}))
    plain = {
        "app": "web",
        "owner": "team-a",
        "app.kubernetes.io/name": "web",
        "app.kubernetes.io/part-of": "shop",
    }
    hostile.apply(sync_manifest(namespace, "plain", path=path, target={"labels": plain}))
    _refused_marks(control_plane, namespace, cases)
    for name in cases:
        assert (
            "this cluster's forbidden target keys"
            in (harness.ready(control_plane, namespace, name) or {})["message"]
        )
    assert harness.wait_reason(control_plane, namespace, "plain", "Synced")["status"] == "True"
    written = harness.get(control_plane, "secret", "plain", namespace)
    assert written is not None
    assert written["metadata"]["labels"] == {
        **plain,
        "app.kubernetes.io/managed-by": "secretferry",
        "secretferry.io/sync": "plain",
    }

"""The chart against the real local control plane: lint, server-side dry-run of every CI values
file, a real `helm install`, and the RBAC it grants (``kubectl auth can-i`` as its ServiceAccount).

No kubelet runs, so pods never start; everything here is about what the apiserver accepts and
what the ServiceAccount may do. (The end-to-end sync under the chart's token lives elsewhere.)
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from chart_helpers import CHART, CI_VALUES, Helm, Manifest, Render, by_kind

from secretferry.devcluster.cluster import ControlPlane

pytestmark = pytest.mark.integration

# Kinds whose CRDs come from other projects; the server dry-run skips them only when the cluster
# does not serve their API (prometheus-operator is not part of the local control plane).
EXTERNAL_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
_ESTABLISHED_TIMEOUT_SECONDS = 30.0  # a CRD is usually Established within a second


def _helm_kube(cp: ControlPlane, helm: Helm, *args: str, check: bool = True) -> str:
    return helm(*args, "--kubeconfig", str(cp.kubeconfig), check=check)


def _exists(cp: ControlPlane, *args: str) -> bool:
    return bool(cp.kubectl("get", *args, "--ignore-not-found", "-o", "name").strip())


def _ensure_namespace(cp: ControlPlane, name: str) -> None:
    cp.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def _served(cp: ControlPlane, api_version: str) -> bool:
    return api_version in cp.kubectl("api-versions").split()


def _wait_established(cp: ControlPlane, names: list[str]) -> None:
    if names:
        cp.kubectl(
            "wait",
            "--for=condition=Established",
            f"--timeout={_ESTABLISHED_TIMEOUT_SECONDS:.0f}s",
            *[f"crd/{n}" for n in names],
        )


def _to_stream(docs: list[Manifest]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


def test_helm_lint(helm: Helm) -> None:
    helm("lint", "--strict", str(CHART))
    for values in CI_VALUES:
        helm("lint", "--strict", str(CHART), "--values", str(values))


@pytest.mark.parametrize("values", CI_VALUES, ids=lambda p: p.name.removesuffix("-values.yaml"))
def test_rendered_manifests_pass_server_dry_run(
    control_plane: ControlPlane, render: Render, namespace: str, values: Path
) -> None:
    docs = render(values, namespace=namespace)
    # Namespaces the chart writes into besides the release's (scope.namespaces) must exist.
    extra = {d["metadata"].get("namespace") for d in docs} - {None, namespace}
    created = [ns for ns in sorted(extra) if not _exists(control_plane, "namespace", ns)]
    for ns in created:
        _ensure_namespace(control_plane, ns)
    try:
        _dry_run(control_plane, docs)
    finally:
        for ns in created:
            control_plane.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def _dry_run(control_plane: ControlPlane, docs: list[Manifest]) -> None:
    # CRDs first, for real, so that objects of those kinds (if a values file renders any) can be
    # dry-run too.
    crds = by_kind(docs, "CustomResourceDefinition")
    missing = [c for c in crds if not _exists(control_plane, "crd", c["metadata"]["name"])]
    if missing:
        control_plane.kubectl("create", "-f", "-", input=_to_stream(missing))
        _wait_established(control_plane, [c["metadata"]["name"] for c in missing])
    skipped = [
        d
        for d in docs
        if (d["apiVersion"], d["kind"]) in EXTERNAL_KINDS and not _served(control_plane, d["apiVersion"])
    ]
    checked = [d for d in docs if d not in skipped]
    out = control_plane.kubectl("apply", "--dry-run=server", "-f", "-", input=_to_stream(checked))
    assert out.count("(server dry run)") == len(checked), out
    assert {d["kind"] for d in skipped} <= {kind for _, kind in EXTERNAL_KINDS}


@dataclass
class Release:
    name: str
    namespace: str
    service_account: str

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"


@pytest.fixture
def install(control_plane: ControlPlane, helm: Helm, namespace: str) -> Iterator[Callable[..., Release]]:
    installed: list[Release] = []

    def run(*set_values: str) -> Release:
        release = Release(f"sf-{uuid.uuid4().hex[:8]}", namespace, "")
        release.service_account = f"{release.name}-secretferry"
        # The session's control plane is shared: CRDs may already exist (created by the dry-run
        # test or other tests), so adopt them and win field-manager conflicts on their labels.
        args = ["install", release.name, str(CHART), "--namespace", namespace]
        args += ["--take-ownership", "--force-conflicts"]
        args += ["--wait=hookOnly", "--timeout=2m"]
        for s in set_values:
            args += ["--set", s]
        _helm_kube(control_plane, helm, *args)
        installed.append(release)
        return release

    yield run
    for release in installed:
        _helm_kube(
            control_plane, helm, "uninstall", release.name, "--namespace", release.namespace, check=False
        )


def can_i(cp: ControlPlane, release: Release, verb: str, resource: str, *where: str) -> bool:
    """``kubectl auth can-i --as=system:serviceaccount:<ns>:<sa>``.

    kubectl resolves the resource through discovery and answers "no" for a kind the cluster does
    not serve (Argo Rollouts is not installed here); those go to a SubjectAccessReview directly.
    """
    argv = ["auth", "can-i", verb, resource, f"--as={release.user}", *where]
    proc = cp.kubectl_run(*argv)
    if "doesn't have a resource type" in proc.stderr:
        return _review(cp, release, verb, resource, *where)
    assert proc.stdout.strip() in {"yes", "no"}, proc.stderr
    return proc.stdout.strip() == "yes"


def _review(cp: ControlPlane, release: Release, verb: str, resource: str, *where: str) -> bool:
    """A SubjectAccessReview taking can-i arguments (``res.group[/name]``, ``-n``, ``--subresource=``)."""
    resource, _, name = resource.partition("/")
    plural, _, group = resource.partition(".")
    attributes: dict[str, str] = {"verb": verb, "resource": plural, "group": group}
    if name:
        attributes["name"] = name
    args = list(where)
    while args:
        arg = args.pop(0)
        if arg == "-n":
            attributes["namespace"] = args.pop(0)
        elif arg.startswith("--subresource="):
            attributes["subresource"] = arg.split("=", 1)[1]
        elif arg != "--all-namespaces":  # no namespace attribute: every namespace
            raise ValueError(arg)
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{release.namespace}", "system:authenticated"]
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": release.user, "groups": groups, "resourceAttributes": attributes},
    }
    out = json.loads(cp.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(review)))
    return bool(out["status"].get("allowed"))


def test_helm_install_creates_the_objects(
    control_plane: ControlPlane, helm: Helm, install: Callable[..., Release]
) -> None:
    release = install()
    ns = release.namespace
    full = release.service_account
    assert _exists(control_plane, "deployment", full, "-n", ns)
    assert _exists(control_plane, "serviceaccount", full, "-n", ns)
    assert _exists(control_plane, "service", f"{full}-metrics", "-n", ns)
    assert _exists(control_plane, "clusterrole", full)
    assert _exists(control_plane, "clusterrolebinding", full)
    for crd in ("secretsyncs", "machineidentities", "clustermachineidentities", "clustersecretsyncs"):
        _wait_established(control_plane, [f"{crd}.secretferry.io"])
    deployment = json.loads(control_plane.kubectl("get", "deployment", full, "-n", ns, "-o", "json"))
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == full
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    status = json.loads(_helm_kube(control_plane, helm, "status", release.name, "-n", ns, "-o", "json"))
    assert status["info"]["status"] == "deployed"
    # A SecretSync is accepted by the served CRD (the kinds really work after install).
    control_plane.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "MachineIdentity",
            "metadata": {"name": "mid", "namespace": ns},
            "spec": {"auth": {"accessToken": {"secretRef": {"name": "tok", "key": "token"}}}},
        }
    )
    assert _exists(control_plane, "mid", "mid", "-n", ns)

    # Cluster-wide RBAC: everything it needs everywhere, nothing that escalates.
    allowed = [
        ("list", "secrets", "--all-namespaces"),
        ("delete", "secrets", "-n", "default"),
        ("watch", "secretsyncs.secretferry.io", "--all-namespaces"),
        ("patch", "secretsyncs.secretferry.io", "--subresource=status", "-n", "default"),
        ("patch", "clustermachineidentities.secretferry.io", "--subresource=status"),
        ("watch", "clustersecretsyncs.secretferry.io"),
        ("patch", "clustersecretsyncs.secretferry.io", "--subresource=status"),
        ("create", "serviceaccounts", "--subresource=token", "-n", "default"),
        ("patch", "deployments.apps", "-n", "default"),
        ("create", "events.events.k8s.io", "-n", "default"),
        ("patch", "events.events.k8s.io", "-n", "default"),
        ("list", "customresourcedefinitions.apiextensions.k8s.io"),
        ("watch", "serviceaccounts", "-n", "default"),  # the opt-in watch (metadata only)
        ("watch", "namespaces"),  # label changes take effect at once
    ]
    denied = [
        # Verbs the operator never calls (README "RBAC"): narrowed away.
        ("update", "secrets", "-n", "default"),
        ("delete", "configmaps", "-n", "default"),
        ("create", "events", "-n", "default"),  # core events: kopf's posting is off
        ("patch", "secretsyncs.secretferry.io", "-n", "default"),  # spec and metadata: never
        ("patch", "clustersecretsyncs.secretferry.io"),  # spec and metadata: never
        ("get", "deployments.apps", "-n", "default"),
        ("update", "serviceaccounts", "-n", "default"),
        ("update", "namespaces"),
        ("create", "clusterrolebindings.rbac.authorization.k8s.io"),
        ("delete", "namespaces"),
        ("create", "pods", "-n", "default"),
        ("get", "leases.coordination.k8s.io", "-n", ns),  # leader election is off by default
        ("create", "leases.coordination.k8s.io", "-n", ns),
        ("impersonate", "serviceaccounts", "-n", "default"),
    ]
    assert [a for a in allowed if not can_i(control_plane, release, *a)] == []
    assert [d for d in denied if can_i(control_plane, release, *d)] == []
    assert not _exists(control_plane, "role", f"{full}-leader-election", "-n", ns)

    _helm_kube(control_plane, helm, "uninstall", release.name, "-n", ns)
    assert not _exists(control_plane, "clusterrole", full)
    assert _exists(control_plane, "crd", "secretsyncs.secretferry.io"), "crds.keep must survive uninstall"


def test_namespaced_ha_install_rbac_and_leader_election(
    control_plane: ControlPlane, install: Callable[..., Release]
) -> None:
    served = [f"t-{uuid.uuid4().hex[:10]}" for _ in range(2)]
    outsider = f"t-{uuid.uuid4().hex[:10]}"
    for ns in [*served, outsider]:
        _ensure_namespace(control_plane, ns)
    try:
        release = install(
            f"scope.namespaces={{{','.join(served)}}}",
            "replicaCount=3",
            "leaderElection.enabled=true",
        )
        ns = release.namespace
        full = release.service_account
        lease = full  # leaderElection.leaseName defaults to the release's full name
        assert _exists(control_plane, "poddisruptionbudget", full, "-n", ns)
        for s in served:
            assert _exists(control_plane, "role", full, "-n", s)
        assert not _exists(control_plane, "role", full, "-n", outsider)
        # Leader election: a Role + RoleBinding for the Lease in the release namespace; the
        # operator creates the Lease itself, so the chart installs none.
        assert _exists(control_plane, "role", f"{full}-leader-election", "-n", ns)
        assert _exists(control_plane, "rolebinding", f"{full}-leader-election", "-n", ns)
        assert not _exists(control_plane, "lease", lease, "-n", ns)
        lease_allowed = [
            ("create", "leases.coordination.k8s.io", "-n", ns),
            ("get", f"leases.coordination.k8s.io/{lease}", "-n", ns),
            ("update", f"leases.coordination.k8s.io/{lease}", "-n", ns),
        ]
        assert [a for a in lease_allowed if not can_i(control_plane, release, *a)] == []
        lease_denied = [
            ("update", "leases.coordination.k8s.io/other", "-n", ns),
            ("get", "leases.coordination.k8s.io/other", "-n", ns),
            ("patch", f"leases.coordination.k8s.io/{lease}", "-n", ns),
            ("delete", f"leases.coordination.k8s.io/{lease}", "-n", ns),
            ("list", "leases.coordination.k8s.io", "-n", ns),
            ("watch", "leases.coordination.k8s.io", "-n", ns),
            ("create", "leases.coordination.k8s.io", "-n", served[0]),
            ("update", f"leases.coordination.k8s.io/{lease}", "-n", served[0]),
            ("create", "leases.coordination.k8s.io", "--all-namespaces"),
        ]
        assert [d for d in lease_denied if can_i(control_plane, release, *d)] == []

        allowed = [
            ("get", "secrets"),
            ("list", "secrets"),
            ("watch", "secrets"),
            ("create", "secrets"),
            ("patch", "secrets"),
            ("delete", "secrets"),
            ("patch", "configmaps"),
            ("watch", "secretsyncs.secretferry.io"),
            ("patch", "secretsyncs.secretferry.io", "--subresource=status"),
            ("patch", "machineidentities.secretferry.io", "--subresource=status"),
            ("get", "serviceaccounts"),
            ("watch", "serviceaccounts"),
            ("create", "serviceaccounts", "--subresource=token"),
            ("create", "events.events.k8s.io"),
            ("patch", "events.events.k8s.io"),
            ("list", "deployments.apps"),
            ("patch", "statefulsets.apps"),
            ("patch", "daemonsets.apps"),
            ("patch", "rollouts.argoproj.io"),
        ]
        problems = [(a, s) for s in served for a in allowed if not can_i(control_plane, release, *a, "-n", s)]
        assert problems == []
        cluster_allowed = [
            ("watch", "namespaces"),
            ("list", "clustermachineidentities.secretferry.io"),
            ("patch", "clustermachineidentities.secretferry.io", "--subresource=status"),
            ("watch", "customresourcedefinitions.apiextensions.k8s.io"),
            ("get", "secrets/secretferry-hmac-key", "-n", ns),
            ("create", "secrets", "-n", ns),
        ]
        assert [a for a in cluster_allowed if not can_i(control_plane, release, *a)] == []
        denied = [
            ("update", "secrets", "-n", served[0]),
            ("delete", "configmaps", "-n", served[0]),
            ("patch", "secretsyncs.secretferry.io", "-n", served[0]),
            ("update", "secretsyncs.secretferry.io", "--subresource=status", "-n", served[0]),
            ("create", "events", "-n", served[0]),
            ("get", "serviceaccounts", "-n", outsider),
            ("watch", "serviceaccounts", "-n", outsider),
            ("get", "secrets", "-n", outsider),
            ("list", "secrets", "-n", outsider),
            ("list", "secrets", "--all-namespaces"),
            ("get", "secrets/some-other-secret", "-n", ns),
            ("update", "secrets/secretferry-hmac-key", "-n", ns),  # immutable: read or create only
            ("list", "secrets", "-n", ns),
            ("list", "secretsyncs.secretferry.io", "-n", outsider),
            ("create", "serviceaccounts", "--subresource=token", "-n", outsider),
            ("patch", "deployments.apps", "-n", outsider),
            ("patch", "kopfpeerings.kopf.dev", "-n", served[0]),
            ("patch", "clusterkopfpeerings.kopf.dev"),
            ("delete", "namespaces"),
        ]
        assert [d for d in denied if can_i(control_plane, release, *d)] == []
    finally:
        for ns in [*served, outsider]:
            control_plane.kubectl("delete", "namespace", ns, "--wait=false", check=False)

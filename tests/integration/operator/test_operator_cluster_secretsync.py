"""ClusterSecretSync end to end on the real control plane and the dev server: selection by labels
and names, namespaces arriving, relabelled away and the object deleted (the control plane runs
kube-controller-manager's garbage collector, so collection itself is observed), a foreign Secret
never taken over, and an identity that does not admit a namespace.
"""

from __future__ import annotations

import json
import time
import uuid

import harness
import pytest
from cluster_helpers import (
    CSS,
    cluster_identity,
    counts,
    delete_namespaces,
    labelled_namespace,
    manifest,
    status,
)
from harness import PROJECT_ID, eventually, secret_data

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration
LABEL = "css-test"


def test_selection_follows_labels_names_and_the_object(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    cp = control_plane
    tag = uuid.uuid4().hex[:8]
    path = f"/css-{tag}"
    service.set_secret(PROJECT_ID, "dev", path, "TOKEN", f"css-value-{tag}")
    by_label = labelled_namespace(cp, {LABEL: tag})
    by_name = labelled_namespace(cp, {})
    outside = labelled_namespace(cp, {LABEL: "other"})
    name = f"css-{tag}"
    try:
        cluster_identity(cp, f"cid-{tag}", sa_namespace=namespace)
        cp.apply(
            manifest(
                name,
                identity=f"cid-{tag}",
                path=path,
                selector={"matchExpressions": [{"key": LABEL, "operator": "In", "values": [tag]}]},
                namespaces=[by_name],
            )
        )
        want = {"TOKEN": f"css-value-{tag}"}
        for ns in (by_label, by_name):
            eventually(lambda ns=ns: secret_data(cp, ns, "shared") == want, what=f"the Secret in {ns}")
        assert secret_data(cp, outside, "shared") is None
        eventually(lambda: counts(cp, name) == (2, 2, 0), what="status counts 2/2/0")
        ready = next(c for c in status(cp, name)["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("True", "Synced")

        # The target names the ClusterSecretSync as its (cluster-scoped) owner.
        css_uid = harness.get(cp, CSS, name, "default")["metadata"]["uid"]  # type: ignore[index]
        secret = harness.get(cp, "secret", "shared", by_label)
        assert secret is not None
        refs = secret["metadata"]["ownerReferences"]
        assert [(r["kind"], r["name"], r["uid"], r.get("controller")) for r in refs] == [
            ("ClusterSecretSync", name, css_uid, True)
        ]
        assert secret["metadata"]["labels"]["secretferry.io/cluster-sync"] == name

        # A namespace created with the label: its Secret appears.
        late = labelled_namespace(cp, {LABEL: tag})
        try:
            eventually(lambda: secret_data(cp, late, "shared") == want, what="the new namespace's Secret")
            eventually(lambda: counts(cp, name) == (3, 3, 0), what="status counts 3/3/0")
            # Relabelled away: its Secret is removed (creationPolicy Owner), the rest stay.
            cp.kubectl("label", "namespace", late, f"{LABEL}=other", "--overwrite")
            eventually(lambda: harness.get(cp, "secret", "shared", late) is None, what="the Secret removed")
            eventually(lambda: counts(cp, name) == (2, 2, 0), what="status counts back to 2/2/0")
            assert secret_data(cp, by_label, "shared") == want
        finally:
            delete_namespaces(cp, late)

        # A change at the service reaches every namespace.
        service.set_secret(PROJECT_ID, "dev", path, "TOKEN", f"css-changed-{tag}")
        changed = {"TOKEN": f"css-changed-{tag}"}
        for ns in (by_label, by_name):
            eventually(lambda ns=ns: secret_data(cp, ns, "shared") == changed, what=f"the change in {ns}")

        # The spec edited: a namespace no longer named loses its Secret, the others keep theirs.
        cp.kubectl("patch", CSS, name, "--type=merge", "-p", json.dumps({"spec": {"namespaces": []}}))
        eventually(
            lambda: harness.get(cp, "secret", "shared", by_name) is None, what="by_name's Secret removed"
        )
        eventually(lambda: counts(cp, name) == (1, 1, 0), what="status counts 1/1/0")
        assert secret_data(cp, by_label, "shared") == changed
        cp.kubectl("patch", CSS, name, "--type=merge", "-p", json.dumps({"spec": {"namespaces": [by_name]}}))
        eventually(lambda: secret_data(cp, by_name, "shared") == changed, what="by_name's Secret back")

        # The ClusterSecretSync deleted: the garbage collector removes its Secrets. Measured ~40 s
        # here (not investigated further; most likely the garbage collector, started before the
        # CRD existed, picks new resources up at its periodic discovery resync), hence 120 s.
        cp.kubectl("delete", CSS, name)
        for ns in (by_label, by_name):
            eventually(
                lambda ns=ns: harness.get(cp, "secret", "shared", ns) is None,
                timeout=120,
                what=f"the Secret in {ns} garbage collected",
            )
    finally:
        cp.kubectl("delete", CSS, name, check=False)
        cp.kubectl("delete", "clustermachineidentity", f"cid-{tag}", check=False)
        delete_namespaces(cp, by_label, by_name, outside)


def test_a_foreign_secret_and_an_unadmitted_namespace_fail_alone(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    cp = control_plane
    tag = uuid.uuid4().hex[:8]
    path = f"/css-{tag}"
    service.set_secret(PROJECT_ID, "dev", path, "TOKEN", f"css-value-{tag}")
    good, taken, refused = (labelled_namespace(cp, {LABEL: tag}) for _ in range(3))
    name = f"css-{tag}"
    try:
        # Someone else's Secret of the same name, before the ClusterSecretSync exists.
        harness.VALUES.add(f"foreign-{tag}")
        cp.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "shared", "namespace": taken},
                "stringData": {"mine": f"foreign-{tag}"},
            }
        )
        before = harness.get(cp, "secret", "shared", taken)
        assert before is not None
        cluster_identity(cp, f"cid-{tag}", sa_namespace=namespace, allowed={"names": [good, taken]})
        cp.apply(manifest(name, identity=f"cid-{tag}", path=path, selector={"matchLabels": {LABEL: tag}}))
        eventually(
            lambda: secret_data(cp, good, "shared") == {"TOKEN": f"css-value-{tag}"}, what="good synced"
        )
        eventually(lambda: counts(cp, name) == (3, 1, 2), what="status counts 3/1/2")
        st = status(cp, name)
        failures = {f["namespace"]: f["reason"] for f in st["failures"]}
        assert failures == {taken: "TargetConflict", refused: "IdentityNotAllowed"}
        assert [f["namespace"] for f in st["failures"]] == sorted(failures)
        ready = next(c for c in st["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "NamespacesFailed")
        # Nothing was written over the foreign Secret, nothing into the unadmitted namespace.
        after = harness.get(cp, "secret", "shared", taken)
        assert after is not None
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        assert secret_data(cp, refused, "shared") is None

        # A Warning Event on the ClusterSecretSync (cluster-scoped: its Events are in "default").
        def warning() -> dict[str, object] | None:
            listing = json.loads(cp.kubectl("get", "events.events.k8s.io", "-n", "default", "-o", "json"))
            return next(
                (
                    e
                    for e in listing["items"]
                    if e["regarding"].get("name") == name and e["reason"] == "NamespacesFailed"
                ),
                None,
            )

        event = eventually(warning, what="a NamespacesFailed Event")
        # Events of a cluster-scoped object are in "default": counts only, no namespace named.
        note = str(event["note"])
        assert (
            note.startswith("2 of 3 selected namespaces fail") and taken not in note and refused not in note
        )
    finally:
        cp.kubectl("delete", CSS, name, check=False)
        cp.kubectl("delete", "clustermachineidentity", f"cid-{tag}", check=False)
        delete_namespaces(cp, good, taken, refused)


def test_an_invalid_spec_is_refused_by_the_schema(control_plane: ControlPlane, crds: None) -> None:
    """A namespaced identity or creationPolicy Merge: the CRD's rules refuse it at the apiserver."""
    body = manifest("css-invalid", identity="x", path="/", namespaces=["default"])
    body["spec"]["syncTemplate"]["identityRef"]["kind"] = "MachineIdentity"
    proc = control_plane.kubectl_run("apply", "-f", "-", input=json.dumps(body))
    assert proc.returncode != 0 and "ClusterMachineIdentity" in proc.stderr
    body = manifest(
        "css-invalid", identity="x", path="/", namespaces=["default"], target={"creationPolicy": "Merge"}
    )
    proc = control_plane.kubectl_run("apply", "-f", "-", input=json.dumps(body))
    assert proc.returncode != 0 and "Merge" in proc.stderr


def test_retained_keys_survive_an_operator_restart(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    """deletionPolicy Retain (the default) after a restart: the per-namespace status was in memory
    only, the target's synced-keys annotation still tells our retained key from a stranger's."""
    cp = control_plane
    tag = uuid.uuid4().hex[:8]
    path = f"/css-{tag}"
    service.set_secret(PROJECT_ID, "dev", path, "A", f"css-a-{tag}")
    service.set_secret(PROJECT_ID, "dev", path, "B", f"css-b-{tag}")
    name = f"css-{tag}"
    try:
        cluster_identity(cp, f"cid-{tag}", sa_namespace=namespace)
        cp.apply(manifest(name, identity=f"cid-{tag}", path=path, namespaces=[namespace]))
        both = {"A": f"css-a-{tag}", "B": f"css-b-{tag}"}
        eventually(lambda: secret_data(cp, namespace, "shared") == both, what="synced")
        secret = harness.get(cp, "secret", "shared", namespace)
        assert secret is not None
        assert secret["metadata"]["annotations"]["secretferry.io/synced-keys"] == "A,B"
        service.delete_secret(PROJECT_ID, "dev", path, "B")
        time.sleep(2)  # the stream's event: B is retained, nothing to write
        assert secret_data(cp, namespace, "shared") == both
        operator.restart()
        service.set_secret(PROJECT_ID, "dev", path, "C", f"css-c-{tag}")
        want = {**both, "C": f"css-c-{tag}"}
        eventually(lambda: secret_data(cp, namespace, "shared") == want, what="C added, B kept", timeout=60)
    finally:
        cp.kubectl("delete", CSS, name, check=False)
        cp.kubectl("delete", "clustermachineidentity", f"cid-{tag}", check=False)


def _template_configmap(cp: ControlPlane, namespace: str, text: str) -> None:
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "shared-templates",
                "namespace": namespace,
                "labels": {"secretferry.io/template-source": "true"},
            },
            "data": {"url": text},
        }
    )


def test_template_from_reads_the_admins_namespace_never_a_selected_one(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    cp = control_plane
    tag = uuid.uuid4().hex[:8]
    path = f"/css-tpl-{tag}"
    service.set_secret(PROJECT_ID, "dev", path, "TOKEN", f"tpl-value-{tag}")
    platform = labelled_namespace(cp, {}, prefix="platform")
    one, two = labelled_namespace(cp, {LABEL: tag}), labelled_namespace(cp, {LABEL: tag})
    name = f"css-tpl-{tag}"
    try:
        cluster_identity(cp, f"cid-{tag}", sa_namespace=namespace, templates=True)
        _template_configmap(cp, platform, "https://api/?t={{ TOKEN }}")
        # A tenant of a selected namespace who may write ConfigMaps labels one of the same name:
        # it is never read (templatesNamespace names where the sources are).
        _template_configmap(cp, one, "stolen {{ TOKEN }}")
        target = {
            "name": "rendered",
            "template": {"templateFrom": [{"configMap": {"name": "shared-templates"}}]},
        }
        body = manifest(
            name,
            identity=f"cid-{tag}",
            path=path,
            selector={"matchLabels": {LABEL: tag}},
            target=target,
        )
        # Without templatesNamespace the apiserver refuses it.
        refused = cp.kubectl_run("apply", "-f", "-", input=json.dumps(body))
        assert refused.returncode != 0
        assert "templateFrom in a ClusterSecretSync needs templatesNamespace" in refused.stderr
        body["spec"]["templatesNamespace"] = platform
        cp.apply(body)
        want = {"url": f"https://api/?t=tpl-value-{tag}"}
        for ns in (one, two):
            eventually(
                lambda ns=ns: secret_data(cp, ns, "rendered") == want, what=f"the rendered Secret in {ns}"
            )

        # The admin edits the shared template: every namespace re-renders (the source is watched).
        _template_configmap(cp, platform, "https://api/v2?t={{ TOKEN }}")
        edited = {"url": f"https://api/v2?t=tpl-value-{tag}"}
        for ns in (one, two):
            eventually(lambda ns=ns: secret_data(cp, ns, "rendered") == edited, what=f"the re-render in {ns}")
    finally:
        cp.kubectl("delete", CSS, name, check=False)
        cp.kubectl("delete", "clustermachineidentity", f"cid-{tag}", check=False)
        delete_namespaces(cp, platform, one, two)

"""End to end: ``spec.target.template.templateFrom`` against the real control plane and the dev
server. Two SecretSyncs share one ConfigMap of templates and an edit of it re-renders both (the
SecretSyncs poll once an hour: only the source watch can bring the change); a missing,
unlabelled, oversized or incomplete source is a named reason and the target keeps its data; a
labelled Secret works as a source.

The tenant's part (``hostile``: a namespace user's rights, no Secret read): naming a Secret that
did not consent gets the refusal, and nothing of that Secret's content reaches the target, the
status, an Event or the operator's log; naming another namespace is refused at admission; and a
labelled source still needs the identity's template opt-in.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import harness
import pytest
import tenant
from harness import PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

LABEL = "secretferry.io/template-source"
# Only edits reach a SecretSync here: no stream, and a resync an hour away.
QUIET = {"refreshInterval": "1h", "instantUpdates": False}


def template_configmap(
    cp: ControlPlane, namespace: str, name: str, data: dict[str, str], *, labelled: bool = True
) -> None:
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {LABEL: "true"} if labelled else {}},
            "data": data,
        }
    )


def template_secret(
    cp: ControlPlane, namespace: str, name: str, data: dict[str, str], *, labelled: bool = True
) -> None:
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "labels": {LABEL: "true"} if labelled else {}},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
        }
    )


def from_configmap(name: str, **ref: Any) -> dict[str, Any]:
    return {"template": {"templateFrom": [{"configMap": {"name": name, **ref}}]}}


def seed(service: DevServer, namespace: str) -> str:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "DB_USER", "user-tplfrom")
    service.set_secret(PROJECT_ID, "dev", path, "DB_PASS", "pass-tplfrom-1")
    return path


def test_two_secretsyncs_share_one_configmap_and_an_edit_re_renders_both(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = seed(service, namespace)
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    template_configmap(
        control_plane, namespace, "db-templates", {"url": "db://{{ DB_USER }}:{{ DB_PASS }}@v1"}
    )
    harness.secret_sync(
        control_plane,
        namespace,
        "one",
        sources=[source(path)],
        target=from_configmap("db-templates"),
        **QUIET,
    )
    two_target = from_configmap("db-templates")
    two_target["template"]["data"] = {"user": "{{ DB_USER }}"}  # inline data beside the shared one
    harness.secret_sync(control_plane, namespace, "two", sources=[source(path)], target=two_target, **QUIET)
    eventually(
        lambda: (
            secret_data(control_plane, namespace, "one") == {"url": "db://user-tplfrom:pass-tplfrom-1@v1"}
        ),
        what="one rendered from the ConfigMap",
    )
    eventually(
        lambda: (
            secret_data(control_plane, namespace, "two")
            == {"url": "db://user-tplfrom:pass-tplfrom-1@v1", "user": "user-tplfrom"}
        ),
        what="two rendered from the ConfigMap and its inline data",
    )
    harness.wait_reason(control_plane, namespace, "one", "Synced")

    lists = service.stats()["listSecrets"]
    started = time.monotonic()
    template_configmap(control_plane, namespace, "db-templates", {"url": "db://{{ DB_USER }}@v2"})
    eventually(
        lambda: secret_data(control_plane, namespace, "one") == {"url": "db://user-tplfrom@v2"},
        what="one re-rendered after the ConfigMap edit",
    )
    eventually(
        lambda: (secret_data(control_plane, namespace, "two") or {}).get("url") == "db://user-tplfrom@v2",
        what="two re-rendered after the ConfigMap edit",
    )
    # A figure for the report, not a threshold: kubectl's own start-up is in it.
    print(f"ConfigMap edit -> both Secrets re-rendered: {time.monotonic() - started:.2f} s")
    # The re-render reuses the scope's listing: a template change costs the service nothing.
    assert service.stats()["listSecrets"] == lists

    # Inline data overrides the source's key of the same name ("user" stays: deletionPolicy Retain).
    two_target["template"]["data"] = {"url": "inline {{ DB_USER }}"}
    harness.secret_sync(control_plane, namespace, "two", sources=[source(path)], target=two_target, **QUIET)
    eventually(
        lambda: (secret_data(control_plane, namespace, "two") or {}).get("url") == "inline user-tplfrom",
        what="inline data overriding templateFrom",
    )


def test_a_missing_source_is_named_and_the_target_keeps_its_data(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = seed(service, namespace)
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    harness.secret_sync(
        control_plane, namespace, "app", sources=[source(path)], target=from_configmap("later"), **QUIET
    )
    cond = harness.wait_reason(control_plane, namespace, "app", "TemplateSourceMissing")
    assert (
        "ConfigMap " + namespace + "/later (spec.target.template.templateFrom[0].configMap) does not exist"
        in (cond["message"])
    )
    assert harness.get(control_plane, "secret", "app", namespace) is None

    # Created (with its label): the watch brings it, and the SecretSync is rendered.
    template_configmap(control_plane, namespace, "later", {"user": "{{ DB_USER }}"})
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"user": "user-tplfrom"}, what="the sync"
    )
    harness.wait_reason(control_plane, namespace, "app", "Synced")
    before = harness.get(control_plane, "secret", "app", namespace) or {}

    # Deleted: named again, and the Secret is not touched.
    control_plane.kubectl("delete", "configmap", "later", "-n", namespace)
    harness.wait_reason(control_plane, namespace, "app", "TemplateSourceMissing")
    after = harness.get(control_plane, "secret", "app", namespace) or {}
    assert secret_data(control_plane, namespace, "app") == {"user": "user-tplfrom"}
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_an_unlabelled_source_is_refused_until_its_owner_labels_it(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = seed(service, namespace)
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    template_configmap(control_plane, namespace, "plain", {"user": "{{ DB_USER }}"}, labelled=False)
    harness.secret_sync(
        control_plane, namespace, "app", sources=[source(path)], target=from_configmap("plain"), **QUIET
    )
    cond = harness.wait_reason(control_plane, namespace, "app", "TemplateSourceNotLabelled")
    assert f"ConfigMap {namespace}/plain" in cond["message"] and f"{LABEL}=true" in cond["message"]
    assert harness.get(control_plane, "secret", "app", namespace) is None

    control_plane.kubectl("label", "configmap", "plain", f"{LABEL}=true", "-n", namespace)
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"user": "user-tplfrom"}, what="the sync"
    )


def test_an_oversized_source_and_a_missing_key_are_named(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = seed(service, namespace)
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    template_configmap(control_plane, namespace, "big", {"user": "{{ DB_USER }}" + " " * (64 * 1024)})
    harness.secret_sync(
        control_plane, namespace, "big", sources=[source(path)], target=from_configmap("big"), **QUIET
    )
    cond = harness.wait_reason(control_plane, namespace, "big", "TemplateSourceTooLarge")
    assert "a template source may hold at most 65536" in cond["message"]

    template_configmap(control_plane, namespace, "small", {"user": "{{ DB_USER }}"})
    harness.secret_sync(
        control_plane,
        namespace,
        "picky",
        sources=[source(path)],
        target=from_configmap("small", keys=["user", "password"]),
        **QUIET,
    )
    cond = harness.wait_reason(control_plane, namespace, "picky", "TemplateSourceKeyMissing")
    assert "has no key password (listed in its keys); it has user" in cond["message"]
    assert harness.get(control_plane, "secret", "big", namespace) is None
    assert harness.get(control_plane, "secret", "picky", namespace) is None


def test_a_labelled_secret_is_a_source(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = seed(service, namespace)
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    template_secret(control_plane, namespace, "secret-templates", {"dsn": "{{ DB_USER }}/{{ DB_PASS }}"})
    harness.secret_sync(
        control_plane,
        namespace,
        "app",
        sources=[source(path)],
        target={"template": {"templateFrom": [{"secret": {"name": "secret-templates"}}]}},
        **QUIET,
    )
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"dsn": "user-tplfrom/pass-tplfrom-1"},
        what="the Secret's template rendered",
    )
    template_secret(control_plane, namespace, "secret-templates", {"dsn": "{{ DB_USER }}!"})
    eventually(
        lambda: secret_data(control_plane, namespace, "app") == {"dsn": "user-tplfrom!"},
        what="re-rendered after the Secret's edit",
    )


# --- the tenant ----------------------------------------------------------------------------------------


def tenant_sync(namespace: str, name: str, path: str, template_from: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "identityRef": {"name": "ferry"},
            "sources": [source(path)],
            "target": {"template": {"templateFrom": template_from, "includeAll": True}},
            **QUIET,
        },
    }


def test_a_tenant_naming_a_secret_that_did_not_consent_learns_nothing_of_it(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    path = seed(service, namespace)
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    # The admin's Secret, unlabelled; its content must reach nothing the tenant (or a log) sees.
    admin_only = "admin-only-template-content-7f3a9c"
    harness.VALUES.add(admin_only)  # the operator fixture scans its log, Events and CRs for it
    template_secret(control_plane, namespace, "admin-creds", {"password": admin_only}, labelled=False)

    hostile.apply(tenant_sync(namespace, "steal", path, [{"secret": {"name": "admin-creds"}}]))

    cond = harness.wait_reason(control_plane, namespace, "steal", "TemplateSourceNotLabelled")
    assert "its data was not read" in cond["message"]
    seen_by_tenant = hostile.kubectl("get", "secretsync", "steal", "-n", namespace, "-o", "json")
    assert admin_only not in seen_by_tenant and "password" not in json.loads(seen_by_tenant)["status"].get(
        "syncedKeys", []
    )
    # includeAll would have written the fetched keys: nothing was written at all.
    assert harness.get(control_plane, "secret", "steal", namespace) is None
    assert admin_only not in operator.log_text()


def test_a_tenant_cannot_name_another_namespace(
    control_plane: ControlPlane, crds: None, namespace: str, hostile: tenant.Tenant
) -> None:
    manifest = tenant_sync(
        namespace, "reach", "/", [{"configMap": {"name": "x", "namespace": "kube-system"}}]
    )
    refused = _apply_error(hostile, manifest)
    # A reference has no namespace field: the apiserver's strict field validation refuses it.
    assert 'unknown field "spec.target.template.templateFrom[0].configMap.namespace"' in refused
    assert harness.get(control_plane, "secretsync", "reach", namespace) is None


def test_a_labelled_source_still_needs_the_identitys_template_opt_in(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    path = seed(service, namespace)
    harness.kubernetes_identity(control_plane, namespace, templates=False)
    template_configmap(
        control_plane, namespace, "shared", {"guess": "{{ 'Y' if DB_PASS[0] == 'p' else 'N' }}"}
    )

    hostile.apply(tenant_sync(namespace, "probe", path, [{"configMap": {"name": "shared"}}]))

    cond = harness.wait_reason(control_plane, namespace, "probe", "TemplatesNotAllowed")
    assert harness.ALLOW_TEMPLATES in cond["message"]
    assert harness.get(control_plane, "secret", "probe", namespace) is None


def _apply_error(who: tenant.Tenant, manifest: dict[str, Any]) -> str:
    try:
        who.apply(manifest)
    except RuntimeError as exc:
        return str(exc)
    raise AssertionError("the apiserver accepted a SecretSync naming another namespace")

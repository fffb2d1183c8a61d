"""secretferry.reconcile.guards: may the target be written at all? Table-driven."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from secretferry import models
from secretferry.models import labels, reserved
from secretferry.reconcile import desired, guards, problems, reasons

KEY = b"k" * 32
Fetched = desired.FetchedSource
PROTECTED = guards.Protected(namespace="secretferry-system", hmac_key_secret="secretferry-hmac-key")
SA_TOKEN = "kubernetes.io/service-account-token"
HELM = "helm.sh/release.v1"
MERGE_FROM = labels.MERGE_FROM_ANNOTATION


def sync(
    *,
    sources: list[dict[str, Any]] | None = None,
    target: dict[str, Any] | None = None,
    name: str = "app",
    namespace: str = "ns",
    **spec: Any,
) -> models.SecretSync:
    return models.SecretSync.from_body(
        {
            "metadata": {"name": name, "namespace": namespace, "uid": "uid-1"},
            "spec": {
                "identityRef": {"name": "mi"},
                "sources": sources or [{"projectId": "p", "environment": "dev", "path": "/app"}],
                "target": target or {},
                **spec,
            },
        }
    )


def want(data: dict[str, str] | None = None, **target: Any) -> desired.DesiredObject:
    namespace = target.pop("namespace", "ns")
    fetched = [Fetched(data or {"A": "1"})]
    return desired.build_desired(sync(target=target, namespace=namespace), fetched, hmac_key=KEY)


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def secret(
    *,
    type_: str = "Opaque",
    data: dict[str, str] | None = None,
    labels_: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": type_,
        "metadata": {"name": "app", "labels": labels_ or {}, "annotations": annotations or {}},
        "data": {k: b64(v) for k, v in (data if data is not None else {"theirs": "s3cr3t-value"}).items()},
    }


OURS = {labels.MANAGED_BY_LABEL: "secretferry", labels.SYNC_LABEL: "app"}


# --- sources ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("root", "path", "depth"),
    [
        ("/", "/", 0),
        ("/", "/a", 1),
        ("/app", "/app", 0),
        ("/app", "/app/a/b", 2),
        ("/app/", "/app/a", 1),
        ("/app", "/application/a", 0),  # a sibling with a common prefix is not below /app
        ("/app", "/other", 0),  # an import's folder: the depth limit does not apply
        ("/app", None, 0),  # older servers do not say where a secret lives
        ("/", "/" + "/".join(f"d{i}" for i in range(20)), 20),
    ],
)
def test_relative_depth(root: str, path: str | None, depth: int) -> None:
    assert guards.relative_depth(root, path) == depth


TWO = [
    {"projectId": "p", "environment": "dev", "path": "/a"},
    {"projectSlug": "q", "environment": "prod", "path": "/b", "recursive": True},
]
DEEP = guards.MAX_LIST_DEPTH


@pytest.mark.parametrize(
    ("sources", "fetched", "spec", "expected"),
    [
        (None, [Fetched({"A": "1"})], {}, None),
        (None, [Fetched({})], {}, reasons.SOURCE_EMPTY),  # a missing path lists like an empty one
        (None, [Fetched({})], {"allowEmpty": True}, None),
        (None, [Fetched({}, imported=[{"I": "1"}])], {}, None),  # imports count
        (None, [Fetched({}, imported=[{}])], {}, reasons.SOURCE_EMPTY),
        (TWO, [Fetched({"A": "1"}), Fetched({"B": "2"})], {}, None),
        (TWO, [Fetched({"A": "1"}), Fetched({})], {}, reasons.SOURCE_EMPTY),  # any one source
        (TWO, [Fetched({}), Fetched({"B": "2"})], {}, reasons.SOURCE_EMPTY),
        (TWO, [Fetched({"A": "1"}), Fetched({"B": "2"}, depth=DEEP - 1)], {}, None),
        (TWO, [Fetched({"A": "1"}), Fetched({"B": "2"}, depth=DEEP)], {}, reasons.SOURCE_TOO_DEEP),
        # depth is judged first, and allowEmpty does not excuse it
        (TWO, [Fetched({}), Fetched({"B": "2"}, depth=DEEP)], {}, reasons.SOURCE_TOO_DEEP),
        (TWO, [Fetched({}), Fetched({"B": "2"}, depth=DEEP)], {"allowEmpty": True}, reasons.SOURCE_TOO_DEEP),
        # not recursive: a depth (which the caller never measures then) means nothing
        (None, [Fetched({"A": "1"}, depth=DEEP)], {}, None),
        # key filters that keep nothing empty the source as surely as an empty folder
        (
            [{"projectId": "p", "environment": "dev", "includeKeys": ["DB_*"]}],
            [Fetched({"A": "1"})],
            {},
            reasons.SOURCE_EMPTY,
        ),
        (
            [{"projectId": "p", "environment": "dev", "excludeKeys": ["*"]}],
            [Fetched({"A": "1"})],
            {"allowEmpty": True},
            None,
        ),
    ],
)
def test_source_problem(
    sources: list[dict[str, Any]] | None, fetched: list[Fetched], spec: dict[str, Any], expected: str | None
) -> None:
    problem = guards.source_problem(sync(sources=sources, **spec), fetched)
    assert (problem.reason if problem else None) == expected
    if problem:
        assert "source " in problem.message and "left as it is" in problem.message


def test_source_messages_name_the_source_and_never_a_value() -> None:
    fetched = [Fetched({"A": "value-one"}), Fetched({})]
    problem = guards.source_problem(sync(sources=TWO), fetched)
    assert problem is not None
    assert "source 2 (project q environment prod path /b)" in problem.message
    assert "allowEmpty" in problem.message
    assert "value-one" not in problem.message
    filtered = guards.source_problem(
        sync(sources=[{"projectId": "p", "environment": "dev", "includeKeys": ["X*"]}]),
        [Fetched({"A": "value-one", "B": "value-two"})],
    )
    assert filtered is not None and "lists 2 secrets" in filtered.message
    assert "value-" not in filtered.message


# --- target ----------------------------------------------------------------------------------------


def _reserved(target: dict[str, Any], rules: str = "") -> problems.Problem | None:
    d = want(**target)
    return guards.reserved_marks(d, sync(target=target).spec.target, rules=reserved.parse_rules(rules))


@pytest.mark.parametrize(
    ("target", "rules", "named"),
    [
        # The Helm forgery: a Secret or ConfigMap labelled as a release's revision.
        (
            {"labels": {"owner": "helm", "name": "web", "status": "deployed", "version": "2"}},
            "",
            ["label owner=helm (Helm's release records)"],
        ),
        ({"kind": "ConfigMap", "labels": {"owner": "helm", "name": "cmweb"}}, "", ["label owner=helm"]),
        ({"creationPolicy": "Merge", "labels": {"owner": "helm"}}, "", ["label owner=helm"]),
        (
            {"annotations": {"meta.helm.sh/release-name": "web", "helm.sh/resource-policy": "keep"}},
            "",
            ["annotation helm.sh/resource-policy (Helm)", "annotation meta.helm.sh/release-name (Helm)"],
        ),
        (
            {"labels": {"app.kubernetes.io/instance": "web"}},
            "",
            ["label app.kubernetes.io/instance (Argo CD"],
        ),
        (
            {"annotations": {"argocd.argoproj.io/tracking-id": "x"}},
            "",
            ["annotation argocd.argoproj.io/tracking-id"],
        ),
        (
            {"labels": {"argocd.argoproj.io/secret-type": "cluster"}},
            "",
            ["label argocd.argoproj.io/secret-type"],
        ),
        ({"labels": {"kustomize.toolkit.fluxcd.io/name": "x"}}, "", ["(Flux)"]),
        ({"labels": {"node.kubernetes.io/x": "x"}}, "", ["(Kubernetes)"]),
        ({"labels": {"app.kubernetes.io/managed-by": "Helm"}}, "", ["label app.kubernetes.io/managed-by"]),
        ({"creationPolicy": "Merge", "labels": {labels.SYNC_LABEL: "other"}}, "", ["(secretferry)"]),
        (
            {"type": "kubernetes.io/some-future-type"},
            "",
            ["type kubernetes.io/some-future-type (Kubernetes)"],
        ),
        ({"labels": {"team": "a"}}, "team", ["label team (this cluster's forbidden target keys)"]),
        ({"annotations": {"x.example.com/y": "a"}}, "example.com/", ["annotation x.example.com/y"]),
        ({"labels": {"app.kubernetes.io/name": "web"}}, "app.kubernetes.io/name", ["app.kubernetes.io/name"]),
        # Allowed: plain keys, the descriptive recommended labels, the user Secret types.
        ({"labels": {"app": "web", "owner": "team-a", "app.kubernetes.io/name": "web"}}, "", []),
        (
            {"type": "kubernetes.io/dockerconfigjson", "template": {"data": {".dockerconfigjson": "{}"}}},
            "",
            [],
        ),
        ({"annotations": {"team": "a"}}, "example.com/", []),
    ],
)
def test_reserved_marks(target: dict[str, Any], rules: str, named: list[str]) -> None:
    problem = _reserved(target, rules)
    if not named:
        assert problem is None
        return
    assert problem is not None and problem.reason == reasons.TARGET_METADATA_FORBIDDEN
    assert not problem.retriable  # only an edit fixes it
    for text in named:
        assert text in problem.message
    assert "nothing was written" in problem.message


def test_reserved_marks_count_only_what_was_asked() -> None:
    """The operator's own labels and annotations (managed-by, sync, data-hmac) are added after."""
    d = want()
    assert labels.MANAGED_BY_LABEL in d.labels and labels.DATA_HMAC_ANNOTATION in d.annotations
    assert guards.reserved_marks(d, sync().spec.target) is None


def test_reserved_marks_ignore_the_type_of_a_merge() -> None:
    """With Merge the existing object keeps its own type: the spec's type is not written."""
    target = {"creationPolicy": "Merge", "type": "kubernetes.io/some-future-type"}
    assert _reserved(target) is None


@pytest.mark.parametrize(
    ("d", "expected"),
    [
        (want(name="secretferry-hmac-key", namespace="secretferry-system"), reasons.TARGET_PROTECTED),
        (
            want(name="secretferry-hmac-key", namespace="secretferry-system", creationPolicy="Merge"),
            reasons.TARGET_PROTECTED,
        ),
        (want(name="secretferry-hmac-key"), None),  # the same name elsewhere is an ordinary Secret
        (want(name="secretferry-hmac-key", namespace="secretferry-system", kind="ConfigMap"), None),
        (want(name="sh.helm.release.v1.web.v3"), reasons.TARGET_PROTECTED),
        (want(name="sh.helm.release.v1.web.v3", creationPolicy="Merge"), reasons.TARGET_PROTECTED),
        # Helm's ConfigMap driver names its records the same way, and rollback reads them by name.
        (want(name="sh.helm.release.v1.cmweb.v2", kind="ConfigMap"), reasons.TARGET_PROTECTED),
        (
            want(name="sh.helm.release.v1.cmweb.v2", kind="ConfigMap", creationPolicy="Merge"),
            reasons.TARGET_PROTECTED,
        ),
        (want(name="helm-values"), None),
    ],
)
def test_protected_name(d: desired.DesiredObject, expected: str | None) -> None:
    problem = guards.protected_name(d, PROTECTED)
    assert (problem.reason if problem else None) == expected
    # whatever the object looks like, the name alone refuses it
    full = guards.target_problem(
        d, secret(labels_=OURS, annotations={MERGE_FROM: "app"}), previously_synced=[], protected=PROTECTED
    )
    if expected is not None:
        assert full is not None and full.reason == expected


OWNER = want()
ORPHAN = want(creationPolicy="Orphan")
MERGE = want(creationPolicy="Merge")
MERGE_DELETE = want(creationPolicy="Merge", deletionPolicy="Delete")
CONFIGMAP_MERGE = want(creationPolicy="Merge", kind="ConfigMap")
BASIC_AUTH = want({"username": "u"}, type="kubernetes.io/basic-auth")
OPTED_IN = {MERGE_FROM: "app"}


@pytest.mark.parametrize(
    ("d", "actual", "previously", "expected"),
    [
        # nothing there: Owner/Orphan create it, Merge has nothing to write into
        (OWNER, None, [], None),
        (ORPHAN, None, [], None),
        (MERGE, None, [], reasons.TARGET_NOT_FOUND),
        # never touched, whatever the labels and annotations say
        (OWNER, secret(type_=SA_TOKEN, labels_=OURS), [], reasons.TARGET_PROTECTED),
        (OWNER, secret(type_=HELM, labels_=OURS), [], reasons.TARGET_PROTECTED),
        (ORPHAN, secret(type_=SA_TOKEN, labels_=OURS), ["theirs"], reasons.TARGET_PROTECTED),
        (MERGE, secret(type_=SA_TOKEN, annotations=OPTED_IN), [], reasons.TARGET_PROTECTED),
        (MERGE, secret(type_=HELM, annotations=OPTED_IN), [], reasons.TARGET_PROTECTED),
        (MERGE_DELETE, secret(type_=SA_TOKEN, annotations=OPTED_IN), [], reasons.TARGET_PROTECTED),
        # Merge: only into an object whose owner named this SecretSync
        (MERGE, secret(), [], reasons.TARGET_NOT_OPTED_IN),
        (MERGE, secret(annotations={MERGE_FROM: "other"}), [], reasons.TARGET_NOT_OPTED_IN),
        (MERGE, secret(annotations={MERGE_FROM: ""}), [], reasons.TARGET_NOT_OPTED_IN),
        (MERGE, secret(annotations={MERGE_FROM: "*"}), [], reasons.TARGET_NOT_OPTED_IN),  # no wildcard
        (MERGE, secret(annotations={MERGE_FROM: "app2,ap"}), [], reasons.TARGET_NOT_OPTED_IN),
        (MERGE, secret(labels_={MERGE_FROM: "app"}), [], reasons.TARGET_NOT_OPTED_IN),  # a label is not it
        (MERGE, secret(labels_=OURS), [], reasons.TARGET_NOT_OPTED_IN),  # nor our own labels
        (MERGE, secret(annotations=OPTED_IN), [], None),
        (MERGE, secret(annotations={MERGE_FROM: "other, app"}), [], None),
        (MERGE, secret(type_="kubernetes.io/basic-auth", annotations=OPTED_IN), [], None),  # type kept
        (
            CONFIGMAP_MERGE,
            {"kind": "ConfigMap", "metadata": {}, "data": {"x": "y"}},
            [],
            reasons.TARGET_NOT_OPTED_IN,
        ),
        (CONFIGMAP_MERGE, {"kind": "ConfigMap", "metadata": {"annotations": OPTED_IN}}, [], None),
        # Owner/Orphan: only objects labelled as this SecretSync's
        (OWNER, secret(), [], reasons.TARGET_CONFLICT),
        (OWNER, secret(annotations=OPTED_IN), [], reasons.TARGET_CONFLICT),  # opt-in is for Merge only
        (OWNER, secret(labels_={labels.SYNC_LABEL: "other"}), [], reasons.TARGET_CONFLICT),
        (ORPHAN, secret(), [], reasons.TARGET_CONFLICT),
        (OWNER, secret(labels_=OURS), [], None),
        # a type change (delete + create) only of a Secret holding nothing but our keys
        (OWNER, secret(type_="kubernetes.io/basic-auth", labels_=OURS), [], reasons.TARGET_CONFLICT),
        (
            OWNER,
            secret(type_="kubernetes.io/basic-auth", labels_=OURS, data={"A": "1", "x": "2"}),
            ["A"],
            reasons.TARGET_CONFLICT,
        ),
        (OWNER, secret(type_="kubernetes.io/basic-auth", labels_=OURS, data={"A": "1"}), ["A", "B"], None),
        (OWNER, secret(type_="kubernetes.io/basic-auth", labels_=OURS, data={}), [], None),
        (BASIC_AUTH, secret(labels_=OURS), [], reasons.TARGET_CONFLICT),  # Opaque → basic-auth alike
        (BASIC_AUTH, secret(type_="kubernetes.io/basic-auth", labels_=OURS), [], None),  # no change
    ],
)
def test_target_problem(
    d: desired.DesiredObject, actual: dict[str, Any] | None, previously: list[str], expected: str | None
) -> None:
    problem = guards.target_problem(d, actual, previously_synced=previously, protected=PROTECTED)
    assert (problem.reason if problem else None) == expected
    if problem:
        assert f"{d.kind} {d.name!r}" in problem.message or "Secret 'app'" in problem.message


def test_target_messages_reveal_neither_values_nor_foreign_keys() -> None:
    """The SecretSync's author may not be able to read the target: its keys stay unnamed too."""
    actual = secret(
        type_="kubernetes.io/basic-auth", labels_=OURS, data={"username": "u-1", "password": "p-1"}
    )
    for d in (OWNER, MERGE):
        problem = guards.target_problem(d, actual, previously_synced=[], protected=PROTECTED)
        assert problem is not None
        for text in ("username", "password", "u-1", "p-1", b64("p-1")):
            assert text not in problem.message
    conflict = guards.target_problem(OWNER, actual, previously_synced=[], protected=PROTECTED)
    assert conflict is not None and "holds 2 key(s)" in conflict.message
    not_opted = guards.target_problem(MERGE, actual, previously_synced=[], protected=PROTECTED)
    assert not_opted is not None and MERGE_FROM in not_opted.message and "(app)" in not_opted.message


@pytest.mark.parametrize(
    ("annotations", "name", "admitted"),
    [
        (None, "app", False),
        ({}, "app", False),
        ({MERGE_FROM: "app"}, "app", True),
        ({MERGE_FROM: " app "}, "app", True),
        ({MERGE_FROM: "a,app,b"}, "app", True),
        ({MERGE_FROM: "a, b"}, "app", False),
        ({MERGE_FROM: "ns/app"}, "app", False),  # names in the object's own namespace, nothing else
        ({MERGE_FROM: "App"}, "app", False),
        ({MERGE_FROM: ","}, "", False),  # empty entries admit nobody
    ],
)
def test_merge_admits(annotations: dict[str, str] | None, name: str, admitted: bool) -> None:
    assert guards.merge_admits(annotations, name) is admitted


def test_an_empty_source_may_be_an_unknown_environment() -> None:
    """Self-hosted 2024-10 lists an unknown environment as 200-empty, not 404 (issue 21)."""
    problem = guards.source_problem(sync(sources=TWO), [Fetched({"A": "1"}), Fetched({})])
    assert problem is not None and problem.reason == reasons.SOURCE_EMPTY
    assert "environment 'prod' does not exist" in problem.message

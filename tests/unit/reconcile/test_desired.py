"""secretferry.reconcile.desired: the desired target as a pure function, table-tested."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secretferry import models
from secretferry.models import labels
from secretferry.reconcile import desired, problems, reasons

KEY = b"k" * 32
Fetched = desired.FetchedSource


def sync(
    target: dict[str, Any] | None = None, sources: list[dict[str, Any]] | None = None, **meta: Any
) -> Any:
    return models.SecretSync.from_body(
        {
            "metadata": {"name": "app", "namespace": "team-a", "uid": "uid-1", **meta},
            "spec": {
                "identityRef": {"name": "mi"},
                "sources": sources or [{"projectId": "p", "environment": "dev"}],
                "target": target or {},
            },
        }
    )


def build(target: dict[str, Any] | None = None, *fetched: Fetched, **kw: Any) -> desired.DesiredObject:
    return desired.build_desired(sync(target, **kw), fetched or (Fetched({"A": "1"}),), hmac_key=KEY)


def test_defaults() -> None:
    d = build(None, Fetched({"B": "2", "A": "1"}))
    assert (d.kind, d.name, d.namespace, d.type) == ("Secret", "app", "team-a", "Opaque")
    assert list(d.string_data) == ["A", "B"]  # sorted
    assert d.labels == {labels.MANAGED_BY_LABEL: "secretferry", labels.SYNC_LABEL: "app"}
    assert d.annotations == {labels.DATA_HMAC_ANNOTATION: d.data_hmac}
    assert d.data_hmac == desired.data_hmac({"A": "1", "B": "2"}, desired.sync_key(KEY, sync()))
    assert d.owner == desired.OwnerReference(
        api_version="secretferry.io/v1alpha1", kind="SecretSync", name="app", uid="uid-1"
    )
    assert (d.creation_policy, d.deletion_policy) == ("Owner", "Retain")


TWO_SOURCES = [{"projectId": "p", "environment": "dev"}, {"projectSlug": "q", "environment": "dev"}]


@pytest.mark.parametrize(
    ("sources", "fetched", "expected"),
    [
        # direct overrides imported; later imports override earlier ones
        (
            None,
            [Fetched({"A": "direct"}, [{"A": "imp1", "B": "imp1", "C": "imp1"}, {"B": "imp2"}])],
            {"A": "direct", "B": "imp2", "C": "imp1"},
        ),
        # later sources override earlier ones
        (TWO_SOURCES, [Fetched({"A": "s1", "B": "s1"}), Fetched({"B": "s2"})], {"A": "s1", "B": "s2"}),
        # include globs, then exclude globs, per source (the second source is unfiltered)
        (
            [{**TWO_SOURCES[0], "includeKeys": ["DB_*", "API?"], "excludeKeys": ["*_OLD"]}, TWO_SOURCES[1]],
            [
                Fetched({"DB_USER": "u", "DB_OLD": "o", "API1": "a", "API12": "x", "X": "x"}),
                Fetched({"X": "s2"}),
            ],
            {"DB_USER": "u", "API1": "a", "X": "s2"},
        ),
        # filters apply to imported keys too; an excluded key does not hide an earlier source's key
        (
            [TWO_SOURCES[0], {**TWO_SOURCES[1], "excludeKeys": ["A"]}],
            [Fetched({"A": "s1"}), Fetched({}, [{"A": "s2", "B": "s2"}])],
            {"A": "s1", "B": "s2"},
        ),
        # globs are case-sensitive
        (
            [{**TWO_SOURCES[0], "includeKeys": ["db_*"]}],
            [Fetched({"DB_USER": "u", "db_user": "l"})],
            {"db_user": "l"},
        ),
    ],
)
def test_merge(
    sources: list[dict[str, Any]] | None, fetched: list[Fetched], expected: dict[str, str]
) -> None:
    assert build(None, *fetched, sources=sources).string_data == expected


def test_fetched_must_match_sources() -> None:
    with pytest.raises(ValueError, match="fetched 2 sources for 1"):
        build(None, Fetched({}), Fetched({}))


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ({"data": {"url": "postgres://{{ U }}:{{ P }}@db"}}, {"url": "postgres://u:p@db"}),
        ({"data": {"url": "{{ U }}"}, "includeAll": True}, {"P": "p", "U": "u", "url": "u"}),
        ({"data": {"U": "{{ U | upper }}"}, "includeAll": True}, {"P": "p", "U": "U"}),  # template wins
        ({"includeAll": True}, {"P": "p", "U": "u"}),
    ],
)
def test_template(template: dict[str, Any], expected: dict[str, str]) -> None:
    assert build({"template": template}, Fetched({"U": "u", "P": "p"})).string_data == expected


TLS = {"tls.crt": "C", "tls.key": "K"}


@pytest.mark.parametrize(
    ("secret_type", "data", "error"),
    [
        ("kubernetes.io/tls", TLS, None),
        ("kubernetes.io/tls", {"tls.crt": "C"}, "type kubernetes.io/tls needs keys: tls.key"),
        ("kubernetes.io/ssh-auth", {"ssh-privatekey": "K"}, None),
        ("kubernetes.io/ssh-auth", {"x": "K"}, "needs keys: ssh-privatekey"),
        ("kubernetes.io/basic-auth", {"password": "p"}, None),
        ("kubernetes.io/basic-auth", {"username": "u"}, None),
        ("kubernetes.io/basic-auth", {"user": "u"}, "needs one of: username, password"),
        ("kubernetes.io/dockerconfigjson", {".dockerconfigjson": '{"auths": {}}'}, None),
        ("kubernetes.io/dockerconfigjson", {".dockerconfigjson": "{not json"}, ".dockerconfigjson must hold"),
        (
            "kubernetes.io/dockerconfigjson",
            {".dockerconfigjson": "[1]"},
            ".dockerconfigjson must hold a JSON",
        ),
        ("kubernetes.io/dockerconfigjson", {}, "needs keys: .dockerconfigjson"),
        ("kubernetes.io/dockercfg", {".dockercfg": "{}"}, None),
        # What the apiserver refuses and Python would not: each lost a Secret on a type change.
        ("kubernetes.io/ssh-auth", {"ssh-privatekey": ""}, "needs a non-empty ssh-privatekey"),
        ("kubernetes.io/dockerconfigjson", {".dockerconfigjson": '{"a": NaN}'}, "no NaN or Infinity"),
        ("kubernetes.io/dockercfg", {".dockercfg": '{"a": Infinity}'}, "no NaN or Infinity"),
        ("kubernetes.io/dockercfg", {".dockercfg": '{"a": [-Infinity]}'}, "no NaN or Infinity"),
        ("kubernetes.io/dockercfg", {".dockercfg": '{"a": 1e400}'}, "float64 range"),
        ("kubernetes.io/dockercfg", {".dockercfg": '{"a": ' + "9" * 400 + "}"}, "float64 range"),
        ("kubernetes.io/dockercfg", {".dockercfg": '{"a": -1.5e308, "b": 12}'}, None),
        ("kubernetes.io/dockercfg", {".dockercfg": ""}, ".dockercfg must hold a JSON object"),
        ("kubernetes.io/dockercfg", {".dockercfg": "null"}, ".dockercfg must hold a JSON object"),
        ("kubernetes.io/dockercfg", {".dockercfg": '{"a": "x\\u0001"}'}, None),  # an escape: fine
        ("kubernetes.io/dockercfg", {".dockercfg": '{"a": "x\u0001"}'}, "must hold a JSON object"),  # raw
        ("kubernetes.io/dockercfg", {".dockercfg": '{"a": 1} x'}, "must hold a JSON object"),
        ("kubernetes.io/dockercfg", {".dockercfg": "[" * 5000 + "]" * 5000}, "must hold a JSON object"),
        ("kubernetes.io/dockerconfigjson", {".dockerconfigjson": '{"a":1}\n'}, None),
        ("kubernetes.io/tls", {"tls.crt": "", "tls.key": ""}, None),  # the apiserver checks presence only
        ("kubernetes.io/basic-auth", {"username": "", "password": ""}, None),
        ("example.com/custom", {"anything": "x"}, None),
        ("Opaque", {}, None),
    ],
)
def test_secret_type(secret_type: str, data: dict[str, str], error: str | None) -> None:
    if error is None:
        assert build({"type": secret_type}, Fetched(data)).type == secret_type
        return
    with pytest.raises(problems.Problem) as info:
        build({"type": secret_type}, Fetched(data))
    assert info.value.reason == reasons.INVALID_SECRET_TYPE
    assert error in info.value.message
    for value in data.values():
        assert len(value) < 2 or value not in info.value.message


def test_merge_policy_leaves_type_and_ownership_alone() -> None:
    d = build(
        {
            "creationPolicy": "Merge",
            "type": "kubernetes.io/tls",
            "labels": {"l": "1"},
            "annotations": {"a": "2"},
        },
        Fetched({"ONLY": "x"}),
    )
    assert d.type is None  # not checked against tls either
    assert d.owner is None
    assert d.labels == {"l": "1"}  # no managed-by / sync label: two SecretSyncs may merge into one target
    assert d.annotations == {"a": "2"}  # the HMAC annotation would flap between them
    assert d.manifest()["metadata"] == {
        "name": "app",
        "namespace": "team-a",
        "labels": {"l": "1"},
        "annotations": {"a": "2"},
    }
    assert "type" not in d.manifest()


def test_orphan_policy_has_no_owner_but_is_labelled() -> None:
    d = build({"creationPolicy": "Orphan"})
    assert d.owner is None
    assert d.labels[labels.SYNC_LABEL] == "app"


def test_user_labels_cannot_override_ours() -> None:
    d = build(
        {
            "labels": {labels.SYNC_LABEL: "other", "team": "x"},
            "annotations": {labels.DATA_HMAC_ANNOTATION: "x"},
        }
    )
    assert d.labels[labels.SYNC_LABEL] == "app"
    assert d.labels["team"] == "x"
    assert d.annotations[labels.DATA_HMAC_ANNOTATION] == d.data_hmac


def test_configmap_target() -> None:
    d = build({"kind": "ConfigMap", "name": "cfg"}, Fetched({"A": "1"}))
    assert (d.kind, d.name, d.type) == ("ConfigMap", "cfg", None)
    assert d.manifest() == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "cfg",
            "namespace": "team-a",
            "labels": d.labels,
            "annotations": d.annotations,
            "ownerReferences": [
                {
                    "apiVersion": "secretferry.io/v1alpha1",
                    "kind": "SecretSync",
                    "name": "app",
                    "uid": "uid-1",
                    "controller": True,
                }
            ],
        },
        "data": {"A": "1"},
    }


def test_secret_manifest_is_base64() -> None:
    body = build(None, Fetched({"A": "héllo"})).manifest()
    assert body["type"] == "Opaque"
    assert base64.b64decode(body["data"]["A"]).decode() == "héllo"


@pytest.mark.parametrize(
    ("target", "fetched", "message"),
    [
        (None, {"bad key": "v", "ok": "v", "é": "v"}, "starting with '..'): bad key, é;"),
        # apimachinery IsConfigMapKey: '.', '..' and any key starting with '..' (for ConfigMaps too).
        (
            None,
            {".": "v", "..": "v", "..data": "v", "...x": "v", ".ok": "v", "a..b": "v"},
            "): ., .., ...x, ..data;",
        ),
        ({"kind": "ConfigMap"}, {"..data": "v"}, "): ..data;"),
        (
            {"template": {"data": {"x": "{{ secrets['bad key'] }}"}}},
            {"bad key": "v"},
            None,
        ),  # not written: fine
        ({"template": {"data": {"x": "1"}, "includeAll": True}}, {"bad key": "v"}, "bad key"),
    ],
)
def test_invalid_keys(target: dict[str, Any] | None, fetched: dict[str, str], message: str | None) -> None:
    if message is None:
        build(target, Fetched(fetched))
        return
    with pytest.raises(problems.Problem) as info:
        build(target, Fetched(fetched))
    assert info.value.reason == reasons.INVALID_KEY
    assert message in info.value.message


def test_too_large() -> None:
    with pytest.raises(problems.Problem) as info:
        build(None, Fetched({"A": "x" * 600_000, "B": "y" * 600_000}))
    assert info.value.reason == reasons.TARGET_TOO_LARGE


def test_long_sync_name_label() -> None:
    name = "a" * 100
    d = desired.build_desired(sync(None, name=name), [Fetched({"A": "1"})], hmac_key=KEY)
    assert d.labels[labels.SYNC_LABEL] == labels.sync_label_value(name)
    assert len(d.labels[labels.SYNC_LABEL]) <= 63


def test_owner_needs_uid() -> None:
    raw = sync()
    no_uid = raw.model_copy(update={"metadata": raw.metadata.model_copy(update={"uid": None})})
    with pytest.raises(ValueError, match="uid"):
        desired.build_desired(no_uid, [Fetched({})], hmac_key=KEY)


SECRET_VALUE = "s3cr3t-V4LUE-do-not-leak"
LEAKY_TEMPLATES = [
    "{{ secrets[PASSWORD] }}",  # Jinja: "'dict object' has no attribute 's3cr3t-...'"
    "{{ PASSWORD | int + PASSWORD }}",
    "{{ PASSWORD | b64dec }}",
    "{{ PASSWORD | fromjson }}",
    "{{ PASSWORD.missing }}",
    "{{ PASSWORD() }}",
    "{{ PASSWORD[100] }}",
    "{{ {}[PASSWORD] }}",
    "{{ range(PASSWORD) }}",
    "{{ PASSWORD | attr(PASSWORD) | string | fromjson }}",
    "{% set x = PASSWORD | int(PASSWORD) %}{{ x[PASSWORD] }}",
]


@pytest.mark.parametrize("source", LEAKY_TEMPLATES)
def test_value_never_appears_in_an_error(source: str) -> None:
    with pytest.raises(problems.Problem) as info:
        build({"template": {"data": {"out": source}}}, Fetched({"PASSWORD": SECRET_VALUE}))
    assert info.value.reason == reasons.TEMPLATE_ERROR
    assert "'out'" in info.value.message
    assert SECRET_VALUE not in str(info.value)
    assert SECRET_VALUE not in repr(info.value)
    # Nothing in the exception chain either (a traceback printer or error reporter would show it).
    assert info.value.__cause__ is None and info.value.__context__ is None


@pytest.mark.parametrize(
    ("data", "other"),
    [
        ({"a": "1"}, {"a": "2"}),
        ({"a": "1"}, {"b": "1"}),
        ({"ab": "c"}, {"a": "bc"}),  # no concatenation ambiguity
        ({"a": "1", "b": "2"}, {"a": "1"}),
    ],
)
def test_data_hmac_distinguishes(data: dict[str, str], other: dict[str, str]) -> None:
    assert desired.data_hmac(data, KEY) != desired.data_hmac(other, KEY)


@given(st.dictionaries(st.text(), st.text()))
def test_data_hmac_is_order_independent_keyed_and_matches_spec(data: dict[str, str]) -> None:
    reordered = dict(reversed(list(data.items())))
    digest = desired.data_hmac(data, KEY)
    assert digest == desired.data_hmac(reordered, KEY)
    assert digest != desired.data_hmac(data, b"other-key")
    canonical = json.dumps(sorted(data.items()), ensure_ascii=False, separators=(",", ":")).encode()
    assert digest == hmac.new(KEY, canonical, hashlib.sha256).hexdigest()


# --- the data HMAC is keyed per object and spec generation ------------------------------------------

SAME_META = {"name": "app", "namespace": "team-a", "uid": "uid-1", "generation": 3}


@pytest.mark.parametrize(
    ("other", "comparable"),
    [
        ({}, True),  # the same SecretSync at the same generation: a change of data shows
        ({"namespace": "team-b"}, False),  # equal data in another namespace
        ({"name": "guess"}, False),  # equal data in another SecretSync of the namespace
        ({"uid": "uid-2"}, False),  # the same name, deleted and created again
        ({"generation": 4}, False),  # the same SecretSync after an edit (a new template)
        ({"generation": 2}, False),
    ],
)
def test_equal_data_gives_equal_hmacs_only_in_one_object_at_one_generation(
    other: dict[str, Any], comparable: bool
) -> None:
    data = {"password": "Y"}
    first = desired.build_desired(sync(None, **SAME_META), [Fetched(data)], hmac_key=KEY)
    second = desired.build_desired(sync(None, **{**SAME_META, **other}), [Fetched(data)], hmac_key=KEY)
    assert (first.data_hmac == second.data_hmac) is comparable
    assert first.annotations[labels.DATA_HMAC_ANNOTATION] == first.data_hmac


@pytest.mark.parametrize(
    ("meta", "label"),
    [
        (SAME_META, ["secretferry.io/data-hmac/v2", "team-a", "app", "uid-1", 3]),
        # Fields are separated, not concatenated: moving a character between them is another key.
        (
            {**SAME_META, "namespace": "team-ap", "name": "p"},
            ["secretferry.io/data-hmac/v2", "team-ap", "p", "uid-1", 3],
        ),
    ],
)
def test_object_key_is_an_hmac_of_the_object_under_the_operator_key(
    meta: dict[str, Any], label: list[Any]
) -> None:
    text = json.dumps(label, separators=(",", ":")).encode()
    assert desired.sync_key(KEY, sync(None, **meta)) == hmac.new(KEY, text, hashlib.sha256).digest()


def test_the_published_hmac_is_not_the_operator_keyed_one() -> None:
    """The HMAC under the operator's own key is what any two objects could be compared by."""
    d = desired.build_desired(sync(None, **SAME_META), [Fetched({"A": "1"})], hmac_key=KEY)
    assert d.data_hmac != desired.data_hmac({"A": "1"}, KEY)


@given(
    st.lists(
        st.dictionaries(st.sampled_from("ABCDE"), st.text(max_size=3), max_size=5), min_size=1, max_size=4
    )
)
def test_last_source_wins(directs: list[dict[str, str]]) -> None:
    sources = [{"projectId": f"p{i}", "environment": "dev"} for i in range(len(directs))]
    result = build(None, *[Fetched(d) for d in directs], sources=sources).string_data
    for key, value in result.items():
        assert value == next(d[key] for d in reversed(directs) if key in d)
    assert set(result) == set().union(*directs)

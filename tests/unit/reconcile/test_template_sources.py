"""rendering/template_sources: parsing a source, merge order, limits and the named reasons.

Template texts here are sentinels: every failure message is checked not to carry one (a Secret's
template text may be secret).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

import pytest

from secretferry import models
from secretferry.models import templatefrom
from secretferry.reconcile import desired, problems, reasons
from secretferry.reconcile.rendering import template_sources as ts

TEXT = "{{ SENTINEL_TEMPLATE_TEXT }}"
NS = "team-a"


def template(**spec: Any) -> models.Template:
    return models.Template.model_validate(spec)


def cm(name: str, data: dict[str, str], namespace: str = NS) -> ts.SourceObject:
    return ts.parse("ConfigMap", {"metadata": {"name": name, "namespace": namespace}, "data": data})


def secret_body(name: str, data: dict[str, bytes], **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


def from_cm(name: str, keys: list[str] | None = None) -> dict[str, Any]:
    return {"configMap": {"name": name, **({"keys": keys} if keys is not None else {})}}


def failure(tpl: models.Template, found: list[ts.Found]) -> problems.Problem:
    with pytest.raises(problems.Problem) as caught:
        ts.merge(tpl, found, namespace=NS)
    assert "SENTINEL" not in caught.value.message
    return caught.value


# --- parsing ---------------------------------------------------------------------------------------


def test_a_configmap_is_its_data_and_its_binary_data_is_ignored() -> None:
    body = {"metadata": {"name": "t", "namespace": NS}, "data": {"a": TEXT}, "binaryData": {"b": "AAE="}}
    got = ts.parse("ConfigMap", body)
    assert got.templates == {"a": TEXT}
    assert (got.key, got.size, got.not_text) == (("ConfigMap", NS, "t"), 1 + len(TEXT), ())


def test_a_secret_is_decoded_and_its_non_text_values_are_named_not_kept() -> None:
    got = ts.parse("Secret", secret_body("s", {"url": TEXT.encode(), "p12": b"\xff\xfe\x00"}))
    assert got.templates == {"url": TEXT}
    assert got.not_text == ("p12",)
    assert got.size == len("url") + len(TEXT) + len("p12") + 3


def test_a_source_over_the_bound_keeps_only_its_size() -> None:
    at_bound = cm("t", {"k": "x" * (ts.MAX_SOURCE_BYTES - 1)})
    over = cm("t", {"k": "x" * ts.MAX_SOURCE_BYTES})
    assert at_bound.templates is not None
    assert over.templates is None and over.size == ts.MAX_SOURCE_BYTES + 1


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({templatefrom.TEMPLATE_SOURCE_LABEL: "true"}, True),
        ({templatefrom.TEMPLATE_SOURCE_LABEL: "True"}, False),
        ({templatefrom.TEMPLATE_SOURCE_LABEL: ""}, False),
        ({"template-source": "true"}, False),
        (None, False),
    ],
)
def test_only_the_exact_label_is_consent(labels: dict[str, str] | None, expected: bool) -> None:
    assert ts.is_labelled({"labels": labels}) is expected


# --- merge order -------------------------------------------------------------------------------------


def test_later_entries_override_earlier_ones_and_inline_data_overrides_all() -> None:
    tpl = template(templateFrom=[from_cm("one"), from_cm("two")], data={"c": "inline-c"})
    found: list[ts.Found] = [
        cm("one", {"a": "one-a", "b": "one-b", "c": "one-c"}),
        cm("two", {"b": "two-b", "c": "two-c"}),
    ]
    assert ts.merge(tpl, found, namespace=NS) == {"a": "one-a", "b": "two-b", "c": "inline-c"}


def test_keys_limits_what_an_entry_contributes() -> None:
    tpl = template(templateFrom=[from_cm("one", keys=["b"])])
    assert ts.merge(tpl, [cm("one", {"a": "one-a", "b": "one-b"})], namespace=NS) == {"b": "one-b"}


def test_without_template_from_the_texts_are_the_inline_data() -> None:
    assert ts.merge(template(data={"a": TEXT}), [], namespace=NS) == {"a": TEXT}
    assert ts.merge(None, [], namespace=NS) == {}


def test_the_resolved_texts_are_what_the_desired_secret_renders() -> None:
    sync = models.SecretSync.from_body(
        {
            "metadata": {"name": "app", "namespace": NS, "uid": "u"},
            "spec": {
                "identityRef": {"name": "mi"},
                "sources": [{"projectId": "p", "environment": "dev"}],
                "target": {"template": {"templateFrom": [from_cm("one")], "data": {"b": "{{ B }}!"}}},
            },
        }
    )
    texts = ts.merge(sync.spec.target.template, [cm("one", {"a": "{{ A }}-x"})], namespace=NS)
    built = desired.build_desired(
        sync, [desired.FetchedSource({"A": "1", "B": "2"})], hmac_key=b"k" * 32, templates=texts
    )
    assert built.string_data == {"a": "1-x", "b": "2!"}


def test_include_all_keeps_its_meaning_with_template_from() -> None:
    sync = models.SecretSync.from_body(
        {
            "metadata": {"name": "app", "namespace": NS, "uid": "u"},
            "spec": {
                "identityRef": {"name": "mi"},
                "sources": [{"projectId": "p", "environment": "dev"}],
                "target": {"template": {"templateFrom": [from_cm("one")], "includeAll": True}},
            },
        }
    )
    texts = ts.merge(sync.spec.target.template, [cm("one", {"A": "{{ A }}-templated"})], namespace=NS)
    built = desired.build_desired(
        sync, [desired.FetchedSource({"A": "1", "B": "2"})], hmac_key=b"k" * 32, templates=texts
    )
    assert built.string_data == {"A": "1-templated", "B": "2"}


# --- named reasons -------------------------------------------------------------------------------------


def test_a_missing_source_is_named() -> None:
    p = failure(template(templateFrom=[from_cm("gone")]), [ts.Absent.MISSING])
    assert p.reason == reasons.TEMPLATE_SOURCE_MISSING
    assert (
        "ConfigMap team-a/gone (spec.target.template.templateFrom[0].configMap) does not exist" in p.message
    )


def test_an_unlabelled_source_is_named_with_the_label_to_set() -> None:
    tpl = template(templateFrom=[from_cm("ok"), {"secret": {"name": "theirs"}}])
    p = failure(tpl, [cm("ok", {"a": TEXT}), ts.Absent.NOT_LABELLED])
    assert p.reason == reasons.TEMPLATE_SOURCE_NOT_LABELLED
    assert "Secret team-a/theirs (spec.target.template.templateFrom[1].secret)" in p.message
    assert "secretferry.io/template-source=true" in p.message


def test_an_oversized_source_is_named_with_its_size_and_the_bound() -> None:
    p = failure(template(templateFrom=[from_cm("big")]), [cm("big", {"k": "x" * ts.MAX_SOURCE_BYTES})])
    assert p.reason == reasons.TEMPLATE_SOURCE_TOO_LARGE
    assert f"holds {ts.MAX_SOURCE_BYTES + 1} bytes" in p.message and str(ts.MAX_SOURCE_BYTES) in p.message


def test_a_listed_key_the_source_lacks_is_named_with_the_keys_it_has() -> None:
    p = failure(
        template(templateFrom=[from_cm("one", keys=["a", "zz"])]), [cm("one", {"a": TEXT, "b": TEXT})]
    )
    assert p.reason == reasons.TEMPLATE_SOURCE_KEY_MISSING
    assert "has no key zz (listed in its keys); it has a, b" in p.message


def test_a_non_text_value_is_refused_unless_keys_leaves_it_out() -> None:
    secret = ts.parse("Secret", secret_body("s", {"url": TEXT.encode(), "p12": b"\xff"}))
    p = failure(template(templateFrom=[{"secret": {"name": "s"}}]), [secret])
    assert p.reason == reasons.TEMPLATE_SOURCE_INVALID and "p12 is not UTF-8 text" in p.message
    picked = template(templateFrom=[{"secret": {"name": "s", "keys": ["url"]}}])
    assert ts.merge(picked, [secret], namespace=NS) == {"url": TEXT}


def test_nothing_to_write_is_refused_rather_than_emptying_the_target() -> None:
    p = failure(template(templateFrom=[from_cm("empty")]), [cm("empty", {})])
    assert p.reason == reasons.TEMPLATE_SOURCE_INVALID and "nothing would be written" in p.message
    # With includeAll the fetched keys are written: nothing is emptied.
    assert (
        ts.merge(template(templateFrom=[from_cm("empty")], includeAll=True), [cm("empty", {})], namespace=NS)
        == {}
    )


# --- where sources are read, and the index ------------------------------------------------------------


def test_sources_are_read_in_the_namespace_given() -> None:
    tpl = template(templateFrom=[from_cm("a"), {"secret": {"name": "b"}}])
    assert ts.source_keys(tpl, namespace="ns-1") == [("ConfigMap", "ns-1", "a"), ("Secret", "ns-1", "b")]
    # A reference names no namespace: one smuggled into the body is not read (a ClusterSecretSync
    # passes its admin's templatesNamespace as ``namespace`` instead).
    smuggled = template(templateFrom=[{"configMap": {"name": "a", "namespace": "kube-system"}}])
    assert ts.source_keys(smuggled, namespace="ns-1") == [("ConfigMap", "ns-1", "a")]
    assert ts.source_keys(smuggled, namespace="platform") == [("ConfigMap", "platform", "a")]


class Reader:
    def __init__(self, found: dict[ts.SourceKey, ts.Found]) -> None:
        self.found = found
        self.bound: list[tuple[tuple[str, str], list[ts.SourceKey]]] = []
        self.read_keys: list[ts.SourceKey] = []

    async def read(self, key: ts.SourceKey) -> ts.Found:
        self.read_keys.append(key)
        return self.found.get(key, ts.Absent.MISSING)

    def bind(self, sync_key: tuple[str, str], keys: Iterable[ts.SourceKey]) -> None:
        self.bound.append((sync_key, list(keys)))


async def test_resolve_binds_the_sync_to_its_sources_before_a_failure() -> None:
    reader = Reader({})
    tpl = template(templateFrom=[from_cm("later")])
    with pytest.raises(problems.Problem):
        await ts.resolve(tpl, namespace=NS, reader=reader, sync_key=(NS, "app"))
    assert reader.bound == [((NS, "app"), [("ConfigMap", NS, "later")])]


async def test_resolve_reads_each_source_and_merges() -> None:
    reader = Reader({("ConfigMap", NS, "one"): cm("one", {"a": "x"})})
    tpl = template(templateFrom=[from_cm("one")], data={"b": "y"})
    assert await ts.resolve(tpl, namespace=NS, reader=reader, sync_key=(NS, "app")) == {"a": "x", "b": "y"}
    assert reader.read_keys == [("ConfigMap", NS, "one")]

"""secretferry.reconcile.rendering.templating: sandboxed rendering and value-free error messages."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secretferry.reconcile.rendering import templating

SECRETS = {
    "DB_USER": "bob",
    "DB_PASS": "hunter2-value",
    "db-host": "db.local",
    "range": "shadowed",
    "CFG": '{"a": 1}',
}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{ DB_USER }}:{{ DB_PASS }}", "bob:hunter2-value"),
        ('{{ secrets["db-host"] }}', "db.local"),
        ("{{ secrets.DB_USER }}", "bob"),
        ('{{ secrets.get("NOPE", "fallback") }}', "fallback"),
        ("{{ DB_USER | b64enc }}", base64.b64encode(b"bob").decode()),
        ("{{ 'Ym9i' | b64dec }}", "bob"),
        ('{{ {"user": DB_USER, "tag": "<&>"} | tojson }}', '{"user": "bob", "tag": "<&>"}'),
        ("{{ (CFG | fromjson).a }}", "1"),
        ("{{ range(2) | list }}", "[0, 1]"),  # a key named like a global does not shadow it
        ('{{ secrets["range"] }}', "shadowed"),
        ("line\n", "line\n"),  # trailing newline kept (PEM files)
        ("{% for k in secrets | sort %}{{ k }},{% endfor %}", "CFG,db-host,DB_PASS,DB_USER,range,"),
        ("{{ 'ab' * 2 }}{{ 2 ** 10 }}", "abab1024"),
    ],
)
def test_render(source: str, expected: str) -> None:
    assert templating.render({"out": source}, SECRETS) == {"out": expected}


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{ NOPE }}", "refers to keys that were not fetched: NOPE"),
        ("{{ A }}{{ B }}{{ DB_USER }}", "refers to keys that were not fetched: A, B"),
        ('{{ secrets["x-y"] }}', "refers to keys that were not fetched: x-y"),
        ("{{ secrets.MISSING }}", "refers to keys that were not fetched: MISSING"),
        ("{{ secrets[DB_PASS] }}", "used an undefined value"),
        ("{{ DB_USER.nothing }}", "used an undefined value"),
        ("{% if %}", "syntax error on line 1"),
        ("{{ DB_PASS | b64dec }}", "b64dec: input is not valid base64"),
        ("{{ '/w==' | b64dec }}", "b64dec: decoded bytes are not UTF-8 text"),
        ("{{ DB_PASS | fromjson }}", "fromjson: input is not valid JSON"),
        ("{{ DB_PASS + 1 }}", "rendering failed (TypeError)"),
        ("{{ 'x' * 100000000 }}", "operation not allowed in the sandbox"),
        ("{{ 9 ** 100000 }}", "operation not allowed in the sandbox"),
        ("{{ secrets.update({}) }}", "operation not allowed in the sandbox"),
        ("{{ ''.__class__ }}", "operation not allowed in the sandbox"),
        ("{{ DB_USER.__class__.__mro__ }}", "operation not allowed in the sandbox"),
    ],
)
def test_errors(source: str, message: str) -> None:
    with pytest.raises(templating.TemplateRenderError) as info:
        templating.render({"out.key": source}, SECRETS)
    assert str(info.value).startswith("template 'out.key': ")
    assert message in str(info.value)
    assert info.value.key == "out.key"
    for value in SECRETS.values():
        assert value not in str(info.value)


def test_result_size_is_bounded() -> None:
    with pytest.raises(templating.TemplateRenderError, match="exceeds"):
        templating.render({"k": "{% for i in range(3) %}{{ BIG }}{% endfor %}"}, {"BIG": "x" * 400_000})


@pytest.mark.parametrize(
    ("templates", "limit", "failing"),
    [
        ({"a": "{{ 'x' * 6 }}"}, 5, "a"),
        ({"a": "{{ 'x' * 3 }}", "b": "{{ 'y' * 3 }}"}, 5, "b"),  # the budget is for all keys together
        ({"a": "{{ '€' * 2 }}"}, 5, "a"),  # bytes, not characters (6 bytes)
        ({"a": "{% for i in range(10000) %}{% for j in range(10000) %}x{% endfor %}{% endfor %}"}, 100, "a"),
    ],
)
def test_output_budget(templates: dict[str, str], limit: int, failing: str) -> None:
    with pytest.raises(templating.TemplateRenderError) as info:
        templating.render(templates, {}, max_output_bytes=limit)
    assert str(info.value) == f"template {failing!r}: output exceeds the size limit of {limit} bytes"
    assert info.value.limit == "output"


def test_output_budget_is_inclusive() -> None:
    assert templating.render({"a": "{{ '€' }}xy"}, {}, max_output_bytes=5) == {"a": "€xy"}


@pytest.mark.parametrize("args", ["10001", "0, 20002, 2", "-5001, 5000"])
def test_range_is_bounded(args: str) -> None:
    with pytest.raises(templating.TemplateRenderError) as info:
        templating.render({"k": f"{{{{ range({args}) | length }}}}"}, {})
    assert str(info.value) == "template 'k': range() of more than 10000 items exceeds the range limit"
    assert info.value.limit == "range"


def test_range_up_to_the_limit() -> None:
    assert templating.render({"k": "{{ range(10000) | length }}"}, {}) == {"k": "10000"}


def test_an_unpaired_surrogate_is_a_template_error() -> None:
    with pytest.raises(templating.TemplateRenderError, match="unpaired surrogate"):
        templating.render({"k": '{{ "\\ud800" }}'}, {})


def test_on_key_is_told_each_key_in_order() -> None:
    seen: list[str] = []
    templating.render({"b": "1", "a": "2"}, {}, on_key=seen.append)
    assert seen == ["b", "a"]


@given(st.text(min_size=1, max_size=64).map(lambda v: "V@LUE" + v))
def test_value_used_as_a_lookup_key_is_never_quoted(value: str) -> None:
    # Jinja's own message here would be "'dict object' has no attribute '<value>'".
    secrets = {"PASSWORD": value, "OTHER": "x"}
    with pytest.raises(templating.TemplateRenderError) as info:
        templating.render({"k": "{{ secrets[PASSWORD] }}"}, secrets)
    assert "V@LUE" not in str(info.value)


def test_context_for() -> None:
    context = templating.context_for({"OK": "1", "not-ident": "2", "secrets": "3", "range": "4"})
    assert context["OK"] == "1"
    assert "not-ident" not in context and "range" not in context
    assert context["secrets"] == {"OK": "1", "not-ident": "2", "secrets": "3", "range": "4"}

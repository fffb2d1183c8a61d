"""secretferry.reconcile.rendering.templating: binary values in templates. A value that is bytes is
opaque (never text), ``b64enc`` makes text of it, a template whose whole output is one writes its
bytes, and ``b64dec_bytes`` makes one; errors name the template key, never a value."""

from __future__ import annotations

import base64

import pytest

from secretferry.reconcile.rendering import templating

RAW = bytes(range(256))
SECRETS: dict[str, str | bytes] = {
    "KEYSTORE": RAW,
    "ks.p12": RAW,
    "KS_B64": base64.b64encode(RAW).decode(),
    "KS_URL": base64.urlsafe_b64encode(RAW).decode().rstrip("="),
    "TEXT_B64": base64.b64encode(b"hello").decode(),
    "USER": "bob",
}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{ KEYSTORE }}", RAW),
        ('{{ secrets["ks.p12"] }}', RAW),
        ("\n  {{ KEYSTORE }}\n", RAW),  # whitespace around it (a YAML | block) is fine
        ("{{ KS_B64 | b64dec_bytes }}", RAW),
        ("{{ KS_URL | b64dec_bytes(urlsafe=true) }}", RAW),
        ("{{ TEXT_B64 | b64dec_bytes }}", "hello"),  # bytes that are UTF-8 are text
        ("{{ KEYSTORE | b64enc }}", base64.b64encode(RAW).decode()),
        ("{{ KEYSTORE | length }}", "256"),
        ("{% if KEYSTORE %}yes{% endif %}", "yes"),
        ("{{ USER }}:{{ KEYSTORE | b64enc | length }}", "bob:344"),
        ("{% set k = KEYSTORE %}{{ k }}", RAW),
        ("{{ KEYSTORE if USER == 'bob' else '' }}", RAW),
    ],
)
def test_binary_output(source: str, expected: str | bytes) -> None:
    assert templating.render({"out": source}, SECRETS) == {"out": expected}


WHOLE_OUTPUT = "must be the template's whole output"
AS_TEXT = "cannot be used as text"


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("x{{ KEYSTORE }}", WHOLE_OUTPUT),
        ("{{ KEYSTORE }}{{ KEYSTORE }}", WHOLE_OUTPUT),
        ("{{ KEYSTORE }}\n{{ USER }}", WHOLE_OUTPUT),
        ("{% for i in range(2) %}{{ KEYSTORE }}{% endfor %}", WHOLE_OUTPUT),
        ('{{ KEYSTORE ~ "" }}', AS_TEXT),
        ("{{ KEYSTORE | upper }}", AS_TEXT),
        ("{{ KEYSTORE | string }}", AS_TEXT),
        ("{{ KEYSTORE | b64dec }}", AS_TEXT),
        ("{{ KEYSTORE | tojson }}", "tojson: value is not JSON-serialisable"),
        ("{{ KEYSTORE._data }}", "operation not allowed in the sandbox"),
        ("{{ KEYSTORE.__class__ }}", "operation not allowed in the sandbox"),
        ('{{ "no base64!" | b64dec_bytes }}', "b64dec_bytes: input is not valid base64"),
        ("{{ KS_B64 | b64dec_bytes(urlsafe=true) }}", "b64dec_bytes: input is not valid base64url"),
        ("{{ KS_B64 | b64dec }}", "b64dec_bytes yields them as a binary value"),
    ],
)
def test_binary_misuse_is_a_named_error(source: str, says: str) -> None:
    with pytest.raises(templating.TemplateRenderError) as info:
        templating.render({"out": source}, SECRETS)
    assert info.value.key == "out" and says in str(info.value)
    assert "\\x" not in str(info.value) and SECRETS["KS_B64"] not in str(info.value)  # type: ignore[operator]


def test_binary_output_counts_against_the_output_limit() -> None:
    with pytest.raises(templating.TemplateRenderError) as info:
        templating.render({"a": "{{ USER }}", "b": "{{ KEYSTORE }}"}, SECRETS, max_output_bytes=256)
    assert info.value.limit == "output" and info.value.key == "b"
    assert templating.render({"b": "{{ KEYSTORE }}"}, SECRETS, max_output_bytes=256) == {"b": RAW}


def test_a_printing_loop_stops_at_the_budget_not_at_the_end() -> None:
    """Binary values are counted as they are printed, before the output is put together."""
    with pytest.raises(templating.TemplateRenderError) as info:
        templating.render(
            {"a": "{% for i in range(10000) %}{{ KEYSTORE }}{% endfor %}"}, SECRETS, max_output_bytes=4096
        )
    assert info.value.limit == "output"


def test_a_text_value_that_looks_like_the_placeholder_is_just_text() -> None:
    forged = "\x00secretferry-binary:00000000000000000000000000000000:0\x00"
    assert templating.render({"a": "{{ F }}"}, {"F": forged}) == {"a": forged}
    with pytest.raises(templating.TemplateRenderError):
        templating.render({"a": "{{ F }}{{ KEYSTORE }}"}, {"F": forged, "KEYSTORE": RAW})


def test_text_secrets_are_unchanged() -> None:
    assert templating.context_for({"A": "x", "B": RAW})["A"] == "x"
    assert isinstance(templating.context_for({"B": RAW})["secrets"]["B"], templating.Binary)
    assert repr(templating.Binary(RAW)) == "<binary value>"

"""secretferry.reconcile.rendering.decoding and models.keydecoding: which strategy a key gets
(first matching glob, else the source's), DecodingFailed naming the key and never the value, and
globs that stay cheap whatever a tenant writes."""

from __future__ import annotations

import fnmatch
import time
from typing import Any

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from secretferry import models
from secretferry.models import keydecoding
from secretferry.reconcile import problems, reasons
from secretferry.reconcile.rendering import decoding


def source(**extra: Any) -> models.Source:
    return models.Source.model_validate({"projectId": "p", "environment": "dev", **extra})


def rules(*pairs: tuple[str, str]) -> list[keydecoding.DecodingRule]:
    return [keydecoding.DecodingRule.model_validate({"keys": k, "strategy": s}) for k, s in pairs]


@pytest.mark.parametrize(
    ("key", "pairs", "default", "expected"),
    [
        ("app.p12", [("*.p12", "Base64")], "None", "Base64"),
        ("app.pem", [("*.p12", "Base64")], "None", "None"),
        ("app.pem", [("*.p12", "Base64")], "Auto", "Auto"),  # no match: the source's strategy
        ("app.p12", [("app.*", "Base64URL"), ("*.p12", "Base64")], "None", "Base64URL"),  # first wins
        ("app.p12", [("*.p12", "None")], "Auto", "None"),  # a rule can switch decoding off
        ("APP.P12", [("*.p12", "Base64")], "None", "None"),  # case-sensitive
        ("key1", [("key[0-9]", "Base64")], "None", "Base64"),
        ("keyA", [("key[!0-9]", "Base64")], "None", "Base64"),
        ("k", [("?", "Base64")], "None", "Base64"),
        ("ab", [("?", "Base64")], "None", "None"),  # whole-key match
        ("x" * 254, [("*", "Base64")], "None", "None"),  # longer than a data key: no rule
        ("x" * 253, [("*", "Base64")], "None", "Base64"),
    ],
)
def test_strategy_for(key: str, pairs: list[tuple[str, str]], default: Any, expected: str) -> None:
    assert decoding.strategy_for(key, rules(*pairs), default) == expected


_GLOB_CHARS = st.sampled_from(list("ab*?[]!-.\\"))


@given(st.text(_GLOB_CHARS, max_size=12), st.text(st.sampled_from(list("ab-.[]!\\*?")), max_size=12))
def test_globs_match_exactly_as_fnmatch_does(glob: str, key: str) -> None:
    """The syntax of includeKeys: the same matcher, so the same answer for every glob and key."""
    if not glob:
        return
    want = "Base64" if fnmatch.fnmatchcase(key, glob) else "None"
    assert decoding.strategy_for(key, rules((glob, "Base64")), "None") == want


HOSTILE = [
    "*a" * 126 + "b",  # 127 stars, a classic for backtracking matchers
    "*" * 252 + "b",
    "*?" * 126 + "b",
    "*[a-z]" * 42 + "b",
    "a*" * 126 + "b",
    "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b",
]


@pytest.mark.parametrize("glob", HOSTILE)
def test_hostile_globs_are_cheap(glob: str) -> None:
    """Against the longest key that can match (253 characters that nearly match every glob): 32
    rules of the glob cost a few milliseconds at most (measured: microseconds)."""
    assert len(glob) <= keydecoding.MAX_GLOB
    bad = rules(*[(glob, "Base64")] * keydecoding.MAX_RULES)
    key = "a" * 253
    start = time.perf_counter()
    for _ in range(10):
        assert decoding.strategy_for(key, bad, "None") == "None"
    per_key = (time.perf_counter() - start) / 10
    assert per_key < 0.05, f"{per_key * 1000:.1f} ms for one key"


def test_bounds_refused_by_the_model() -> None:
    with pytest.raises(pydantic.ValidationError):
        source(decoding=[{"keys": "*", "strategy": "Base64"}] * (keydecoding.MAX_RULES + 1))
    with pytest.raises(pydantic.ValidationError):
        source(decoding=[{"keys": "*" * (keydecoding.MAX_GLOB + 1), "strategy": "Base64"}])
    with pytest.raises(pydantic.ValidationError):
        source(decoding=[{"keys": "", "strategy": "Base64"}])
    with pytest.raises(pydantic.ValidationError):
        source(decoding=[{"keys": "*", "strategy": "Base32"}])
    with pytest.raises(pydantic.ValidationError):
        source(decodingStrategy="base64")  # the spelling is exact
    assert source().decoding_strategy == "None" and source().decoding == []


def test_decode_values_per_key_and_source() -> None:
    got = decoding.decode_values(
        {"ks.p12": "/w==", "PLAIN": "aGVsbG8=", "AUTO_TEXT": "Gustavo"},
        source(
            decodingStrategy="Auto",
            decoding=[{"keys": "PLAIN", "strategy": "None"}, {"keys": "*.p12", "strategy": "Base64"}],
        ),
    )
    assert got == {"ks.p12": b"\xff", "PLAIN": "aGVsbG8=", "AUTO_TEXT": "Gustavo"}


def test_no_strategy_is_a_copy() -> None:
    values = {"A": "/w=="}
    got = decoding.decode_values(values, source())
    assert got == values and got is not values


def test_an_undecodable_value_names_the_key_never_the_value() -> None:
    value = "s3cr3t value, not base64"
    with pytest.raises(problems.Problem) as info:
        decoding.decode_values(
            {"ok.p12": "/w==", "bad.p12": value},
            source(decoding=[{"keys": "*.p12", "strategy": "Base64"}]),
            source_index=2,
        )
    problem = info.value
    assert problem.reason == reasons.DECODING_FAILED
    assert not problem.retriable
    assert "spec.sources[2]" in problem.message and "key bad.p12 is not valid Base64" in problem.message
    assert value not in problem.message and "s3cr3t" not in problem.message

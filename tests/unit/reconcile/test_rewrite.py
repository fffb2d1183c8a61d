"""secretferry.reconcile.rendering.rewrite (and models/keyrewrite.py): key rewriting, table-tested.

The hostile patterns below would never finish under Python's backtracking ``re`` on a 253-character
key (``(a|aa)*x`` takes Fibonacci(253) steps); that they finish here at all is the proof that RE2
matches them in linear time. bench/bench_rewrite.py prints the figures.
"""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from secretferry import models
from secretferry.models import errors, keyrewrite
from secretferry.reconcile import desired, problems, reasons
from secretferry.reconcile.rendering import rewrite

KEY = b"k" * 32


def rules(*raw: dict[str, Any]) -> list[keyrewrite.RewriteRule]:
    return [keyrewrite.RewriteRule.model_validate(r) for r in raw]


@pytest.mark.parametrize(
    ("raw", "key", "expected"),
    [
        ([{"from": "DB_PASSWORD", "to": "password"}], "DB_PASSWORD", "password"),
        ([{"from": "DB_PASSWORD", "to": "password"}], "DB_USER", "DB_USER"),  # not that key
        ([{"stripPrefix": "APP_"}], "APP_TOKEN", "TOKEN"),
        ([{"stripPrefix": "APP_"}], "OTHER_APP_TOKEN", "OTHER_APP_TOKEN"),  # only at the start
        ([{"addPrefix": "svc."}], "token", "svc.token"),
        ([{"transform": "Lower"}], "API_KEY", "api_key"),
        ([{"transform": "Upper"}], "api-key", "API-KEY"),
        ([{"regexp": {"source": "-", "target": "_"}}], "a-b-c", "a_b_c"),  # every match
        ([{"regexp": {"source": "^APP_(.*)$", "target": r"\1"}}], "APP_X", "X"),
        ([{"regexp": {"source": "^(?P<n>[A-Z]+)_URL$", "target": r"\g<n>.url"}}], "DB_URL", "DB.url"),
        ([{"regexp": {"source": "_SECRET$"}}], "X_SECRET", "X"),  # empty target deletes
        # in list order: strip, then case, then the rename sees the lower-cased name
        (
            [{"stripPrefix": "APP_"}, {"transform": "Lower"}, {"from": "db_password", "to": "password"}],
            "APP_DB_PASSWORD",
            "password",
        ),
        ([], "KEEP", "KEEP"),
        # over 253 characters: never a data key, left as it is for InvalidKey to name
        ([{"transform": "Lower"}], "A" * 254, "A" * 254),
    ],
)
def test_rewrite_key(raw: list[dict[str, Any]], key: str, expected: str) -> None:
    assert rewrite.rewrite_key(key, rules(*raw)) == expected


@pytest.mark.parametrize(
    ("raw", "key", "says"),
    [
        ([{"regexp": {"source": ".*"}}], "SECRET_NAME", "into an empty name"),
        ([{"stripPrefix": "X"}], "X", "into an empty name"),
        ([{"addPrefix": "p" * 253}], "KEY", "longer than 253"),
    ],
)
def test_rewrite_to_bad_name_is_invalid_key(raw: list[dict[str, Any]], key: str, says: str) -> None:
    with pytest.raises(problems.Problem) as caught:
        rewrite.rewrite_key(key, rules(*raw), source_index=2)
    assert caught.value.reason == reasons.INVALID_KEY
    assert says in caught.value.message and key in caught.value.message
    assert "spec.sources[2].rewrite[0]" in caught.value.message


@pytest.mark.parametrize(
    ("raw", "secrets", "first", "second", "name"),
    [
        ([{"transform": "Lower"}], {"TOKEN": "v1", "token": "v2"}, "TOKEN", "token", "token"),
        ([{"stripPrefix": "APP_"}], {"APP_X": "v1", "X": "v2"}, "APP_X", "X", "X"),
        ([{"from": "A", "to": "B"}], {"A": "v1", "B": "v2"}, "A", "B", "B"),
        ([{"regexp": {"source": "[-.]", "target": "_"}}], {"a-b": "v1", "a.b": "v2"}, "a-b", "a.b", "a_b"),
    ],
)
def test_collision_names_both_keys_never_values(
    raw: list[dict[str, Any]], secrets: dict[str, str], first: str, second: str, name: str
) -> None:
    with pytest.raises(problems.Problem) as caught:
        rewrite.rewrite_keys(secrets, rules(*raw))
    assert caught.value.reason == reasons.KEY_COLLISION
    message = caught.value.message
    assert f"both {first} and {second} to {name}" in message
    assert "v1" not in message and "v2" not in message


def test_rewrite_keys_keeps_values() -> None:
    got = rewrite.rewrite_keys({"APP_A": "1", "APP_B": "2"}, rules({"stripPrefix": "APP_"}))
    assert got == {"A": "1", "B": "2"}


@pytest.mark.parametrize(
    "pattern",
    [
        r"(a+)+$",
        r"(a|aa)*x",
        r"(a|a)*x",
        r"(.*a){20}x",
        r"\w*\w*\w*\w*\w*\w*\w*\w*!",
        r"[a-z]*[a-z]*[a-z]*[a-z]*[a-z]*x",
        r"(?:(?:a*)*)*b",
        r"[^a]{20}[^b]{20}[^c]{20}x",  # near the program-size cap
    ],
)
def test_hostile_patterns_finish_on_long_keys(pattern: str) -> None:
    # Each is exponential or a high-degree polynomial for a backtracking engine on these keys.
    chain = rules(*[{"regexp": {"source": pattern, "target": "a" * 10}}] * keyrewrite.MAX_RULES)
    for key in ("a" * 253, "a-" * 126, "A_" * 126):
        rewrite.rewrite_key(key, chain[:1])
        try:  # the whole chain: 32 linear passes, each over at most 253 characters
            rewrite.rewrite_key(key, chain)
        except problems.Problem as exc:  # a chain that grows the key past 253 stops there
            assert exc.reason == reasons.INVALID_KEY


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (r"(a)\1", "invalid escape sequence"),  # backreference
        (r"(?=a)b", "invalid perl operator"),  # lookahead
        (r"(?<!a)b", "invalid perl operator"),  # lookbehind
        (r"(x{100}){100}", "invalid repetition size"),  # counted-repeat bomb
        (r"\pL{1000}", "pattern too large"),  # over the program-size budget
        (r"[^a]{253}", "RE2 instructions, over 512"),  # linear, but with a big constant
        (r"\pL+", "RE2 instructions, over 512"),
        ("[", "missing ]"),
    ],
)
def test_refused_patterns_name_the_field(pattern: str, why: str) -> None:
    body = {
        "metadata": {"name": "app", "namespace": "team-a", "uid": "u"},
        "spec": {
            "identityRef": {"name": "mi"},
            "sources": [
                {"projectId": "p", "environment": "dev", "rewrite": [{"regexp": {"source": pattern}}]}
            ],
        },
    }
    with pytest.raises(pydantic.ValidationError) as caught:
        models.SecretSync.from_body(body)
    text = errors.describe_validation_error(caught.value)
    assert "spec.sources[0].rewrite[0].regexp.source" in text and why in text


@pytest.mark.parametrize(
    "raw",
    [
        {},
        {"addPrefix": "A", "stripPrefix": "B"},
        {"from": "A"},
        {"to": "B"},
        {"transform": "Title"},
        {"regexp": {"source": "a" * (keyrewrite.MAX_PATTERN + 1)}},
    ],
)
def test_malformed_rules_are_refused(raw: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        keyrewrite.RewriteRule.model_validate(raw)


def test_too_many_rules_are_refused() -> None:
    with pytest.raises(pydantic.ValidationError):
        models.Source.model_validate(
            {"projectId": "p", "environment": "e", "rewrite": [{"transform": "Lower"}] * 33}
        )


def _sync(sources: list[dict[str, Any]], target: dict[str, Any] | None = None) -> models.SecretSync:
    return models.SecretSync.from_body(
        {
            "metadata": {"name": "app", "namespace": "team-a", "uid": "u"},
            "spec": {"identityRef": {"name": "mi"}, "sources": sources, "target": target or {}},
        }
    )


def test_desired_order_filter_then_rewrite_then_merge_then_template() -> None:
    sources = [
        # includeKeys match the names at the service, before the rewrite
        {
            "projectId": "p",
            "environment": "e",
            "includeKeys": ["APP_*"],
            "rewrite": [{"stripPrefix": "APP_"}],
        },
        # a later source overrides an earlier one by the rewritten name
        {"projectId": "q", "environment": "e", "rewrite": [{"from": "DB_PASSWORD", "to": "PASSWORD"}]},
    ]
    template = {"template": {"includeAll": True, "data": {"url": "db://{{ USER }}:{{ PASSWORD }}"}}}
    fetched = [
        desired.FetchedSource({"APP_USER": "u", "APP_PASSWORD": "old", "OTHER": "o"}),
        desired.FetchedSource({"DB_PASSWORD": "new"}),
    ]
    got = desired.build_desired(_sync(sources, template), fetched, hmac_key=KEY)
    assert got.string_data == {"PASSWORD": "new", "USER": "u", "url": "db://u:new"}


def test_desired_collision_is_a_problem() -> None:
    sources = [{"projectId": "p", "environment": "e", "rewrite": [{"transform": "Upper"}]}]
    with pytest.raises(problems.Problem) as caught:
        desired.build_desired(_sync(sources), [desired.FetchedSource({"a": "1", "A": "2"})], hmac_key=KEY)
    assert caught.value.reason == reasons.KEY_COLLISION
    assert "spec.sources[0].rewrite renames both A and a to A" in caught.value.message


def test_match_budget_bounds_a_source_pass() -> None:
    # A rule matching every character, 32 times over 1,000 keys of 253 characters: ~8 million
    # matches without the budget (minutes through the Python wrapper); refused after 20,000.
    chain = rules(*[{"regexp": {"source": "a", "target": "a"}}] * keyrewrite.MAX_RULES)
    secrets = {f"{i:04d}" + "a" * 249: "v" for i in range(1000)}
    with pytest.raises(problems.Problem) as caught:
        rewrite.rewrite_keys(secrets, chain, source_index=1)
    assert caught.value.reason == reasons.INVALID_SPEC
    assert "spec.sources[1].rewrite[" in caught.value.message
    assert f"more than {rewrite.MAX_MATCHES_PER_SOURCE} times" in caught.value.message


def test_match_budget_is_not_spent_by_ordinary_rules() -> None:
    # "-" -> "_" on 1,000 keys with a few dashes each stays well inside the budget.
    chain = rules({"regexp": {"source": "-", "target": "_"}})
    got = rewrite.rewrite_keys({f"svc-{i}-db-url": "v" for i in range(1000)}, chain)
    assert "svc_7_db_url" in got and len(got) == 1000

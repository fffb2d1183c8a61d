"""Label selectors as text (the operator's namespace selector): what parses, what each means
against a namespace's labels, and what is refused with which message."""

from __future__ import annotations

import pydantic
import pytest

from secretferry import settings as settings_mod
from secretferry.models import selectors

# (selector, labels, matches): apimachinery's meaning of each form.
MATCHES = [
    ("team=a", {"team": "a"}, True),
    ("team=a", {"team": "b"}, False),
    ("team=a", {}, False),
    ("team==a", {"team": "a"}, True),
    ("team!=a", {"team": "b"}, True),
    ("team!=a", {}, True),  # != holds for an absent label, as in Kubernetes
    ("team!=a", {"team": "a"}, False),
    ("team in (a, b)", {"team": "b"}, True),
    ("team in (a,b)", {"team": "c"}, False),
    ("team in (a,b)", {}, False),
    ("team notin (a,b)", {"team": "c"}, True),
    ("team notin (a,b)", {}, True),
    ("team notin (a,b)", {"team": "a"}, False),
    ("team", {"team": ""}, True),
    ("team", {}, False),
    ("!team", {}, True),
    ("!team", {"team": "a"}, False),
    (" ! team ", {}, True),
    ("team=", {"team": ""}, True),
    ("team=", {"team": "a"}, False),
    ("team=a,env in (prod,staging),!legacy", {"team": "a", "env": "prod"}, True),
    ("team=a,env in (prod,staging),!legacy", {"team": "a", "env": "prod", "legacy": "y"}, False),
    ("team=a,env in (prod,staging),!legacy", {"team": "a", "env": "dev"}, False),
    ("a!=x,a!=y", {"a": "z"}, True),  # a key may repeat: every requirement must hold
    ("a!=x,a!=y", {"a": "y"}, False),
    ("example.com/release=blue", {"example.com/release": "blue"}, True),
    ("kubernetes.io/metadata.name in (ns-1)", {"kubernetes.io/metadata.name": "ns-1"}, True),
    ("A.b_c-9=V.1_x-2", {"A.b_c-9": "V.1_x-2"}, True),
]


@pytest.mark.parametrize(("text", "labels", "expected"), MATCHES)
def test_a_selector_means_what_kubernetes_means(text: str, labels: dict[str, str], expected: bool) -> None:
    selector = selectors.parse(text)
    assert selector is not None
    assert selector.matches(labels) is expected


@pytest.mark.parametrize("text", ["", "   "])
def test_an_empty_selector_selects_nothing_out(text: str) -> None:
    assert selectors.parse(text) is None


# (selector, what the message must say)
REFUSED = [
    ("team=a,", "empty requirement"),
    (",team=a", "empty requirement"),
    ("a,,b", "empty requirement"),
    ("team in ()", "in needs at least one value"),
    ("team notin ( )", "notin needs at least one value"),
    ("team in (a", "unbalanced '('"),
    ("team in a)", "unbalanced ')'"),
    ("team>1", "numeric comparisons"),
    ("team < 1", "numeric comparisons"),
    ("-team=a", "'-team' is not a label key"),
    ("team-=a", "'team-' is not a label key"),
    ("Example.com/team=a", "is not a label key"),  # the prefix is a DNS subdomain: lower case
    ("/team=a", "is not a label key"),
    ("a" * 64 + "=x", "is not a label key"),
    ("team=" + "v" * 64, "is not a label value"),
    ("team=-v", "'-v' is not a label value"),
    ("team in (a,-b)", "'-b' is not a label value"),
    ("team=a b", "is not a label requirement"),
    ("team = = a", "is not a label requirement"),
    ("team in", "is not a label requirement"),
    ("!team=a", "is not a label requirement"),
]


@pytest.mark.parametrize(("text", "message"), REFUSED)
def test_a_selector_that_does_not_parse_is_refused_by_name(text: str, message: str) -> None:
    with pytest.raises(selectors.SelectorError, match=message.replace("(", r"\(").replace(")", r"\)")):
        selectors.parse(text)


def test_the_longest_key_and_value_kubernetes_allows_parse() -> None:
    key = "a" * 63
    prefix = ".".join(["b" * 63] * 3) + "." + "c" * 61  # 253 characters
    value = "v" * 63
    selector = selectors.parse(f"{prefix}/{key}={value}")
    assert selector is not None
    assert selector.matches({f"{prefix}/{key}": value})


def test_a_bad_namespace_selector_stops_start_up_naming_the_variable() -> None:
    with pytest.raises(pydantic.ValidationError, match="SECRETFERRY_WATCH_NAMESPACE_SELECTOR: 'team>1'"):
        settings_mod.Settings(watch_namespace_selector="team>1")
    cfg = settings_mod.Settings(watch_namespace_selector="team in (a,b)")
    selector = cfg.namespace_selector()
    assert selector is not None and selector.matches({"team": "a"})
    assert settings_mod.Settings().namespace_selector() is None

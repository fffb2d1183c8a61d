"""LabelSelector matching, table-driven against the Kubernetes semantics."""

from __future__ import annotations

from typing import Any

import pytest

from secretferry.kube import namespaces

LABELS = {"team": "payments", "env": "prod"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({}, True),  # empty selector: everything
        ({"matchLabels": {}}, True),
        ({"matchLabels": {"team": "payments"}}, True),
        ({"matchLabels": {"team": "payments", "env": "prod"}}, True),
        ({"matchLabels": {"team": "payments", "env": "dev"}}, False),
        ({"matchLabels": {"missing": "x"}}, False),
        ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "staging"]}]}, True),
        ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["dev"]}]}, False),
        ({"matchExpressions": [{"key": "missing", "operator": "In", "values": ["x"]}]}, False),
        ({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]}, True),
        ({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}, False),
        ({"matchExpressions": [{"key": "missing", "operator": "NotIn", "values": ["x"]}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "missing", "operator": "Exists"}]}, False),
        ({"matchExpressions": [{"key": "missing", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, False),
        (  # every requirement must hold
            {
                "matchLabels": {"team": "payments"},
                "matchExpressions": [{"key": "env", "operator": "In", "values": ["dev"]}],
            },
            False,
        ),
        (
            {
                "matchLabels": {"team": "payments"},
                "matchExpressions": [
                    {"key": "env", "operator": "Exists"},
                    {"key": "tier", "operator": "DoesNotExist"},
                ],
            },
            True,
        ),
    ],
)
def test_matches_selector(selector: dict[str, Any], expected: bool) -> None:
    assert namespaces.matches_selector(LABELS, selector) is expected


def test_no_labels_only_match_negative_requirements() -> None:
    assert namespaces.matches_selector({}, {"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]})
    assert not namespaces.matches_selector({}, {"matchLabels": {"a": "b"}})


def test_unknown_operator_is_an_error_not_a_match() -> None:
    with pytest.raises(ValueError, match="Gt"):
        namespaces.matches_selector(LABELS, {"matchExpressions": [{"key": "env", "operator": "Gt"}]})

"""ClusterSecretSync model: what parses, what is refused, and which namespaces a spec selects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest
import yaml

from secretferry.models import clustersecretsync as css

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "clustersecretsync.yaml"


def _spec(**extra: Any) -> dict[str, Any]:
    template = {
        "identityRef": {"kind": "ClusterMachineIdentity", "name": "shared"},
        "sources": [{"projectId": "p", "environment": "dev"}],
        **extra.pop("template", {}),
    }
    return {"syncTemplate": template, **extra}


def test_the_example_parses() -> None:
    body = yaml.safe_load(EXAMPLE.read_text())
    parsed = css.ClusterSecretSync.from_body(body)
    assert parsed.spec.namespaces == ["team-a", "sandbox"]
    assert parsed.spec.sync_template.target.name == "payments-shared"


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        (_spec(), "namespaceSelector, namespaces"),
        (_spec(namespaces=["a"], template={"identityRef": {"name": "x"}}), "ClusterMachineIdentity"),
        (_spec(namespaces=["a"], template={"target": {"creationPolicy": "Merge"}}), "Merge"),
        (_spec(namespaces=["Not_A_Name"]), "pattern"),
    ],
)
def test_refused(spec: dict[str, Any], why: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=why):
        css.ClusterSecretSyncSpec.model_validate(spec)


SELECTOR = {
    "matchLabels": {"team": "pay"},
    "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}],
}


@pytest.mark.parametrize(
    ("namespace", "labels", "selected"),
    [
        ("listed", {}, True),  # by name, whatever its labels
        ("a", {"team": "pay"}, True),
        ("b", {"team": "pay", "env": "dev"}, True),
        ("c", {"team": "pay", "env": "prod"}, False),  # the expression refuses it
        ("d", {"team": "other"}, False),
        ("e", {}, False),
    ],
)
def test_selects_by_name_or_selector(namespace: str, labels: dict[str, str], selected: bool) -> None:
    spec = css.ClusterSecretSyncSpec.model_validate(_spec(namespaceSelector=SELECTOR, namespaces=["listed"]))
    assert spec.selects(namespace, labels) is selected


def test_names_alone_select_only_names() -> None:
    spec = css.ClusterSecretSyncSpec.model_validate(_spec(namespaces=["a"]))
    assert spec.selects("a", {}) and not spec.selects("b", {"team": "pay"})

"""DynamicSecretLease model: the example parses; TTL and fraction bounds; defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest
import yaml

from secretferry.models import dynamicsecretlease as lease_models

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "dynamicsecretlease.yaml"


def body(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "db", "namespace": "team"},
        "spec": {
            "identityRef": {"name": "id"},
            "dynamicSecret": {"name": "app-db", "projectSlug": "p", "environment": "dev"},
            **spec,
        },
    }


def test_the_example_parses() -> None:
    lease = lease_models.DynamicSecretLease.from_body(yaml.safe_load(EXAMPLE.read_text()))
    assert lease.target_name == "app-db-creds"
    assert lease.spec.ttl_wire == "3600s"
    assert lease.spec.revocation_policy == "Revoke"


def test_defaults() -> None:
    lease = lease_models.DynamicSecretLease.from_body(body())
    assert lease.target_name == "db"
    assert lease.spec.ttl_wire is None  # the dynamic secret's defaultTTL
    assert lease.spec.renew_at_fraction == lease_models.DEFAULT_RENEW_AT_FRACTION
    assert lease.spec.dynamic_secret.path == "/"


@pytest.mark.parametrize(
    "spec", [{"ttl": "59s"}, {"ttl": "1d"}, {"renewAtFraction": 0.95}, {"renewAtFraction": 0.05}]
)
def test_refused(spec: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        lease_models.DynamicSecretLease.from_body(body(**spec))


def test_project_by_id_or_slug_exactly_one() -> None:
    by_id = body()
    by_id["spec"]["dynamicSecret"] = {"name": "app-db", "projectId": "p-1", "environment": "dev"}
    assert lease_models.DynamicSecretLease.from_body(by_id).spec.dynamic_secret.project_id == "p-1"
    both = body()
    both["spec"]["dynamicSecret"]["projectId"] = "p-1"
    neither = body()
    del neither["spec"]["dynamicSecret"]["projectSlug"]
    for bad in (both, neither):
        with pytest.raises(pydantic.ValidationError, match="exactly one of projectId and projectSlug"):
            lease_models.DynamicSecretLease.from_body(bad)

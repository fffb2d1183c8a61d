"""SecretSync parsing, defaults and validation."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from secretferry import models


def body(spec: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    base_spec: dict[str, Any] = {
        "identityRef": {"name": "mi"},
        "sources": [{"projectId": "p1", "environment": "dev"}],
    }
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "metadata": {
            "name": "app",
            "namespace": "team-a",
            "uid": "uid-1",
            "generation": 7,
            "annotations": {"a": "b"},
            "resourceVersion": "42",
        },
        "spec": {**base_spec, **(spec or {})},
        **extra,
    }


def test_defaults() -> None:
    sync = models.SecretSync.from_body(body())
    spec = sync.spec
    assert spec.identity_ref.kind == "MachineIdentity"
    source = spec.sources[0]
    assert (source.path, source.recursive, source.include_imports, source.expand_references) == (
        "/",
        False,
        True,
        True,
    )
    assert (source.tag_slugs, source.metadata_filter, source.include_keys, source.exclude_keys) == (
        [],
        [],
        [],
        [],
    )
    target = spec.target
    assert (target.name, target.kind, target.type) == (None, "Secret", "Opaque")
    assert (target.creation_policy, target.deletion_policy, target.template) == ("Owner", "Retain", None)
    assert spec.refresh_interval == "5m"
    assert spec.refresh_interval_seconds == 300.0
    assert spec.instant_updates is True
    assert spec.rollout_restart_targets == []
    assert spec.allow_empty is False
    assert sync.target_name == "app"
    assert (sync.metadata.uid, sync.metadata.generation, sync.metadata.resource_version) == ("uid-1", 7, "42")
    assert sync.metadata.annotations == {"a": "b"}
    assert sync.status == models.SecretSyncStatus()


def test_full_spec_round_trips_by_alias() -> None:
    spec = {
        "identityRef": {"kind": "ClusterMachineIdentity", "name": "shared"},
        "sources": [
            {
                "projectSlug": "web",
                "environment": "prod",
                "path": "/app",
                "recursive": True,
                "includeImports": False,
                "expandReferences": False,
                "tagSlugs": ["t"],
                "metadataFilter": [{"key": "k", "value": "v"}],
                "includeKeys": ["DB_*"],
                "excludeKeys": ["*_OLD"],
                "rewrite": [
                    {"from": "DB_PASSWORD", "to": "password"},
                    {"regexp": {"source": "-", "target": "_"}},
                    {"stripPrefix": "APP_"},
                    {"transform": "Lower"},
                ],
                "decodingStrategy": "Auto",
                "decoding": [{"keys": "*.p12", "strategy": "Base64"}],
            }
        ],
        "target": {
            "name": "web-secrets",
            "kind": "Secret",
            "type": "kubernetes.io/basic-auth",
            "labels": {"l": "1"},
            "annotations": {"n": "2"},
            "template": {
                "templateFrom": [
                    {"configMap": {"name": "tpl", "keys": ["username"]}},
                    {"secret": {"name": "tpl-secret", "keys": []}},
                ],
                "data": {"username": "{{ DB_USER }}"},
                "includeAll": True,
            },
            "creationPolicy": "Merge",
            "deletionPolicy": "Delete",
        },
        "refreshInterval": "1h30m",
        "instantUpdates": False,
        "refreshPolicy": "OnChange",
        "rolloutRestartTargets": [{"kind": "Deployment", "name": "web"}],
        "allowEmpty": True,
    }
    sync = models.SecretSync.from_body(body(spec))
    assert sync.spec.model_dump(by_alias=True, exclude_none=True) == spec
    assert sync.target_name == "web-secrets"
    assert sync.spec.refresh_interval_seconds == 5400.0


def test_status_parses() -> None:
    status = {
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "AuthFailed",
                "message": "login rejected",
                "observedGeneration": 7,
                "lastTransitionTime": "2025-01-02T03:04:05Z",
            }
        ],
        "observedGeneration": 7,
        "lastSyncTime": "2025-01-02T03:04:05Z",
        "syncedKeys": ["A", "B"],
        "syncedKeyCount": 2,
        "updateMode": "Polling",
        "updateModeReason": "StreamUnavailable",
        "dataHMAC": "ab" * 32,
        "target": {"kind": "Secret", "name": "app"},
    }
    sync = models.SecretSync.from_body(body(status=status))
    assert sync.status.data_hmac == "ab" * 32
    assert sync.status.model_dump(by_alias=True, exclude_none=True, mode="json") == status


INVALID = [
    ({"sources": []}, "spec.sources: list should have at least 1 item"),
    ({"sources": [{"environment": "dev"}]}, "spec.sources[0]: set exactly one of projectId and projectSlug"),
    (
        {"sources": [{"projectId": "a", "projectSlug": "b", "environment": "dev"}]},
        "spec.sources[0]: set exactly one of projectId and projectSlug",
    ),
    ({"sources": [{"projectId": "a"}]}, "spec.sources[0]: environment is required (or generatorRef instead)"),
    (
        {
            "sources": [
                {
                    "projectId": "a",
                    "environment": "dev",
                    "generatorRef": {"kind": "UUIDGenerator", "name": "g"},
                }
            ]
        },
        "spec.sources[0]: a generatorRef source names no projectId, projectSlug or environment",
    ),
    (
        {"sources": [{"generatorRef": {"kind": "Vault", "name": "g"}}]},
        "spec.sources[0].generatorRef.kind",
    ),
    (
        {"sources": [{"projectId": "a", "environment": "dev", "path": "app"}]},
        "spec.sources[0].path: string should",
    ),
    ({"identityRef": {"kind": "Other", "name": "x"}}, "spec.identityRef.kind: input should be"),
    ({"refreshInterval": "5 minutes"}, "spec.refreshInterval: string should match pattern"),
    ({"refreshInterval": "0s"}, "spec.refreshInterval: must be at least 1s"),
    (
        {"target": {"kind": "ConfigMap", "type": "kubernetes.io/tls"}},
        "spec.target: a ConfigMap target has no type",
    ),
    ({"target": {"type": "kubernetes.io/service-account-token"}}, "spec.target: Secrets of type"),
    ({"target": {"type": "helm.sh/release.v1"}}, "spec.target: Secrets of type"),
    ({"target": {"type": "bootstrap.kubernetes.io/token"}}, "spec.target: Secrets of type"),
    (
        {"target": {"labels": {f"k{i}": "v" for i in range(257)}}},
        "spec.target.labels: dictionary should have at most 256",
    ),
    (
        {"target": {"template": {"data": {"..data": "x"}}}},
        "spec.target.template.data: invalid data keys ['..data']",
    ),
    (
        {"target": {"annotations": {"secretferry.io/merge-from": "other"}}},
        "spec.target: secretferry.io/merge-from is set by the target's owner",
    ),
    ({"target": {"name": "Not_Valid"}}, "spec.target.name: string should match pattern"),
    ({"target": {"creationPolicy": "Adopt"}}, "spec.target.creationPolicy: input should be"),
    (
        {"target": {"template": {"data": {}}}},
        "spec.target.template: template.data and templateFrom are empty",
    ),
    (
        {"target": {"template": {"data": {"bad key": "x"}}}},
        "spec.target.template.data: invalid data keys ['bad key']",
    ),
    (
        {"rolloutRestartTargets": [{"kind": "Pod", "name": "x"}]},
        "spec.rolloutRestartTargets[0].kind: input should",
    ),
    ({"identityRef": None}, "spec.identityRef: input should be"),
    (
        {"target": {"template": {"templateFrom": [{"configMap": {"name": "t"}, "secret": {"name": "t"}}]}}},
        "spec.target.template.templateFrom[0]: set exactly one of configMap and secret",
    ),
    (
        {"target": {"template": {"templateFrom": [{}]}}},
        "spec.target.template.templateFrom[0]: set exactly one of configMap and secret",
    ),
    (
        {"target": {"template": {"templateFrom": [{"configMap": {"name": "t"}}] * 17}}},
        "spec.target.template.templateFrom: list should have at most 16",
    ),
    (
        {"target": {"template": {"templateFrom": [{"secret": {"name": "Bad_Name"}}]}}},
        "spec.target.template.templateFrom[0].secret.name: string should match pattern",
    ),
    (
        {"target": {"template": {"templateFrom": [{"configMap": {"name": "t", "keys": ["bad key"]}}]}}},
        "spec.target.template.templateFrom[0].configMap.keys[0]: string should match pattern",
    ),
]


@pytest.mark.parametrize(("spec", "expected"), INVALID)
def test_invalid(spec: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValidationError) as info:
        models.SecretSync.from_body(body(spec))
    assert expected in models.describe_validation_error(info.value)


def test_template_from_alone_is_a_template() -> None:
    sync = models.SecretSync.from_body(
        body({"target": {"template": {"templateFrom": [{"configMap": {"name": "t"}}]}}})
    )
    assert sync.spec.target.template is not None
    [entry] = sync.spec.target.template.template_from
    assert (entry.kind, entry.ref.name, entry.ref.keys) == ("ConfigMap", "t", [])


def test_missing_spec() -> None:
    raw = body()
    del raw["spec"]
    with pytest.raises(ValidationError) as info:
        models.SecretSync.from_body(raw)
    assert models.describe_validation_error(info.value) == "spec: is required"


MARK = "SENSITIVE-VALUE-"
# Places where a misplaced secret could land; each path gets a value it cannot accept.
STRING_FIELDS = [
    ("identityRef", "kind"),
    ("identityRef", "name"),
    ("refreshInterval",),
    ("target", "kind"),
    ("target", "name"),
    ("target", "creationPolicy"),
    ("sources", 0, "path"),
    ("sources", 0, "recursive"),
    ("instantUpdates",),
]


@given(
    path=st.sampled_from(STRING_FIELDS),
    suffix=st.text(
        alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=300
    ),
)
def test_error_description_never_contains_the_value(path: tuple[str | int, ...], suffix: str) -> None:
    text = _description_with(path, MARK + suffix)
    assert MARK not in text
    # The suffix may occur in the message's own words (field names, allowed values: "Merg" is in
    # "'Merge'"); it must not occur more than in the message for another invalid value.
    assert suffix not in text or suffix in _description_with(path, MARK + "\x00")


def _description_with(path: tuple[str | int, ...], value: str) -> str:
    raw = body(copy.deepcopy({"target": {}}))
    node: Any = raw["spec"]
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    with pytest.raises(ValidationError) as info:
        models.SecretSync.from_body(raw)
    return models.describe_validation_error(info.value)


@pytest.mark.parametrize(
    "pairs",
    [
        [{"key": "team", "value": ""}],  # the service would drop it: the sync would take every secret
        [{"key": "team", "value": "a,b"}],
        [{"key": "te|am", "value": "a"}],
        [{"key": "team", "value": " a"}],  # the service trims: " a" would match "a"
        [{"key": f"k{i}", "value": "v"} for i in range(11)],  # the service answers 422 above 10
    ],
)
def test_metadata_filters_the_service_would_misread_are_refused(pairs: list[dict[str, str]]) -> None:
    spec = {
        "identityRef": {"name": "mi"},
        "sources": [{"projectId": "p1", "environment": "dev", "metadataFilter": pairs}],
    }
    with pytest.raises(ValidationError):
        models.SecretSync.model_validate(body(spec))


def test_ten_plain_metadata_filters_are_fine() -> None:
    pairs = [{"key": f"k{i}", "value": f"value {i}"} for i in range(10)]
    spec = {
        "identityRef": {"name": "mi"},
        "sources": [{"projectId": "p1", "environment": "dev", "metadataFilter": pairs}],
    }
    assert len(models.SecretSync.model_validate(body(spec)).spec.sources[0].metadata_filter) == 10

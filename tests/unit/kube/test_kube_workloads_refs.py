"""Which pod specs read a given Secret."""

from __future__ import annotations

from typing import Any

import pytest

from secretferry.kube import workloads


def _container(**fields: Any) -> dict[str, Any]:
    return {"name": "c", "image": "busybox", **fields}


ENV_REF = _container(env=[{"name": "A", "valueFrom": {"secretKeyRef": {"name": "app", "key": "a"}}}])
ENV_FROM = _container(envFrom=[{"secretRef": {"name": "app"}}])
SECRET_VOLUME = [{"name": "v", "secret": {"secretName": "app"}}]
PROJECTED = [
    {"name": "v", "projected": {"sources": [{"configMap": {"name": "app"}}, {"secret": {"name": "app"}}]}}
]


@pytest.mark.parametrize(
    ("pod_spec", "expected"),
    [
        ({}, False),
        ({"containers": [_container()]}, False),
        ({"containers": [ENV_REF]}, True),
        ({"initContainers": [ENV_REF], "containers": [_container()]}, True),
        ({"containers": [ENV_FROM]}, True),
        ({"initContainers": [ENV_FROM]}, True),
        ({"containers": [_container()], "volumes": SECRET_VOLUME}, True),
        ({"containers": [_container()], "volumes": PROJECTED}, True),
        # near misses: other Secrets, ConfigMaps of the same name, plain values
        ({"containers": [_container(env=[{"name": "A", "value": "app"}])]}, False),
        (
            {
                "containers": [
                    _container(
                        env=[{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "a"}}}]
                    )
                ]
            },
            False,
        ),
        ({"containers": [_container(envFrom=[{"configMapRef": {"name": "app"}}])]}, False),
        ({"containers": [_container(envFrom=[{"secretRef": {"name": "other"}}])]}, False),
        ({"volumes": [{"name": "v", "secret": {"secretName": "other"}}]}, False),
        ({"volumes": [{"name": "v", "configMap": {"name": "app"}}]}, False),
        ({"volumes": [{"name": "v", "projected": {"sources": [{"configMap": {"name": "app"}}]}}]}, False),
        ({"volumes": [{"name": "v", "emptyDir": {}}]}, False),
        # fields present but null, as a sloppy manifest may have them
        ({"containers": [_container(env=None, envFrom=None)], "volumes": None}, False),
    ],
)
def test_references_secret(pod_spec: dict[str, Any], expected: bool) -> None:
    assert workloads.references_secret(pod_spec, "app") is expected

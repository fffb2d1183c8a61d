"""End to end: key rewriting (spec.sources[].rewrite) against the real control plane and the dev
server: renamed keys land in the Secret, a collision stops the sync with KeyCollision and leaves
the Secret as it was, and the apiserver refuses a malformed rule at admission."""

from __future__ import annotations

import json

import harness
import pytest
from harness import PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

RULES = [
    {"from": "DB_PASSWORD", "to": "password"},
    {"stripPrefix": "APP_"},
    {"regexp": {"source": "-", "target": "_"}},
]


def test_rewrite_renames_and_a_collision_writes_nothing(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "DB_PASSWORD", "pw-rewrite-1")
    service.set_secret(PROJECT_ID, "dev", path, "APP_api-key", "ak-rewrite-1")
    service.set_secret(PROJECT_ID, "dev", path, "cache-url", "cu-rewrite-1")
    service.set_secret(PROJECT_ID, "dev", path, "SKIP_ME", "sk-rewrite-1")
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(
        control_plane,
        namespace,
        "app",
        # excludeKeys matches the name at the service, before the rules run
        sources=[source(path, excludeKeys=["SKIP_*"], rewrite=RULES)],
        refreshInterval="2s",
        instantUpdates=False,
    )
    want = {"password": "pw-rewrite-1", "api_key": "ak-rewrite-1", "cache_url": "cu-rewrite-1"}
    eventually(lambda: secret_data(control_plane, namespace, "app") == want, what="the renamed keys")
    harness.wait_reason(control_plane, namespace, "app", "Synced")
    status = (harness.get(control_plane, "secretsync", "app", namespace) or {})["status"]
    assert status["syncedKeys"] == ["api_key", "cache_url", "password"]
    before = harness.get(control_plane, "secret", "app", namespace) or {}

    # APP_cache_url strips to cache_url, which cache-url also becomes: two keys, one name.
    service.set_secret(PROJECT_ID, "dev", path, "APP_cache_url", "cu-rewrite-2")
    service.set_secret(PROJECT_ID, "dev", path, "DB_PASSWORD", "pw-rewrite-2")
    cond = harness.wait_reason(control_plane, namespace, "app", "KeyCollision")
    assert cond["status"] == "False"
    assert "both APP_cache_url and cache-url to cache_url" in cond["message"]
    assert "spec.sources[0].rewrite" in cond["message"]
    after = harness.get(control_plane, "secret", "app", namespace) or {}
    assert secret_data(control_plane, namespace, "app") == want  # not even the new password
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

    # Dropping one of the two keys heals it.
    harness.secret_sync(
        control_plane,
        namespace,
        "app",
        sources=[source(path, excludeKeys=["SKIP_*", "APP_cache_url"], rewrite=RULES)],
        refreshInterval="2s",
        instantUpdates=False,
    )
    eventually(
        lambda: (secret_data(control_plane, namespace, "app") or {}).get("password") == "pw-rewrite-2",
        what="the sync after the collision is resolved",
    )
    harness.wait_reason(control_plane, namespace, "app", "Synced")


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ({"addPrefix": "A", "stripPrefix": "B"}, "set exactly one of regexp"),
        ({"from": "A"}, "set exactly one of regexp"),
        ({"transform": "Title"}, "Unsupported value"),
    ],
)
def test_malformed_rule_refused_at_admission(
    control_plane: ControlPlane, crds: None, namespace: str, rule: dict[str, object], says: str
) -> None:
    proc = control_plane.kubectl_run(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "secretferry.io/v1alpha1",
                "kind": "SecretSync",
                "metadata": {"name": "bad", "namespace": namespace},
                "spec": {"identityRef": {"name": "ferry"}, "sources": [source("/", rewrite=[rule])]},
            }
        ),
    )
    assert proc.returncode != 0 and says in proc.stderr, proc.stderr


def test_bad_regexp_is_invalid_spec_naming_the_field(
    control_plane: ControlPlane, operator: OperatorProcess, namespace: str
) -> None:
    harness.kubernetes_identity(control_plane, namespace)
    harness.secret_sync(
        control_plane,
        namespace,
        "backref",
        sources=[source(f"/{namespace}", rewrite=[{"regexp": {"source": r"(a)\1", "target": "b"}}])],
    )
    cond = harness.wait_reason(control_plane, namespace, "backref", "InvalidSpec")
    assert "spec.sources[0].rewrite[0].regexp.source: not a valid RE2 regexp" in cond["message"]
    assert harness.get(control_plane, "secret", "backref", namespace) is None

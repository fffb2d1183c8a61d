"""A type change never loses the Secret (issue 20, item 4), on the real apiserver.

A Secret's type is immutable, so a change is a delete and a create. Each case below was refused
by the apiserver *after* the delete before: the Secret was gone for good. Now the operator refuses
it first, with a named reason, and the old Secret stays exactly as it was (same uid, type, data).
The first three are the apiserver's own type rules, which desired.py now mirrors; a data key
``..data`` is its key rule; the label value is a refusal only the apiserver knows about, caught by
the server-side dry run (kube/objects.validate_create) before the delete.
"""

from __future__ import annotations

import time
from typing import Any

import harness
import pytest
from harness import PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

# The test operator retries after at most 3 s (SECRETFERRY_BACKOFF_MAX_SECONDS): a little longer
# lets a retry pass before "kept" is judged.
SETTLE_SECONDS = 4.0
KEY = "id_rsa-material-value-1"


def snapshot(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    obj = harness.get(cp, "secret", name, namespace)
    assert obj is not None, f"Secret {namespace}/{name} is missing"
    return {"uid": obj["metadata"]["uid"], "type": obj.get("type"), "data": obj.get("data") or {}}


CASES = [
    pytest.param(
        {"type": "kubernetes.io/ssh-auth", "template": {"data": {"ssh-privatekey": ""}}},
        "InvalidSecretType",
        "needs a non-empty ssh-privatekey",
        id="ssh-auth-empty-key",
    ),
    pytest.param(
        {
            "type": "kubernetes.io/dockerconfigjson",
            "template": {"data": {".dockerconfigjson": '{"auths": {"r": {"auth": NaN}}}'}},
        },
        "InvalidSecretType",
        "no NaN or Infinity",
        id="dockerconfigjson-NaN",
    ),
    pytest.param(
        {"type": "kubernetes.io/dockercfg", "template": {"data": {".dockercfg": '{"r": Infinity}'}}},
        "InvalidSecretType",
        "no NaN or Infinity",
        id="dockercfg-Infinity",
    ),
    pytest.param(
        {"type": "example.com/legacy", "template": {"data": {"KEY": "{{ KEY }}"}, "includeAll": True}},
        "InvalidKey",
        "..data",
        id="key-starting-with-dotdot",
    ),
    pytest.param(
        {"type": "example.com/legacy", "labels": {"team": "not a label value!"}},
        "KubernetesError",
        "metadata.labels: FieldValueInvalid",
        id="refused-only-by-the-apiserver",
    ),
]


@pytest.mark.parametrize(("change", "reason", "message"), CASES)
def test_a_type_change_the_apiserver_would_refuse_keeps_the_old_secret(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    change: dict[str, Any],
    reason: str,
    message: str,
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "KEY", KEY)
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    first = {"template": {"data": {"KEY": "{{ KEY }}"}}}
    harness.secret_sync(control_plane, namespace, "retype", sources=[source(path)], target=first)
    eventually(lambda: secret_data(control_plane, namespace, "retype") == {"KEY": KEY}, what="the first sync")
    before = snapshot(control_plane, namespace, "retype")
    assert before["type"] == "Opaque"
    if reason == "InvalidKey":
        service.set_secret(PROJECT_ID, "dev", path, "..data", "dotdot-value-1")

    harness.secret_sync(control_plane, namespace, "retype", sources=[source(path)], target=change)

    cond = harness.wait_reason(control_plane, namespace, "retype", reason)
    assert cond["status"] == "False"
    assert message in cond["message"], cond["message"]
    if reason == "KubernetesError":
        assert "was kept as it is (type Opaque, its data untouched)" in cond["message"]
        assert "not a label value" not in cond["message"]  # fields only, never the apiserver's text
    time.sleep(SETTLE_SECONDS)
    assert snapshot(control_plane, namespace, "retype") == before


def test_a_valid_type_change_still_replaces_the_secret(
    control_plane: ControlPlane, operator: OperatorProcess, service: DevServer, namespace: str
) -> None:
    """The dry run passes what the apiserver accepts: the Secret is replaced, its data kept."""
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "KEY", KEY)
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    target = {"template": {"data": {"ssh-privatekey": "{{ KEY }}"}}}
    harness.secret_sync(control_plane, namespace, "retype", sources=[source(path)], target=target)
    eventually(
        lambda: secret_data(control_plane, namespace, "retype") == {"ssh-privatekey": KEY},
        what="the first sync",
    )
    before = snapshot(control_plane, namespace, "retype")

    retyped = {**target, "type": "kubernetes.io/ssh-auth"}
    harness.secret_sync(control_plane, namespace, "retype", sources=[source(path)], target=retyped)

    eventually(
        lambda: (
            (harness.get(control_plane, "secret", "retype", namespace) or {}).get("type")
            == "kubernetes.io/ssh-auth"
        ),
        what="the Secret replaced with the new type",
    )
    after = snapshot(control_plane, namespace, "retype")
    assert after["uid"] != before["uid"] and after["data"] == before["data"]
    assert harness.wait_reason(control_plane, namespace, "retype", "Synced")["status"] == "True"
    # The dry run's generated name was never stored.
    names = control_plane.kubectl("get", "secrets", "-n", namespace, "-o", "name").split()
    assert [n for n in names if n.startswith("secret/retype")] == ["secret/retype"]

"""The Lease holder identity: every replica must have its own, host network or not."""

from __future__ import annotations

import pytest

from secretferry import settings as settings_mod
from secretferry.handlers import operator


@pytest.mark.parametrize(
    ("pod_name", "env", "expected"),
    [
        # hostNetwork: HOSTNAME is the node's and the same for both replicas; the pod name wins.
        ("ferry-7d9-abcde", {"HOSTNAME": "node-1"}, "ferry-7d9-abcde"),
        ("", {"HOSTNAME": "ferry-7d9-fghij"}, "ferry-7d9-fghij"),  # an older chart: pod network
    ],
)
def test_the_pod_name_is_the_lease_identity(pod_name: str, env: dict[str, str], expected: str) -> None:
    cfg = settings_mod.Settings(pod_name=pod_name)
    assert operator.instance_name(cfg, env) == expected

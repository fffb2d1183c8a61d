"""The tenant harness itself: the tenant has exactly a namespace user's rights, and the listener
records what reaches it (the tenant-proof tests rely on both)."""

from __future__ import annotations

import urllib.request

import pytest
import tenant

pytestmark = pytest.mark.integration


def test_the_tenant_can_create_our_kinds_and_nothing_else(hostile: tenant.Tenant) -> None:
    assert hostile.can("create", "machineidentities.secretferry.io")
    assert hostile.can("update", "secretsyncs.secretferry.io")
    for verb, resource in (("get", "secrets"), ("create", "pods"), ("create", "serviceaccounts/token")):
        assert not hostile.can(verb, resource), (verb, resource)
    with pytest.raises(RuntimeError, match="Forbidden"):
        hostile.kubectl("get", "secrets")


def test_the_listener_records_requests() -> None:
    with tenant.listening() as spy:
        request = urllib.request.Request(spy.url + "/api/v1/auth/x", data=b"jwt=abc", method="POST")
        with urllib.request.urlopen(request, timeout=5) as answer:
            assert answer.status == 200
    assert spy.received[0].path == "/api/v1/auth/x"
    assert "jwt=abc" in spy.text()

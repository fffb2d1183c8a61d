"""Contract: transport and server failures map to the documented error classes (fault injection)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from contract_support import PROJECT, client, dev_server

from secretferry.devserver.testing import DevServer, free_port
from secretferry.service import errors
from secretferry.service.client import ServiceClient
from secretferry.service.events import SECRET_CREATE, EventRegistration
from secretferry.service.models import ListSecretsQuery, SecretList

pytestmark = pytest.mark.integration

DEV_ROOT = ListSecretsQuery(project_id=PROJECT, environment="dev")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with dev_server(tmp_path_factory) as running:
        yield running


@pytest.fixture
def faults(server: DevServer) -> Iterator[Any]:
    """``faults(route_fault, ...)`` installs route faults; they are always cleared afterwards."""

    def install(*routes: dict[str, Any]) -> None:
        server.set_faults({"routes": list(routes)})

    try:
        yield install
    finally:
        server.clear_faults()


async def test_500_is_unavailable(server: DevServer, faults: Any) -> None:
    faults({"match": "GET /api/v4/secrets", "status": 500})
    async with client(server) as service:
        with pytest.raises(errors.Unavailable) as failed:
            await service.list_secrets(DEV_ROOT)
        assert failed.value.status_code == 500 and failed.value.is_retriable
        assert not isinstance(failed.value, errors.RateLimited)
        assert failed.value.req_id  # the service's reqId is kept for support requests
        # Only the faulted route fails.
        assert (await service.get_project_by_slug("contract-app")).id == PROJECT
        server.clear_faults()
        assert isinstance(await service.list_secrets(DEV_ROOT), SecretList)


async def test_429_is_rate_limited_with_retry_after(server: DevServer, faults: Any) -> None:
    faults({"match": "*", "status": 429, "retryAfter": 7})
    async with client(server) as service:
        with pytest.raises(errors.RateLimited) as limited:
            await service.list_secrets(DEV_ROOT)
        assert limited.value.retry_after == 7
        assert limited.value.status_code == 429 and limited.value.is_retriable
        assert not isinstance(limited.value, errors.StreamLimitReached)
        with pytest.raises(errors.RateLimited) as on_write:
            await service.create_folder(project_id=PROJECT, environment="dev", name="limited")
        assert on_write.value.retry_after == 7


async def test_malformed_json_is_protocol_error(server: DevServer, faults: Any) -> None:
    faults({"match": "GET /api/v4/secrets", "malformed": "json"})
    async with client(server) as service:
        with pytest.raises(errors.ProtocolError) as broken:
            await service.list_secrets(DEV_ROOT)
    assert broken.value.status_code == 200
    assert "not valid JSON" in str(broken.value)


async def test_wrong_content_type_is_protocol_error(server: DevServer, faults: Any) -> None:
    faults({"match": "GET /api/v1/projects/slug/*", "malformed": "content-type"})
    async with client(server) as service:
        with pytest.raises(errors.ProtocolError) as html:
            await service.get_project_by_slug("contract-app")
    assert "text/html" in str(html.value)


async def test_subscribe_answered_with_html_is_protocol_error(server: DevServer, faults: Any) -> None:
    faults({"match": "POST /api/v1/events/subscribe/*", "malformed": "content-type"})
    async with client(server) as service:
        with pytest.raises(errors.ProtocolError) as html:
            async with service.subscribe_project_events(PROJECT, [EventRegistration(SECRET_CREATE)]):
                pytest.fail("an HTML answer was taken for a stream")
    assert "text/event-stream" in str(html.value)


async def test_fault_with_times_heals_itself(server: DevServer, faults: Any) -> None:
    faults({"match": "GET /api/v4/secrets", "status": 503, "times": 1})
    async with client(server) as service:
        with pytest.raises(errors.Unavailable) as once:
            await service.list_secrets(DEV_ROOT)
        assert once.value.status_code == 503
        assert isinstance(await service.list_secrets(DEV_ROOT), SecretList)


async def test_slow_answer_is_unavailable(server: DevServer, faults: Any) -> None:
    faults({"match": "GET /api/v4/secrets", "latencyMs": 1500})
    async with client(server, timeout=0.3) as service:
        with pytest.raises(errors.Unavailable) as slow:
            await service.list_secrets(DEV_ROOT)
    assert "timed out" in str(slow.value)


async def test_unreachable_service_is_unavailable() -> None:
    async with ServiceClient(f"http://127.0.0.1:{free_port()}", access_token="t") as service:
        with pytest.raises(errors.Unavailable) as refused:
            await service.list_secrets(DEV_ROOT)
    assert refused.value.status_code is None
    assert "connection failed" in str(refused.value)

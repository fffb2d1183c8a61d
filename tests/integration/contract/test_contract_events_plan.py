"""Contract: a plan without event subscriptions refuses every subscription (400 → PlanNotSupported)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from contract_support import PROJECT, client, dev_server, request_count

from secretferry.devserver.testing import DevServer
from secretferry.service import errors
from secretferry.service.events import SECRET_CREATE, EventRegistration
from secretferry.service.models import ListSecretsQuery, SecretList

pytestmark = pytest.mark.integration

SUBSCRIBE = "POST /api/v1/events/subscribe/project-events"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with dev_server(tmp_path_factory, "--no-events-plan") as running:
        yield running


async def test_plan_without_events_is_plan_not_supported(server: DevServer) -> None:
    async with client(server) as service:
        with pytest.raises(errors.PlanNotSupported) as refused:
            async with service.subscribe_project_events(
                PROJECT, [EventRegistration(SECRET_CREATE, "dev", "/")]
            ):
                pytest.fail("a stream was opened without the plan")
        assert refused.value.status_code == 400
        assert isinstance(refused.value, errors.ValidationError)
        assert "plan" in str(refused.value).lower()
        assert request_count(server, SUBSCRIBE) == 1
        # Polling is the fallback: listing still works on this plan.
        assert isinstance(
            await service.list_secrets(ListSecretsQuery(project_id=PROJECT, environment="dev")), SecretList
        )

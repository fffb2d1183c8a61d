"""Contract: the real server's event envelope (middle generation) and the old generation's bare
``1`` keep-alive, both parsed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from contract_support import HEARTBEAT_SECONDS, PROJECT, client, collect, dev_server, next_event

from secretferry.devserver.testing import DevServer
from secretferry.service.events import (
    SECRET_CREATE,
    SECRET_DELETE,
    SECRET_IMPORT_MUTATION,
    SECRET_UPDATE,
    EventItem,
    EventRegistration,
    Heartbeat,
    SecretEvent,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with dev_server(
        tmp_path_factory, "--event-generation", "middle", "--heartbeat-seconds", str(HEARTBEAT_SECONDS)
    ) as running:
        yield running


@pytest.fixture(scope="module")
def old_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """Only the old generation writes the bare ``1``."""
    with dev_server(
        tmp_path_factory, "--event-generation", "old", "--heartbeat-seconds", str(HEARTBEAT_SECONDS)
    ) as running:
        yield running


async def test_legacy_bare_1_keepalive_is_a_heartbeat(old_server: DevServer) -> None:
    async with (
        client(old_server) as service,
        # The oldest servers require conditions with both an environment and a path.
        service.subscribe_project_events(
            PROJECT, [EventRegistration(SECRET_CREATE, "dev", "/**")]
        ) as messages,
    ):
        seen = await collect(messages, 4 * HEARTBEAT_SECONDS + 0.2)
    assert len(seen) >= 2  # about four are due; slack for a busy machine
    assert all(isinstance(m, Heartbeat) for m in seen)


async def test_old_audit_named_events_reach_the_client_as_changes(old_server: DevServer) -> None:
    registrations = [EventRegistration(SECRET_CREATE, "dev", "/old-gen/**")]
    async with (
        client(old_server) as service,
        service.subscribe_project_events(PROJECT, registrations) as messages,
    ):
        created = old_server.set_secret(PROJECT, "dev", "/old-gen/a", "AUDITED", "1")["secret"]
        old_server.set_secret(PROJECT, "dev", "/old-gen/a", "AUDITED", "2")
        received = [await next_event(messages) for _ in range(2)]
    item = EventItem("dev", "/old-gen/a", "AUDITED", secret_id=created["id"])
    # The old server filters by path only: the update arrives although only creates were asked for.
    assert received == [SecretEvent(SECRET_CREATE, (item,)), SecretEvent(SECRET_UPDATE, (item,))]


async def test_envelope_create_update_delete(server: DevServer) -> None:
    registrations = [
        EventRegistration(kind, "dev", "/envelope") for kind in (SECRET_CREATE, SECRET_UPDATE, SECRET_DELETE)
    ]
    async with (
        client(server) as service,
        service.subscribe_project_events(PROJECT, registrations) as messages,
    ):
        created = server.set_secret(PROJECT, "dev", "/envelope", "WRAPPED", "1")["secret"]
        server.set_secret(PROJECT, "dev", "/envelope", "WRAPPED", "2")
        server.delete_secret(PROJECT, "dev", "/envelope", "WRAPPED")
        received = [await next_event(messages) for _ in range(3)]
    item = EventItem("dev", "/envelope", "WRAPPED", secret_id=created["id"])  # the envelope names the id
    assert received == [
        SecretEvent(SECRET_CREATE, (item,)),
        SecretEvent(SECRET_UPDATE, (item,)),
        SecretEvent(SECRET_DELETE, (item,)),
    ]


async def test_envelope_import_mutation(server: DevServer) -> None:
    registrations = [EventRegistration(SECRET_IMPORT_MUTATION, "dev", "/")]
    async with (
        client(server) as service,
        service.subscribe_project_events(PROJECT, registrations) as messages,
    ):
        server.set_secret(PROJECT, "staging", "/common", "COMMON", "changed")  # dev / imports staging /common
        event = await next_event(messages)
    assert event == SecretEvent(SECRET_IMPORT_MUTATION, (EventItem("dev", "/"),))

"""Contract: event subscriptions through ``subscribe_project_events`` (documented message shape).

Filters are checked by ordering: a change the filter must drop is made first, then one it must
pass; the first event read has to be the second change (events are delivered in order).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest
from contract_support import (
    ADMIN_TOKEN,
    EVENT_TIMEOUT_SECONDS,
    EVENTS_CAP,
    EVENTS_RECHECK,
    HEARTBEAT_SECONDS,
    IMPORT_EDITABLE,
    LIMITED_TOKEN,
    PROJECT,
    RECHECK_SECONDS,
    client,
    collect,
    dev_server,
    next_event,
)

from secretferry.devserver.testing import DevServer
from secretferry.service import errors
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

ALL_KINDS = (SECRET_CREATE, SECRET_UPDATE, SECRET_DELETE)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with dev_server(
        tmp_path_factory,
        "--heartbeat-seconds",
        str(HEARTBEAT_SECONDS),
        "--recheck-seconds",
        str(RECHECK_SECONDS),
        # This module pins the seed's documented shape and its glob filter; the real generations
        # are covered in test_contract_events_envelope.py and the operator's streaming suite.
        "--event-generation",
        "documented",
    ) as running:
        yield running


def regs(*kinds: str, env: str | None = None, path: str | None = None) -> list[EventRegistration]:
    return [EventRegistration(kind, environment_slug=env, secret_path=path) for kind in kinds]


async def test_heartbeats_arrive_on_a_quiet_stream(server: DevServer) -> None:
    async with (
        client(server) as service,
        service.subscribe_project_events(PROJECT, regs(SECRET_CREATE)) as messages,
    ):
        seen = await collect(messages, 4 * HEARTBEAT_SECONDS + 0.2)
    assert len(seen) >= 2  # about four are due; slack for a busy machine
    assert all(isinstance(m, Heartbeat) for m in seen)


async def test_environment_filter(server: DevServer) -> None:
    async with (
        client(server) as service,
        service.subscribe_project_events(PROJECT, regs(*ALL_KINDS, env="dev")) as messages,
    ):
        server.set_secret(PROJECT, "prod", "/env-filter", "OTHER_ENV", "x")  # filtered out
        server.set_secret(PROJECT, "dev", "/env-filter", "SAME_ENV", "x")
        event = await next_event(messages)
    assert event == SecretEvent(SECRET_CREATE, (EventItem("dev", "/env-filter", "SAME_ENV"),))


async def test_event_kind_filter(server: DevServer) -> None:
    server.set_secret(PROJECT, "dev", "/kinds", "EXISTING", "1")
    async with (
        client(server) as service,
        service.subscribe_project_events(PROJECT, regs(SECRET_DELETE, env="dev")) as messages,
    ):
        server.set_secret(PROJECT, "dev", "/kinds", "EXISTING", "2")  # an update: not registered
        server.set_secret(PROJECT, "dev", "/kinds", "NEW", "1")  # a create: not registered
        server.delete_secret(PROJECT, "dev", "/kinds", "EXISTING")
        event = await next_event(messages)
    assert event == SecretEvent(SECRET_DELETE, (EventItem("dev", "/kinds", "EXISTING"),))


async def test_exact_path_filter(server: DevServer) -> None:
    registrations = regs(*ALL_KINDS, env="dev", path="/exact")
    async with (
        client(server) as service,
        service.subscribe_project_events(PROJECT, registrations) as messages,
    ):
        server.set_secret(PROJECT, "dev", "/exact/below", "BELOW", "x")  # a subfolder: not exact
        server.set_secret(PROJECT, "dev", "/", "ABOVE", "x")
        server.set_secret(PROJECT, "dev", "/exactly", "PREFIX", "x")
        server.set_secret(PROJECT, "dev", "/exact", "HIT", "x")
        event = await next_event(messages)
    assert event == SecretEvent(SECRET_CREATE, (EventItem("dev", "/exact", "HIT"),))


async def test_subtree_filter(server: DevServer) -> None:
    registrations = regs(*ALL_KINDS, env="dev", path="/x/**")
    async with (
        client(server) as service,
        service.subscribe_project_events(PROJECT, registrations) as messages,
    ):
        server.set_secret(PROJECT, "dev", "/y", "OUTSIDE", "x")
        server.set_secret(PROJECT, "dev", "/xylophone", "PREFIX_ONLY", "x")
        server.set_secret(PROJECT, "prod", "/x/a", "OTHER_ENV", "x")
        server.set_secret(PROJECT, "dev", "/x/a/b", "DEEP", "x")
        server.set_secret(PROJECT, "dev", "/y/x", "OUTSIDE_AGAIN", "x")
        server.set_secret(PROJECT, "dev", "/x", "ROOT_OF_SUBTREE", "x")
        first = await next_event(messages)
        second = await next_event(messages)
    assert first == SecretEvent(SECRET_CREATE, (EventItem("dev", "/x/a/b", "DEEP"),))
    assert second == SecretEvent(SECRET_CREATE, (EventItem("dev", "/x", "ROOT_OF_SUBTREE"),))


async def test_documented_shape_create_update_delete_via_client_writes(server: DevServer) -> None:
    where = {"project_id": PROJECT, "environment": "dev", "secret_path": "/shape"}
    registrations = regs(*ALL_KINDS, env="dev", path="/shape")
    async with (
        client(server) as service,
        service.subscribe_project_events(PROJECT, registrations) as messages,
    ):
        await service.create_secret("SHAPED", value="1", **where)
        await service.update_secret("SHAPED", value="2", **where)
        await service.delete_secrets_batch(
            project_id=PROJECT, environment="dev", secret_path="/shape", secrets=[("SHAPED", "shared")]
        )
        received = [await next_event(messages) for _ in range(3)]
    item = EventItem("dev", "/shape", "SHAPED")  # the documented shape carries no secretId
    assert received == [
        SecretEvent(SECRET_CREATE, (item,)),
        SecretEvent(SECRET_UPDATE, (item,)),
        SecretEvent(SECRET_DELETE, (item,)),
    ]


async def test_import_mutation_for_a_change_reachable_through_an_import(server: DevServer) -> None:
    registrations = regs(SECRET_IMPORT_MUTATION, env="dev", path="/")
    async with (
        client(server) as service,
        service.subscribe_project_events(PROJECT, registrations) as messages,
    ):
        server.set_secret(PROJECT, "prod", "/unimported", "NOT_REACHABLE", "x")
        server.set_secret(PROJECT, "prod", "/shared", "SENTRY_DSN", "https://s.example/2")  # dev / imports it
        event = await next_event(messages)
    assert event == SecretEvent(SECRET_IMPORT_MUTATION, (EventItem("dev", "/"),))
    assert event.items[0].secret_key is None


async def test_import_update_emits_import_mutation(server: DevServer) -> None:
    registrations = regs(SECRET_IMPORT_MUTATION, env="staging", path="/importer")
    async with (
        client(server) as service,
        service.subscribe_project_events(PROJECT, registrations) as messages,
    ):
        await service.update_secret_import(
            IMPORT_EDITABLE,
            project_id=PROJECT,
            environment="staging",
            path="/importer",
            import_path="/backend/deep",
        )
        event = await next_event(messages)
    assert event == SecretEvent(SECRET_IMPORT_MUTATION, (EventItem("staging", "/importer"),))


async def test_token_recheck_failure_raises_stream_error(server: DevServer) -> None:
    token = server.issue_token(EVENTS_RECHECK)
    async with (
        client(server, token=token) as service,
        service.subscribe_project_events(PROJECT, regs(SECRET_CREATE)) as messages,
    ):
        first = await anext(messages)  # alive: a heartbeat (or a re-check that passed)
        assert isinstance(first, Heartbeat)
        assert server.expire_tokens(EVENTS_RECHECK) >= 1
        with pytest.raises(errors.StreamError) as closed:
            async with asyncio.timeout(10 * RECHECK_SECONDS):
                async for message in messages:
                    assert isinstance(message, Heartbeat)
    assert isinstance(closed.value, errors.AuthenticationError)  # i.e. "log in again"
    assert "expired" in str(closed.value)


async def test_sixth_stream_for_same_project_and_identity_is_refused(server: DevServer) -> None:
    token = server.issue_token(EVENTS_CAP)
    async with client(server, token=token) as service, contextlib.AsyncExitStack() as streams:
        for _ in range(5):
            await streams.enter_async_context(service.subscribe_project_events(PROJECT, regs(SECRET_CREATE)))
        with pytest.raises(errors.StreamLimitReached) as capped:
            async with service.subscribe_project_events(PROJECT, regs(SECRET_CREATE)):
                pytest.fail("a sixth stream was opened")
        assert capped.value.status_code == 429 and capped.value.retry_after == 60
        assert isinstance(capped.value, errors.RateLimited)
        # The cap is per identity: another identity still gets a stream on the same project.
        async with (
            client(server, token=ADMIN_TOKEN) as admin,
            admin.subscribe_project_events(PROJECT, regs(SECRET_CREATE)) as messages,
        ):
            assert isinstance(await anext(messages), Heartbeat)
    # Closed streams stop counting: once the server notices the disconnects, a new one opens.
    async with client(server, token=token) as service:
        async with asyncio.timeout(EVENT_TIMEOUT_SECONDS):
            while True:
                try:
                    async with service.subscribe_project_events(PROJECT, regs(SECRET_CREATE)) as messages:
                        assert isinstance(await anext(messages), Heartbeat)
                        break
                except errors.StreamLimitReached:
                    await asyncio.sleep(HEARTBEAT_SECONDS)


async def test_subscribe_needs_secret_events_permission(server: DevServer) -> None:
    async with client(server, token=LIMITED_TOKEN) as limited:
        with pytest.raises(errors.PermissionDenied) as denied:
            async with limited.subscribe_project_events(PROJECT, regs(SECRET_UPDATE, env="dev", path="/")):
                pytest.fail("subscribed outside the grant")
        assert denied.value.details == [
            {
                "action": "subscribe-on-updated",
                "subject": "secret-events",
                "conditions": {"environment": "dev", "secretPath": "/"},
            }
        ]
        inside = regs(SECRET_UPDATE, env="dev", path="/backend/**")
        async with limited.subscribe_project_events(PROJECT, inside) as messages:
            server.set_secret(PROJECT, "dev", "/backend", "API_KEY", "key-456")
            event = await next_event(messages)
    assert event.event_type == SECRET_UPDATE and event.items == (EventItem("dev", "/backend", "API_KEY"),)


async def test_register_is_checked_client_side(server: DevServer) -> None:
    async with client(server) as service:
        for register, field in (
            ([], "register"),
            (regs(SECRET_CREATE) * 11, "register"),
            (regs(""), "register.event"),
        ):
            with pytest.raises(errors.ValidationError) as refused:
                async with service.subscribe_project_events(PROJECT, register):
                    pass
            assert refused.value.field == field

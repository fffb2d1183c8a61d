"""subscribe_project_events over httpx.MockTransport: refusals, framing, mid-stream failures."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from secretferry.service import client, errors, events

BASE = "https://sf.example"
TOKEN = "tok-secret-123"
PATH = "/api/v1/events/subscribe/project-events"
REGISTER = [
    events.EventRegistration("secret:update", "dev", "/app/**"),
    events.EventRegistration("secret:import-mutation", "dev", "/"),
]
DOCUMENTED = {
    "projectType": "secret-manager",
    "data": {
        "eventType": "secret:delete",
        "payload": [{"environment": "dev", "secretPath": "/app", "secretKey": "A"}],
    },
}
REAL = {
    "type": "secret-manager",
    "source": "infisical",
    "time": "2025-01-01T00:00:00Z",
    "datacontenttype": "application/json",
    "data": {
        "specversion": "1.0",
        "event": "secret:import-mutation",
        "payload": {"environment": "dev", "secretPath": "/"},
    },
}
SSE = {"content-type": "text/event-stream; charset=utf-8"}


def sse(*chunks: bytes, fail: Exception | None = None) -> httpx.Response:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk
        if fail is not None:
            raise fail

    return httpx.Response(200, headers=SSE, content=body())


def make(response: httpx.Response, seen: list[httpx.Request]) -> client.ServiceClient:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return response

    return client.ServiceClient(BASE, access_token=TOKEN, transport=httpx.MockTransport(handler))


async def collect(
    service: client.ServiceClient, register: list[events.EventRegistration] = REGISTER
) -> list[Any]:
    async with service, service.subscribe_project_events("proj-id", register) as stream:
        return [message async for message in stream]


async def test_request_shape_and_both_message_shapes() -> None:
    seen: list[httpx.Request] = []
    response = sse(
        b"event: ping\n\n",
        b"1\n",
        b": comment\n",
        f"data: {json.dumps(DOCUMENTED)}\n\n".encode(),
        f"event: secret-manager\ndata: {json.dumps(REAL)}\n\n".encode(),
        b"event: something-else\ndata: {}\n\n",
    )
    messages = await collect(make(response, seen))
    assert messages == [
        events.Heartbeat(),
        events.Heartbeat(),
        events.Heartbeat(),
        events.SecretEvent("secret:delete", (events.EventItem("dev", "/app", "A"),)),
        events.SecretEvent("secret:import-mutation", (events.EventItem("dev", "/"),)),
        events.SecretEvent(events.UNKNOWN_CHANGE),
    ]
    request = seen[0]
    assert (request.method, request.url.path) == ("POST", PATH)
    assert json.loads(request.content) == {
        "projectId": "proj-id",
        "register": [
            {
                "event": "secret:update",
                "subject": "secrets",
                "action": "subscribe",
                "conditions": {"environmentSlug": "dev", "secretPath": "/app/**"},
            },
            {
                "event": "secret:import-mutation",
                "subject": "secrets",
                "action": "subscribe",
                "conditions": {"environmentSlug": "dev", "secretPath": "/"},
            },
        ],
    }
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    timeout = request.extensions["timeout"]
    assert timeout["read"] == 60.0
    assert timeout["connect"] == 5.0


@pytest.mark.parametrize(
    ("status", "body", "headers", "cls"),
    [
        (
            400,
            {"statusCode": 400, "message": "Your current plan does not support event subscriptions"},
            {},
            errors.PlanNotSupported,
        ),
        (
            429,
            {"statusCode": 429, "message": "Too many open streams"},
            {"retry-after": "30"},
            errors.StreamLimitReached,
        ),
        (429, {"statusCode": 429, "message": "Too many open streams"}, {}, errors.StreamLimitReached),
        (
            403,
            {"statusCode": 403, "message": "no Secret Events", "details": [{"event": "secret:update"}]},
            {},
            errors.PermissionDenied,
        ),
        (
            403,
            {"statusCode": 403, "error": "TokenError", "message": "expired"},
            {},
            errors.AuthenticationError,
        ),
        (401, {"statusCode": 401, "message": "Token missing"}, {}, errors.AuthenticationError),
        (422, {"statusCode": 422, "message": ["register: too many"]}, {}, errors.ValidationError),
        (500, {"statusCode": 500, "message": "Something went wrong"}, {}, errors.Unavailable),
    ],
)
async def test_refusals_before_the_stream(
    status: int, body: dict[str, Any], headers: dict[str, str], cls: type[errors.ServiceError]
) -> None:
    seen: list[httpx.Request] = []
    service = make(httpx.Response(status, json=body, headers=headers), seen)
    with pytest.raises(cls) as info:
        await collect(service)
    assert type(info.value) is cls
    assert info.value.status_code == status
    if cls is errors.StreamLimitReached:
        assert isinstance(info.value, errors.StreamLimitReached)
        assert info.value.retry_after == (30.0 if headers else 60.0)
    if cls is errors.PermissionDenied:
        assert isinstance(info.value, errors.PermissionDenied)
        assert info.value.details == [{"event": "secret:update"}]


async def test_wrong_content_type_is_a_protocol_error() -> None:
    with pytest.raises(errors.ProtocolError, match="text/event-stream"):
        await collect(make(httpx.Response(200, json={"ok": True}), []))


async def test_error_event_raises_stream_error() -> None:
    response = sse(
        b"event: ping\n\n", b'event: error\ndata: {"message": "Token expired", "error": "TokenError"}\n\n'
    )
    received: list[events.StreamMessage] = []
    service = make(response, [])
    with pytest.raises(errors.StreamError, match="Token expired"):
        async with service, service.subscribe_project_events("proj-id", REGISTER) as stream:
            async for message in stream:
                received.append(message)
    assert received == [events.Heartbeat()]


@pytest.mark.parametrize(
    "failure",
    [
        httpx.ReadTimeout("no bytes for 60 s"),
        httpx.RemoteProtocolError("peer closed"),
        httpx.ReadError("reset"),
    ],
)
async def test_mid_stream_failures_are_unavailable(failure: Exception) -> None:
    with pytest.raises(errors.Unavailable) as info:
        await collect(make(sse(b"event: ping\n\n", fail=failure), []))
    assert info.value.__cause__ is failure
    assert "(stream)" in str(info.value)


async def test_connect_failure_is_unavailable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    service = client.ServiceClient(BASE, access_token=TOKEN, transport=httpx.MockTransport(refuse))
    with pytest.raises(errors.Unavailable):
        await collect(service)


async def test_leaving_early_closes_cleanly() -> None:
    service = make(sse(b"event: ping\n\n", b"event: ping\n\n", b"event: ping\n\n"), [])
    async with service, service.subscribe_project_events("proj-id", REGISTER) as stream:
        async for message in stream:
            assert message == events.Heartbeat()
            break


@pytest.mark.parametrize(
    ("project_id", "register", "field"),
    [
        ("proj-id", [], "register"),
        ("proj-id", [events.EventRegistration("secret:update")] * 11, "register"),
        ("", REGISTER, "projectId"),
        ("proj-id", [events.EventRegistration("")], "register.event"),
    ],
)
async def test_validation_before_subscribing(
    project_id: str, register: list[events.EventRegistration], field: str
) -> None:
    seen: list[httpx.Request] = []
    service = make(sse(), seen)
    with pytest.raises(errors.ValidationError) as info:
        async with service, service.subscribe_project_events(project_id, register):
            pass
    assert info.value.field == field
    assert seen == []


async def test_ten_registrations_are_fine() -> None:
    seen: list[httpx.Request] = []
    await collect(make(sse(b": hi\n"), seen), [events.EventRegistration("secret:update")] * 10)
    assert len(json.loads(seen[0].content)["register"]) == 10

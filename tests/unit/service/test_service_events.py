"""SSE parsing: both message shapes, every keep-alive form, errors, unknown events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from secretferry.service import errors, events

DOCUMENTED = {
    "projectType": "secret-manager",
    "data": {
        "eventType": "secret:update",
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
        "event": "secret:create",
        "payload": [
            {"secretId": "id1", "secretKey": "A", "secretPath": "/", "environment": "dev"},
            {"secretId": "id2", "secretKey": "B", "secretPath": "/x", "environment": "prod", "extra": 1},
        ],
    },
}
IMPORT_OBJECT = {
    "projectType": "secret-manager",
    "data": {"eventType": "secret:import-mutation", "payload": {"environment": "dev", "secretPath": "/"}},
}
IMPORT_ARRAY = {
    "type": "secret-manager",
    "data": {"event": "secret:import-mutation", "payload": [{"environment": "dev", "secretPath": "/"}]},
}


@pytest.mark.parametrize(
    ("event_name", "data", "expected"),
    [
        ("message", DOCUMENTED, events.SecretEvent("secret:update", (events.EventItem("dev", "/app", "A"),))),
        (
            "secret-manager",
            REAL,
            events.SecretEvent(
                "secret:create",
                (events.EventItem("dev", "/", "A", "id1"), events.EventItem("prod", "/x", "B", "id2")),
            ),
        ),
        (
            "message",
            IMPORT_OBJECT,
            events.SecretEvent("secret:import-mutation", (events.EventItem("dev", "/"),)),
        ),
        (
            "secret-manager",
            IMPORT_ARRAY,
            events.SecretEvent("secret:import-mutation", (events.EventItem("dev", "/"),)),
        ),
        # the event kind only in the SSE event name
        (
            "secret:delete",
            {"data": {"payload": [{"environment": "e", "secretPath": "/"}]}},
            events.SecretEvent("secret:delete", (events.EventItem("e", "/"),)),
        ),
        # unusable items are dropped, the nudge is kept
        (
            "message",
            {"data": {"eventType": "secret:update", "payload": [{"secretKey": "A"}, 7]}},
            events.SecretEvent("secret:update", ()),
        ),
        ("message", {"data": {"eventType": "secret:update"}}, events.SecretEvent("secret:update", ())),
        # keys as secretKeys: a string (newest server) or a list
        (
            "secret:update",
            {
                "type": "secret-manager",
                "data": {
                    "eventType": "secret:update",
                    "payload": [{"environment": "dev", "secretPath": "/app", "secretKeys": "A"}],
                },
            },
            events.SecretEvent("secret:update", (events.EventItem("dev", "/app", "A"),)),
        ),
        (
            "message",
            {
                "data": {
                    "eventType": "secret:create",
                    "payload": {"environment": "dev", "secretPath": "/", "secretKeys": ["A", "B", 3]},
                }
            },
            events.SecretEvent(
                "secret:create", (events.EventItem("dev", "/", "A"), events.EventItem("dev", "/", "B"))
            ),
        ),
        # the oldest generation's audit names
        (
            "message",
            {
                "type": "secret-manager",
                "data": {
                    "eventType": "delete-secrets",
                    "payload": {"environment": "dev", "secretPath": "/a", "secretKey": "K"},
                },
            },
            events.SecretEvent("secret:delete", (events.EventItem("dev", "/a", "K"),)),
        ),
        # the flat shape: the location at the top level, the kind in the event name
        (
            "secret:update",
            {"environment": "dev", "secretPath": "/a", "projectId": "p", "secretKey": "K"},
            events.SecretEvent("secret:update", (events.EventItem("dev", "/a", "K"),)),
        ),
        # understood as no change: another project type, a read audit event
        ("message", {"projectType": "pki", "data": {"eventType": "secret:update", "payload": []}}, None),
        ("message", {"type": "secret-manager", "data": {"eventType": "get-secrets", "payload": {}}}, None),
        # not understood: a change of unknown scope, never dropped
        ("message", {"data": {"eventType": "secret:rotate", "payload": []}}, events.SecretEvent("unknown")),
        ("message", {"data": "nope"}, events.SecretEvent("unknown")),
        ("message", [1, 2], events.SecretEvent("unknown")),
        ("secret-manager", {"something": "new"}, events.SecretEvent("unknown")),
    ],
)
def test_parse_message(event_name: str, data: object, expected: events.SecretEvent | None) -> None:
    assert events.parse_message(event_name, json.dumps(data)) == expected


def test_unparseable_data_is_a_change_of_unknown_scope() -> None:
    assert events.parse_message("secret-manager", "{not json") == events.SecretEvent(events.UNKNOWN_CHANGE)


def feed_all(*chunks: bytes) -> list[events.StreamMessage]:
    parser = events.SSEParser()
    out: list[events.StreamMessage] = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
    return out


HB = events.Heartbeat()
UPDATE = events.SecretEvent("secret:update", (events.EventItem("dev", "/app", "A"),))


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ((b"event: ping\n\n",), [HB]),
        ((b"event: ping\ndata:\n\n",), [HB]),
        ((b": keep-alive\n",), [HB]),
        ((b"1\n",), [HB]),
        ((b"1\n\n1\n\n",), [HB, HB]),
        ((f"data: {json.dumps(DOCUMENTED)}\n\n".encode(),), [UPDATE]),
        ((f"event: secret-manager\r\nid: 7\r\ndata: {json.dumps(DOCUMENTED)}\r\n\r\n".encode(),), [UPDATE]),
        # split anywhere, CR LF across chunks
        (
            (
                b"event: secret-manager\r",
                b"\ndata: " + json.dumps(DOCUMENTED).encode()[:20],
                json.dumps(DOCUMENTED).encode()[20:] + b"\r\n\r\n",
            ),
            [UPDATE],
        ),
        # a bare "1" keep-alive glued to the next field (older servers)
        ((f"1event: secret-manager\ndata: {json.dumps(DOCUMENTED)}\n\n".encode(),), [UPDATE]),
        # multi-line data is joined with newlines before parsing
        (
            (
                b'data: {"data":\ndata: {"eventType": "secret:update", "payload": '
                b'{"environment": "dev", "secretPath": "/app", "secretKey": "A"}}}\n\n',
            ),
            [UPDATE],
        ),
        # data not understood is a change of unknown scope; an event without data is only life
        ((b"event: secret-manager\ndata: {broken\n\n",), [events.SecretEvent("unknown")]),
        ((b"event: something-new\ndata: {}\n\n",), [events.SecretEvent("unknown")]),
        ((b"event: something-new\n\n",), [HB]),
        ((b"retry: 1000\n\n",), []),
        ((b"\n\n",), []),
    ],
)
def test_parser(chunks: tuple[bytes, ...], expected: list[events.StreamMessage]) -> None:
    assert feed_all(*chunks) == expected


def test_parser_decodes_utf8_split_across_chunks() -> None:
    body = json.dumps(
        {
            "data": {
                "eventType": "secret:update",
                "payload": [{"environment": "dév", "secretPath": "/ü", "secretKey": "K"}],
            }
        },
        ensure_ascii=False,
    ).encode()
    raw = b"data: " + body + b"\n\n"
    cut = raw.index("é".encode()) + 1
    assert feed_all(raw[:cut], raw[cut:]) == [
        events.SecretEvent("secret:update", (events.EventItem("dév", "/ü", "K"),))
    ]


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b'{"message": "Token expired", "error": "TokenError", "reqId": "r9"}', "Token expired"),
        (b"permission revoked", "permission revoked"),
        (b"", "closed the event stream"),
    ],
)
def test_error_event_raises_stream_error(data: bytes, fragment: str) -> None:
    with pytest.raises(errors.StreamError) as info:
        feed_all(b"event: error\ndata: " + data + b"\n\n")
    assert fragment in str(info.value)
    assert isinstance(info.value, errors.AuthenticationError)


def test_error_event_keeps_req_id() -> None:
    with pytest.raises(errors.StreamError) as info:
        feed_all(b'event: error\ndata: {"message": "x", "reqId": "r9", "statusCode": 403}\n\n')
    assert (info.value.req_id, info.value.status_code) == ("r9", 403)


async def _chunks(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def test_iter_messages_yields_something_for_every_chunk() -> None:
    data = f"event: secret-manager\ndata: {json.dumps(DOCUMENTED)}\n\n".encode()
    chunks = (b"", b"event: secret-manager\n", data[22:40], data[40:], b"1", b"\n")
    got = [message async for message in events.iter_messages(_chunks(*chunks))]
    # partial frame → heartbeat, heartbeat, then the event; bare "1" without newline → heartbeat;
    # its newline completes the "1" line → heartbeat.
    assert got == [HB, HB, UPDATE, HB, HB]


def test_registration_wire_form_and_hashability() -> None:
    full = events.EventRegistration("secret:update", "dev", "/app/**")
    # Both register forms in one item: the oldest servers read subject/action, newer ones event.
    assert full.to_wire() == {
        "event": "secret:update",
        "subject": "secrets",
        "action": "subscribe",
        "conditions": {"environmentSlug": "dev", "secretPath": "/app/**"},
    }
    assert events.EventRegistration("secret:create").to_wire() == {
        "event": "secret:create",
        "subject": "secrets",
        "action": "subscribe",
    }
    assert len({full, events.EventRegistration("secret:update", "dev", "/app/**")}) == 1

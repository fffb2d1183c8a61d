"""Each event-stream generation byte for byte, its path filter and its register schema (pure).

The expected bytes are written out in full on purpose: they are the contract (docs/service-contract.md,
"Event stream"), so a change to them must show up here as a changed literal.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest
from devserver_fixtures import T0

from secretferry.devserver import generations
from secretferry.devserver.config import EventGeneration
from secretferry.devserver.errors import PermissionDenied, Unauthorized
from secretferry.devserver.events import CREATE, DELETE, IMPORT_MUTATION, UPDATE, Change, Registration

MS = b"1767225600000"  # T0 in epoch milliseconds, the id: of middle and newest frames
ISO = b"2026-01-01T00:00:00.000Z"
ONE = [Change("dev", "/p", "K", "id-k")]
TWO = [Change("dev", "/p", "K1", "id-1"), Change("dev", "/p", "K2", "id-2")]
IMPORTER = [Change("dev", "/p")]
ALL: tuple[EventGeneration, ...] = ("documented", "old", "middle", "newest")

DOCUMENTED = {
    (UPDATE, "one"): b'data: {"projectType":"secret-manager","data":{"eventType":"secret:update",'
    b'"payload":[{"environment":"dev","secretPath":"/p","secretKey":"K"}]}}\n\n',
    (CREATE, "two"): b'data: {"projectType":"secret-manager","data":{"eventType":"secret:create",'
    b'"payload":[{"environment":"dev","secretPath":"/p","secretKey":"K1"},'
    b'{"environment":"dev","secretPath":"/p","secretKey":"K2"}]}}\n\n',
    (DELETE, "one"): b'data: {"projectType":"secret-manager","data":{"eventType":"secret:delete",'
    b'"payload":[{"environment":"dev","secretPath":"/p","secretKey":"K"}]}}\n\n',
    (IMPORT_MUTATION, "import"): b'data: {"projectType":"secret-manager","data":'
    b'{"eventType":"secret:import-mutation","payload":{"environment":"dev","secretPath":"/p"}}}\n\n',
}

OLD_HEAD = (
    b'data: {"type":"secret-manager","source":"infisical","time":"' + ISO + b'",'
    b'"datacontenttype":"application/json","data":{"specversion":1,'
)
OLD = {
    (UPDATE, "one"): OLD_HEAD + b'"eventType":"update-secret","payload":'
    b'{"environment":"dev","secretPath":"/p","secretKey":"K","secretId":"id-k"}}}\n\n',
    (CREATE, "two"): OLD_HEAD + b'"eventType":"create-secret","payload":'
    b'{"environment":"dev","secretPath":"/p","secretKey":"K1","secretId":"id-1"}}}\n\n'
    + OLD_HEAD
    + b'"eventType":"create-secret","payload":'
    b'{"environment":"dev","secretPath":"/p","secretKey":"K2","secretId":"id-2"}}}\n\n',
    (DELETE, "one"): OLD_HEAD + b'"eventType":"delete-secret","payload":'
    b'{"environment":"dev","secretPath":"/p","secretKey":"K","secretId":"id-k"}}}\n\n',
    (IMPORT_MUTATION, "import"): b"",  # that generation had no import-mutation event
}

MIDDLE_HEAD = (
    b"id: " + MS + b'\nevent: secret-manager\ndata: {"type":"secret-manager","source":"infisical",'
    b'"time":"' + ISO + b'","datacontenttype":"application/json","data":{"specversion":1,'
)
MIDDLE = {
    (UPDATE, "one"): MIDDLE_HEAD + b'"event":"secret:update","payload":'
    b'[{"secretId":"id-k","secretKey":"K","secretPath":"/p","environment":"dev"}]}}\n\n',
    (CREATE, "two"): MIDDLE_HEAD + b'"event":"secret:create","payload":'
    b'[{"secretId":"id-1","secretKey":"K1","secretPath":"/p","environment":"dev"},'
    b'{"secretId":"id-2","secretKey":"K2","secretPath":"/p","environment":"dev"}]}}\n\n',
    (DELETE, "one"): MIDDLE_HEAD + b'"event":"secret:delete","payload":'
    b'[{"secretId":"id-k","secretKey":"K","secretPath":"/p","environment":"dev"}]}}\n\n',
    (IMPORT_MUTATION, "import"): MIDDLE_HEAD + b'"event":"secret:import-mutation","payload":'
    b'[{"secretPath":"/p","environment":"dev"}]}}\n\n',
}

NEWEST = {
    (UPDATE, "one"): b"id: " + MS + b"\nevent: secret:update\n"
    b'data: {"type":"secret-manager","data":{"eventType":"secret:update",'
    b'"payload":[{"environment":"dev","secretPath":"/p","secretKeys":"K"}]}}\n\n',
    (CREATE, "two"): b"id: " + MS + b"\nevent: secret:create\n"
    b'data: {"type":"secret-manager","data":{"eventType":"secret:create",'
    b'"payload":[{"environment":"dev","secretPath":"/p","secretKeys":"K1"},'
    b'{"environment":"dev","secretPath":"/p","secretKeys":"K2"}]}}\n\n',
    (DELETE, "one"): b"id: " + MS + b"\nevent: secret:delete\n"
    b'data: {"type":"secret-manager","data":{"eventType":"secret:delete",'
    b'"payload":[{"environment":"dev","secretPath":"/p","secretKeys":"K"}]}}\n\n',
    (IMPORT_MUTATION, "import"): b"id: " + MS + b"\nevent: secret:import-mutation\n"
    b'data: {"type":"secret-manager","data":{"eventType":"secret:import-mutation",'
    b'"payload":{"environment":"dev","secretPath":"/p"}}}\n\n',
}

EXPECTED: dict[EventGeneration, dict[tuple[str, str], bytes]] = {
    "documented": DOCUMENTED,
    "old": OLD,
    "middle": MIDDLE,
    "newest": NEWEST,
}
CHANGES = {"one": ONE, "two": TWO, "import": IMPORTER}


@pytest.mark.parametrize(
    ("name", "event", "changes"),
    [(name, event, changes) for name in ALL for (event, changes) in EXPECTED[name]],
)
def test_frames_byte_for_byte(name: EventGeneration, event: str, changes: str) -> None:
    frame = generations.GENERATIONS[name].encode(event, CHANGES[changes], T0)
    assert frame == EXPECTED[name][(event, changes)]


def test_newest_sends_one_frame_per_folder() -> None:
    """The real server publishes per (environment, folder); keys of one folder share a frame."""
    frames = generations.get("newest").encode(
        UPDATE, [Change("dev", "/a", "X"), Change("dev", "/b", "Y")], T0
    )
    assert frames.count(b"event: secret:update\n") == 2
    assert b'"secretPath":"/a","secretKeys":"X"' in frames and b'"secretPath":"/b","secretKeys":"Y"' in frames


@pytest.mark.parametrize(
    ("name", "heartbeat"),
    [
        ("documented", b"event: ping\n\n"),
        ("old", b"1"),
        ("middle", b"event: ping\n\n"),
        ("newest", b"event: ping\n\n"),
    ],
)
def test_heartbeats(name: EventGeneration, heartbeat: bytes) -> None:
    assert generations.GENERATIONS[name].heartbeat() == heartbeat


def test_recheck_error_frames() -> None:
    expired = Unauthorized("Token expired")
    assert (
        generations.get("newest").error_frame(expired)
        == b'event: error\ndata: {"message":"Permission denied or refresh failed"}\n\n'
    )
    assert generations.get("old").error_frame(expired) == b""  # the stream just ends
    for name in ("middle", "documented"):
        frame = generations.GENERATIONS[name].error_frame(expired)
        head, data, tail = frame.partition(b"\ndata: ")[0], frame.partition(b"\ndata: ")[2][:-2], frame[-2:]
        body = json.loads(data)
        assert head == b"event: error" and tail == b"\n\n"
        assert list(body) == ["reqId", "statusCode", "message", "error"]
        assert body["statusCode"] == 401 and body["error"] == "UnauthorizedError"
        assert data == json.dumps(body, separators=(",", ":")).encode()  # compact, one line
    denied = generations.get("middle").error_frame(PermissionDenied("no", details=[{"action": "x"}]))
    assert json.loads(denied.partition(b"data: ")[2])["details"] == [{"action": "x"}]


# --- registrations ----------------------------------------------------------------------------------

CLIENT_KINDS = (CREATE, UPDATE, DELETE, IMPORT_MUTATION)


def client_item(kind: str = UPDATE, path: str = "/p") -> dict[str, Any]:
    """What our client sends for every item, whatever the server's generation."""
    return {
        "event": kind,
        "subject": "secrets",
        "action": "subscribe",
        "conditions": {"environmentSlug": "dev", "secretPath": path},
    }


def item_for(name: EventGeneration, path: str | None, kind: str = UPDATE) -> dict[str, Any]:
    conditions: dict[str, Any] = {"environmentSlug": "dev"}
    if path is not None:
        conditions["secretPath"] = path
    if name == "old":
        return {"subject": "secrets", "action": "subscribe", "conditions": conditions}
    return {"event": kind, "conditions": conditions}


@pytest.mark.parametrize("name", ALL)
def test_our_clients_item_shape_is_accepted_by_every_generation(name: EventGeneration) -> None:
    regs = generations.GENERATIONS[name].parse_registrations([client_item(k) for k in CLIENT_KINDS])
    assert [(r.environment, r.secret_path) for r in regs] == [("dev", "/p")] * 4
    # old has no kind in its items: every registration takes every kind.
    assert [r.event for r in regs] == ([None] * 4 if name == "old" else list(CLIENT_KINDS))


EVENT_PATHS = ("/p", "/p/x", "/pq", "/")
# registration secretPath (None: left out) -> which of EVENT_PATHS it selects, per generation
PATH_FILTERS: dict[EventGeneration, dict[str | None, tuple[bool, ...]]] = {
    "documented": {
        "/p": (True, False, False, False),
        "/p/**": (True, True, False, False),
        "/": (False, False, False, True),
        None: (True, True, True, True),  # no path condition: no path filter
    },
    "old": {
        "/p": (True, False, False, False),
        "/p/**": (True, True, False, False),
        "/": (False, False, False, True),
    },
    "middle": {
        "/p": (True, False, False, False),
        "/p/**": (True, True, False, False),
        "/": (False, False, False, True),
        None: (False, False, False, True),  # defaults to "/": the root folder only
    },
    "newest": {
        "/p": (True, True, True, False),  # a plain prefix: the sibling /pq too
        "/p/**": (False, False, False, False),  # a literal prefix no path starts with
        "/": (True, True, True, True),
        None: (True, True, True, True),
    },
}


@pytest.mark.parametrize(
    ("name", "path"), [(name, path) for name, table in PATH_FILTERS.items() for path in table]
)
def test_path_filters(name: EventGeneration, path: str | None) -> None:
    generation = generations.GENERATIONS[name]
    [reg] = generation.parse_registrations([item_for(name, path)])
    got = tuple(generation.matches(reg, UPDATE, Change("dev", p, "K")) for p in EVENT_PATHS)
    assert got == PATH_FILTERS[name][path]


@pytest.mark.parametrize("name", ALL)
def test_environment_filter(name: EventGeneration) -> None:
    generation = generations.GENERATIONS[name]
    [reg] = generation.parse_registrations([item_for(name, "/")])
    assert generation.matches(reg, UPDATE, Change("dev", "/", "K"))
    assert not generation.matches(reg, UPDATE, Change("prod", "/", "K"))


@pytest.mark.parametrize("name", ["middle", "newest"])
def test_no_conditions_select_every_environment_and_path_of_that_kind(name: EventGeneration) -> None:
    generation = generations.GENERATIONS[name]
    [reg] = generation.parse_registrations([{"event": UPDATE}])
    assert reg == Registration(UPDATE, None, None)
    assert generation.matches(reg, UPDATE, Change("prod", "/deep/er", "K"))
    assert not generation.matches(reg, CREATE, Change("prod", "/deep/er", "K"))


def test_kind_filters() -> None:
    old = generations.get("old")
    [any_kind] = old.parse_registrations([item_for("old", "/")])
    assert all(old.matches(any_kind, kind, Change("dev", "/", "K")) for kind in CLIENT_KINDS)
    documented = generations.get("documented")
    [no_event] = documented.parse_registrations([{"conditions": {"environmentSlug": "dev"}}])
    assert all(documented.matches(no_event, kind, Change("dev", "/x", "K")) for kind in CLIENT_KINDS)


INVALID: dict[EventGeneration, list[dict[str, Any]]] = {
    "middle": [
        {"conditions": {"environmentSlug": "dev", "secretPath": "/"}},  # no event
        {"event": "secret:rotate"},  # not one of the four kinds
        {"event": UPDATE, "conditions": {"secretPath": "/"}},  # no environmentSlug
        {"event": UPDATE, "conditions": {"environmentSlug": 3}},
    ],
    "old": [
        {"action": "subscribe", "conditions": {"environmentSlug": "dev", "secretPath": "/"}},  # no subject
        {"subject": "secrets", "conditions": {"environmentSlug": "dev", "secretPath": "/"}},  # no action
        {
            "subject": "secret-events",
            "action": "subscribe",
            "conditions": {"environmentSlug": "dev", "secretPath": "/"},
        },
        {"subject": "secrets", "action": "subscribe"},  # no conditions
        {"subject": "secrets", "action": "subscribe", "conditions": {"environmentSlug": "dev"}},  # no path
        {"event": UPDATE, "conditions": {"environmentSlug": "dev", "secretPath": "/"}},  # new shape
    ],
}
INVALID["newest"] = INVALID["middle"]


@pytest.mark.parametrize(
    ("name", "item"), [(name, item) for name, items in INVALID.items() for item in items]
)
def test_invalid_items_are_validation_errors(name: EventGeneration, item: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        generations.GENERATIONS[name].parse_registrations([item])

"""The client against hand-written captures of the real service (tests/fixtures/README.md).

Every generation's stream must yield the same changes however its bytes are split into chunks
(one write per chunk, all at once, one byte at a time), every chunk must count as life, and every
real error body must map to the error class the operator acts on.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from secretferry.service import errors, events, wire

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GENERATIONS = ("documented", "old", "middle", "newest", "flat")


def _capture(generation: str) -> bytes:
    return (FIXTURES / "streams" / f"{generation}.sse").read_bytes()


def _expected(generation: str) -> list[events.SecretEvent]:
    raw = json.loads((FIXTURES / "streams" / f"{generation}.expected.json").read_text())
    return [
        events.SecretEvent(
            e["type"], tuple(events.EventItem(env, path, key) for env, path, key in e["items"])
        )
        for e in raw
    ]


def _without_ids(found: list[events.StreamMessage]) -> list[events.SecretEvent]:
    """The changes, keyed by location only (the ids some generations add are not compared)."""
    return [
        events.SecretEvent(
            m.event_type, tuple(events.EventItem(i.environment, i.secret_path, i.secret_key) for i in m.items)
        )
        for m in found
        if isinstance(m, events.SecretEvent)
    ]


def _writes(capture: bytes) -> list[bytes]:
    """Split a capture where the server wrote: after each blank line and around each bare ``1``."""
    out: list[bytes] = []
    rest = capture
    while rest:
        if rest.startswith(b"1") and not rest.startswith(b"1\n"):
            out.append(b"1")
            rest = rest[1:]
            continue
        end = rest.find(b"\n\n")
        cut = len(rest) if end < 0 else end + 2
        out.append(rest[:cut])
        rest = rest[cut:]
    return out


async def _messages(chunks: list[bytes]) -> list[events.StreamMessage]:
    async def source() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return [m async for m in events.iter_messages(source())]


@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize("split", ["writes", "whole", "bytes"])
async def test_every_generation_yields_its_changes_however_split(generation: str, split: str) -> None:
    capture = _capture(generation)
    chunks = {
        "writes": _writes(capture),
        "whole": [capture],
        "bytes": [capture[i : i + 1] for i in range(len(capture))],
    }[split]
    found = await _messages(chunks)
    assert _without_ids(found) == _expected(generation)
    assert len(found) >= len(chunks)  # every chunk is proof of life


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_every_heartbeat_write_is_seen_as_life(generation: str) -> None:
    writes = _writes(_capture(generation))
    heartbeats = [w for w in writes if w in (b"1", b"event: ping\n\n")]
    assert heartbeats, "each capture has heartbeats"
    for write in heartbeats:
        assert await _messages([write]) == [events.Heartbeat()]


def test_the_old_heartbeat_is_one_byte_without_newline() -> None:
    capture = _capture("old")
    assert capture.startswith(b"1data: ")
    assert b"\n1\n" not in capture and b"event:" not in capture and b"id:" not in capture


@pytest.mark.parametrize(
    ("generation", "fragment"),
    [("newest", "Permission denied or refresh failed"), ("middle", "Token expired")],
)
def test_the_recheck_failure_of_each_generation_raises_a_stream_error(generation: str, fragment: str) -> None:
    parser = events.SSEParser()
    with pytest.raises(errors.StreamError) as info:
        parser.feed((FIXTURES / "streams" / f"{generation}-error.sse").read_bytes())
    assert fragment in str(info.value)


def _error_cases() -> list[Any]:
    return [
        pytest.param(json.loads(path.read_text()), id=path.stem)
        for path in sorted((FIXTURES / "errors").glob("*.json"))
    ]


@pytest.mark.parametrize("case", _error_cases())
def test_real_error_bodies_map_to_the_error_the_operator_acts_on(case: dict[str, Any]) -> None:
    body = wire.decode_error_body(json.dumps(case["body"]).encode())
    error = wire.error_for(
        case["status"],
        body,
        endpoint="GET /api/v4/secrets",
        retry_after_header=case["headers"].get("retry-after"),
        subscribe=case["subscribe"],
    )
    assert type(error).__name__ == case["means"]
    assert error.status_code == case["status"]
    if "reqId" in case["body"]:
        assert error.req_id == case["body"]["reqId"]
    if case["status"] == 429:
        assert isinstance(error, errors.RateLimited)
        assert error.retry_after == float(case["headers"]["retry-after"])
    if case["means"] == "PermissionDenied":
        assert isinstance(error, errors.PermissionDenied) and error.details == case["body"]["details"]

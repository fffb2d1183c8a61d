"""The readiness endpoint (secretferry/readiness.py): the verdict table, the HTTP answers, and the
server answering a real connection as the process moves from starting to serving to stopping."""

from __future__ import annotations

import asyncio

import pytest

from secretferry import readiness

V = readiness.Verdict


@pytest.mark.parametrize(
    ("started", "stopping", "election", "leading", "complete", "expected"),
    [
        # no leader election: ready only once the caches are complete
        (False, False, False, False, False, V(False, readiness.STARTING)),
        (True, False, False, False, False, V(False, readiness.LISTING)),
        (True, False, False, False, True, V(True, readiness.SERVING)),
        # leader election: a standby is ready as soon as it has started...
        (False, False, True, False, False, V(False, readiness.STARTING)),
        (True, False, True, False, False, V(True, readiness.STANDBY)),
        # ...the leader only once it serves (a fresh leader lists first)
        (True, False, True, True, False, V(False, readiness.LISTING)),
        (True, False, True, True, True, V(True, readiness.SERVING)),
        # stopping wins over everything
        (True, True, False, False, True, V(False, readiness.STOPPING)),
        (True, True, True, False, False, V(False, readiness.STOPPING)),
        (False, True, True, True, True, V(False, readiness.STOPPING)),
    ],
)
def test_verdict(
    started: bool, stopping: bool, election: bool, leading: bool, complete: bool, expected: readiness.Verdict
) -> None:
    got = readiness.verdict(
        started=started,
        stopping=stopping,
        leader_election=election,
        leading=leading,
        caches_complete=complete,
    )
    assert got == expected


def _status(answer: bytes) -> tuple[str, str]:
    head, _, body = answer.decode().partition("\r\n\r\n")
    return head.split("\r\n", 1)[0], body


@pytest.mark.parametrize(
    ("line", "status", "body"),
    [
        (b"GET /readyz HTTP/1.1", "HTTP/1.1 503 Service Unavailable", "starting\n"),
        (b"GET /readyz?verbose=1 HTTP/1.1", "HTTP/1.1 503 Service Unavailable", "starting\n"),
        (b"HEAD /readyz HTTP/1.1", "HTTP/1.1 503 Service Unavailable", ""),
        (b"GET /healthz HTTP/1.1", "HTTP/1.1 404 Not Found", "not found\n"),
        (b"POST /readyz HTTP/1.1", "HTTP/1.1 405 Method Not Allowed", "GET or HEAD\n"),
        (b"garbage", "HTTP/1.1 404 Not Found", "not found\n"),
        (b"", "HTTP/1.1 404 Not Found", "not found\n"),
    ],
)
def test_response(line: bytes, status: str, body: str) -> None:
    assert _status(readiness.response(readiness.Readiness(), line)) == (status, body)


def test_response_content_length_matches_the_body() -> None:
    state = readiness.Readiness()
    state.started, state.caches_complete = True, lambda: True
    answer = readiness.response(state, b"GET /readyz HTTP/1.1").decode()
    assert "Content-Length: 8\r\n" in answer and answer.endswith("\r\n\r\nserving\n")


async def _get(port: int, request: bytes = b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n") -> tuple[str, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    await writer.wait_closed()
    return _status(answer)


@pytest.mark.looptime(False)  # real sockets: the server's timeout would otherwise fire at once
async def test_server_follows_the_process_through_its_states() -> None:
    state = readiness.Readiness()
    leading = False
    complete = False
    server = await readiness.serve(state, host="127.0.0.1", port=0)
    port = server.sockets[0].getsockname()[1]
    try:
        assert await _get(port) == ("HTTP/1.1 503 Service Unavailable", "starting\n")
        state.leader_election, state.leading = True, lambda: leading
        state.caches_complete = lambda: complete
        state.started = True
        assert await _get(port) == ("HTTP/1.1 200 OK", "standby\n")
        leading = True  # won the Lease: lists before it serves
        assert await _get(port) == ("HTTP/1.1 503 Service Unavailable", "listing\n")
        complete = True
        assert await _get(port) == ("HTTP/1.1 200 OK", "serving\n")
        state.stopping = True
        assert await _get(port) == ("HTTP/1.1 503 Service Unavailable", "stopping\n")
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.looptime(False)
async def test_server_drops_a_client_that_sends_no_request_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readiness, "_REQUEST_TIMEOUT_SECONDS", 0.2)
    server = await readiness.serve(readiness.Readiness(), host="127.0.0.1", port=0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /readyz HTTP/1.1\r\n")  # and never the blank line
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), timeout=5) == b""  # closed, unanswered
        writer.close()
        await writer.wait_closed()
        # an oversized request is not answered either (closed; a reset is as good)
        try:
            answer = await _get(port, b"GET /readyz HTTP/1.1\r\nX: " + b"a" * 10_000 + b"\r\n\r\n")
        except ConnectionResetError:
            answer = ("", "")
        assert answer == ("", "")
    finally:
        server.close()
        await server.wait_closed()

"""The webhook receiver: size cap, rate limit, scope matching, debounced nudges (no network).

The HTTP framing is exercised over a real socket in the last test; the rest calls ``handle``."""

from __future__ import annotations

import asyncio
import json
import pathlib

import pytest

from secretferry import metrics
from secretferry import settings as settings_mod
from secretferry.reconcile import state, tasks, webhook_relay, webhooks
from secretferry.service import scopes
from secretferry.service import webhook_signature as sig

KEY = "signing-key-0123456789"
NOW = 1_790_000_000_000


def _body(path: str = "/app", env: str = "dev", project: str = "p1") -> bytes:
    doc = {
        "event": "secrets.modified",
        "project": {
            "workspaceId": project,
            "projectId": project,
            "projectName": "P",
            "environment": env,
            "secretPath": path,
        },
        "timestamp": NOW,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def _scope(path: str, *, recursive: bool = False, env: str = "dev", project: str = "p1") -> scopes.Scope:
    return scopes.Scope("MachineIdentity/ns/id", project, env, path, recursive=recursive)


@pytest.mark.parametrize(
    ("path", "env", "project", "expected"),
    [
        ("/app", "dev", "p1", {"/app", "/**", "/app/**"}),
        ("/app/db", "dev", "p1", {"/**", "/app/**"}),
        ("/", "dev", "p1", {"/", "/**"}),
        ("/other", "dev", "p1", {"/**"}),
        ("/app", "prod", "p1", set()),
        ("/app", "dev", "p2", set()),
        ("app/", "dev", "p1", {"/app", "/**", "/app/**"}),  # normalized like the service's paths
        ("/application", "dev", "p1", {"/**"}),  # a prefix that is not a folder boundary
    ],
)
def test_scope_matching_exact_and_recursive(path: str, env: str, project: str, expected: set[str]) -> None:
    served = {
        "/": _scope("/"),
        "/app": _scope("/app"),
        "/**": _scope("/", recursive=True),
        "/app/**": _scope("/app", recursive=True),
    }
    change = sig.Change(workspace_id=project, environment=env, secret_path=path)
    hit = webhooks.matching(served.values(), change)
    assert {name for name, s in served.items() if s in hit} == expected


class _Harness:
    def __init__(self, tmp_path: pathlib.Path, **overrides: object) -> None:
        keyfile = tmp_path / "key"
        keyfile.write_text(KEY + "\n")
        self.cfg = settings_mod.Settings(webhook_signing_key_file=str(keyfile), **overrides)  # type: ignore[arg-type]
        self.index = state.ScopeIndex(jitter_fraction=0)
        self.scope = _scope("/app")
        self.index.bind(("ns", "app"), [self.scope], instant=True, refresh_seconds=300, now=0)
        self.nudges: list[set[scopes.Scope]] = []
        self.now = 0.0  # the rate limits' clock
        self.receiver = webhooks.Receiver(
            settings=self.cfg,
            scopes=self.index,
            on_resync=lambda s, reason: self.nudges.append(set(s)),
            background=tasks.Tasks(),
            wall_clock_ms=lambda: NOW,
            leading=lambda: self.leading,
            leader=lambda: self.leader,
            clock=lambda: self.now,
        )
        self.leading = True
        self.leader: webhook_relay.Address | None = None


def _count(result: str) -> float:
    return metrics.WEBHOOK_REQUESTS.labels(result=result)._value.get()


async def test_a_signed_change_nudges_its_scope_and_a_forged_one_nothing(tmp_path: pathlib.Path) -> None:
    h = _Harness(tmp_path)
    forged_before, ok_before = _count(sig.FORGED), _count(sig.OK)
    body = _body()
    assert h.receiver.handle("1.2.3.4", sig.header_value(body, "guess", NOW), body) == (401, sig.FORGED)
    assert h.receiver.handle("1.2.3.4", None, body) == (401, sig.MISSING)
    await asyncio.sleep(0)
    assert h.nudges == []
    assert h.receiver.handle("1.2.3.4", sig.header_value(body, KEY, NOW), body) == (202, sig.OK)
    await asyncio.sleep(0)
    assert h.nudges == [{h.scope}]
    assert _count(sig.FORGED) == forged_before + 1 and _count(sig.OK) == ok_before + 1


async def test_a_body_over_the_cap_is_refused(tmp_path: pathlib.Path) -> None:
    h = _Harness(tmp_path)
    assert h.receiver.handle("1.2.3.4", "t=1;x", None) == (413, sig.TOO_LARGE)


@pytest.mark.looptime
async def test_a_storm_costs_one_nudge_at_once_and_one_per_window(tmp_path: pathlib.Path) -> None:
    h = _Harness(tmp_path, event_debounce_seconds=1.0, webhook_burst=10_000)
    body = _body()
    signed = sig.header_value(body, KEY, NOW)
    for _ in range(1000):
        h.receiver.handle("1.2.3.4", signed, body)
    await asyncio.sleep(0)
    assert len(h.nudges) == 1  # leading edge: the first change waits for nothing
    await asyncio.sleep(0.5)
    for _ in range(1000):
        h.receiver.handle("1.2.3.4", signed, body)
    await asyncio.sleep(2.0)
    assert len(h.nudges) == 2  # the rest of the storm: one more, at the end of the window


async def test_the_http_framing_over_a_socket(tmp_path: pathlib.Path) -> None:
    h = _Harness(tmp_path, webhook_port=0, webhook_max_body_bytes=1024)
    server = await asyncio.start_server(h.receiver._connection, host="127.0.0.1", port=0)
    port = server.sockets[0].getsockname()[1]

    async def post(body: bytes, header: str, length: int | None = None) -> bytes:
        size = len(body) if length is None else length
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            f"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"{sig.HEADER}: {header}\r\nContent-Length: {size}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        answer = await reader.read()
        writer.close()
        return answer.split(b"\r\n", 1)[0]

    async with server:
        body = _body()
        assert await post(body, sig.header_value(body, KEY, NOW)) == b"HTTP/1.1 202 Accepted"
        assert await post(body, sig.header_value(body, "bad", NOW)) == b"HTTP/1.1 401 Unauthorized"
        assert await post(b"", "x", length=10_000_000) == b"HTTP/1.1 413 Content Too Large"


def test_the_key_file_is_reread_on_rotation_and_missing_means_no_key(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "key"
    keys = webhooks.KeyFile(str(path))
    assert keys.keys() == ()  # not mounted: every request is refused (no_key)
    path.write_text("old\n")
    assert keys.keys() == ("old",)
    path.write_text("old\nnew-key\n")  # a rotation overlaps: both verify
    assert keys.keys() == ("old", "new-key")
    path.unlink()
    assert keys.keys() == ()


async def test_without_a_key_every_request_is_refused(tmp_path: pathlib.Path) -> None:
    h = _Harness(tmp_path)
    (tmp_path / "key").unlink()
    body = _body()
    assert h.receiver.handle("1.2.3.4", sig.header_value(body, KEY, NOW), body) == (503, sig.NO_KEY)
    await asyncio.sleep(0)
    assert h.nudges == []


async def _post(port: int, body: bytes, header: str, *, relayed: bool = False) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    extra = f"{webhook_relay.RELAYED_HEADER}: 1\r\n" if relayed else ""
    writer.write(
        f"POST /webhook HTTP/1.1\r\nHost: x\r\n{sig.HEADER}: {header}\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer.split(b"\r\n", 1)[0]


async def test_a_standby_relays_a_verified_webhook_to_the_leader_and_nothing_else(
    tmp_path: pathlib.Path,
) -> None:
    """Two receivers over real sockets: the leader's nudges; the standby's verifies, relays once."""
    (tmp_path / "leader").mkdir()
    (tmp_path / "standby").mkdir()
    leader, standby = _Harness(tmp_path / "leader"), _Harness(tmp_path / "standby")
    standby.leading = False
    lead_server = await asyncio.start_server(leader.receiver._connection, host="127.0.0.1", port=0)
    stand_server = await asyncio.start_server(standby.receiver._connection, host="127.0.0.1", port=0)
    lead_port = lead_server.sockets[0].getsockname()[1]
    port = stand_server.sockets[0].getsockname()[1]
    body = _body()
    async with lead_server, stand_server:
        # no leader known yet (before the first Lease read, or a released Lease): 503, not lost silently
        assert (
            await _post(port, body, sig.header_value(body, KEY, NOW)) == b"HTTP/1.1 503 Service Unavailable"
        )
        standby.leader = webhook_relay.Address("127.0.0.1", lead_port)
        relayed_before = _count(webhook_relay.RELAYED)
        assert await _post(port, body, sig.header_value(body, KEY, NOW)) == b"HTTP/1.1 202 Accepted"
        await asyncio.sleep(0)
        assert leader.nudges == [{leader.scope}] and standby.nudges == []
        assert _count(webhook_relay.RELAYED) == relayed_before + 1
        # a forgery is refused at the standby: the leader never sees it
        ok_at_leader = _count(sig.OK)
        assert await _post(port, body, sig.header_value(body, "guess", NOW)) == b"HTTP/1.1 401 Unauthorized"
        # one hop only: a request already relayed is not relayed again (no loop between replicas)
        assert (
            await _post(port, body, sig.header_value(body, KEY, NOW), relayed=True)
            == b"HTTP/1.1 503 Service Unavailable"
        )
        assert _count(sig.OK) == ok_at_leader
    # the leader gone: the standby says so (502), it does not hang
    failed = _count(webhook_relay.RELAY_FAILED)
    async with await asyncio.start_server(standby.receiver._connection, host="127.0.0.1", port=0) as again:
        port = again.sockets[0].getsockname()[1]
        assert await _post(port, body, sig.header_value(body, KEY, NOW)) == b"HTTP/1.1 502 Bad Gateway"
    assert _count(webhook_relay.RELAY_FAILED) == failed + 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("10.0.0.5:8082", webhook_relay.Address("10.0.0.5", 8082)),
        ("[fd00::5]:8082", webhook_relay.Address("fd00::5", 8082)),
        ("", None),
        (None, None),
        ("leader.example.com:8082", None),  # never a host name: it could be made to resolve elsewhere
        ("10.0.0.5", None),
        ("10.0.0.5:0", None),
        ("10.0.0.5:99999", None),
    ],
)
def test_the_advertised_address_parses_only_as_ip_and_port(
    value: str | None, expected: webhook_relay.Address | None
) -> None:
    assert webhook_relay.parse(value) == expected


def test_the_advertised_address_round_trips() -> None:
    for ip in ("10.0.0.5", "fd00::5"):
        text = webhook_relay.advertised(ip, 8082)
        assert webhook_relay.parse(text) == webhook_relay.Address(ip, 8082)
    assert webhook_relay.advertised("", 8082) is None


async def test_a_forged_flood_from_the_services_own_address_does_not_starve_its_webhook(
    tmp_path: pathlib.Path,
) -> None:
    """Default limits (20/s, burst 100; budget 20,000/s): 80,000 forgeries in one second from the
    address the service's webhooks come from (far beyond what the receiver can read, ~10,000/s on
    one core); its genuine webhook a sixteenth of the way in is still accepted."""
    h = _Harness(tmp_path)
    body = _body()
    forged, genuine = sig.header_value(body, "guess", NOW), sig.header_value(body, KEY, NOW)
    over_before, limited_before = _over_rate(), _count(sig.RATE_LIMITED)
    answers: dict[tuple[int, str], int] = {}
    for i in range(80_000):
        h.now = i / 80_000
        answer = h.receiver.handle("10.0.0.1", forged, body)
        answers[answer] = answers.get(answer, 0) + 1
        if i == 5_000:
            assert h.receiver.handle("10.0.0.1", genuine, body) == (202, sig.OK)
    await asyncio.sleep(0)
    assert h.nudges == [{h.scope}]
    # the bucket's 100 + 20, then the shared budget (20,000 burst, refilled at 20,000/s): the rest 429
    # (a flood faster than the budget refuses a genuine webhook with the budget's share: README)
    assert 39_000 < answers[(401, sig.FORGED)] < 41_000 and answers[(429, sig.RATE_LIMITED)] > 39_000
    assert abs(_over_rate() - over_before - (answers[(401, sig.FORGED)] + 1 - 120)) <= 2
    assert _count(sig.RATE_LIMITED) - limited_before == answers[(429, sig.RATE_LIMITED)]


async def test_with_the_budget_off_the_flood_starves_it_as_before(tmp_path: pathlib.Path) -> None:
    h = _Harness(tmp_path, webhook_over_rate_verify_per_second=0)
    body = _body()
    for _ in range(100):
        h.receiver.handle("10.0.0.1", sig.header_value(body, "guess", NOW), body)
    assert h.receiver.handle("10.0.0.1", sig.header_value(body, KEY, NOW), body) == (429, sig.RATE_LIMITED)


def _over_rate() -> float:
    return metrics.WEBHOOK_OVER_RATE_VERIFIED._value.get()


async def _post_from_proxy(port: int, body: bytes, header: str, forwarded: list[tuple[str, str]]) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    extra = "".join(f"{name}: {value}\r\n" for name, value in forwarded)
    writer.write(
        f"POST /webhook HTTP/1.1\r\nHost: x\r\n{sig.HEADER}: {header}\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer.split(b"\r\n", 1)[0]


async def test_behind_a_trusted_proxy_each_client_has_its_own_bucket(tmp_path: pathlib.Path) -> None:
    """Over a socket from 127.0.0.1 (the "ingress"), one request a bucket, no spare budget: the
    attacker's flood empties its own bucket, not the service's, and its spoofed entries are ignored."""
    h = _Harness(
        tmp_path,
        webhook_trusted_proxies="127.0.0.0/8",
        webhook_rate_per_second=0.001,
        webhook_burst=1,
        webhook_over_rate_verify_per_second=0,
    )
    server = await asyncio.start_server(h.receiver._connection, host="127.0.0.1", port=0)
    port = server.sockets[0].getsockname()[1]
    body = _body()
    forged, genuine = sig.header_value(body, "guess", NOW), sig.header_value(body, KEY, NOW)
    xff = "X-Forwarded-For"
    async with server:
        assert (
            await _post_from_proxy(port, body, forged, [(xff, "203.0.113.66")])
            == b"HTTP/1.1 401 Unauthorized"
        )
        # spoofing the service's address: the ingress appends the attacker's, the walk stops there
        spoof = [(xff, "198.51.100.7"), (xff, "203.0.113.66")]
        assert await _post_from_proxy(port, body, forged, spoof) == b"HTTP/1.1 429 Too Many Requests"
        assert (
            await _post_from_proxy(port, body, genuine, [(xff, "198.51.100.7")]) == b"HTTP/1.1 202 Accepted"
        )
        # Forwarded named instead: an X-Forwarded-For is not read, the proxy's own bucket counts
    h2 = _Harness(
        tmp_path,
        webhook_trusted_proxies="127.0.0.0/8",
        webhook_client_address_header="Forwarded",
        webhook_rate_per_second=0.001,
        webhook_burst=1,
        webhook_over_rate_verify_per_second=0,
    )
    async with await asyncio.start_server(h2.receiver._connection, host="127.0.0.1", port=0) as server2:
        port = server2.sockets[0].getsockname()[1]
        assert (
            await _post_from_proxy(port, body, forged, [(xff, "203.0.113.1")]) == b"HTTP/1.1 401 Unauthorized"
        )
        assert (
            await _post_from_proxy(port, body, forged, [(xff, "203.0.113.2")])
            == b"HTTP/1.1 429 Too Many Requests"
        )
        fwd = [("Forwarded", "for=198.51.100.7;proto=https")]
        assert await _post_from_proxy(port, body, genuine, fwd) == b"HTTP/1.1 202 Accepted"

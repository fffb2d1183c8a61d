"""An egress proxy in the way is named as such: ``ProxyRefused`` / ``ProxyUnreachable``.

The proxy here is a real TCP listener that answers every request itself, as a proxy does when its
policy refuses one (httpx is not mocked: the environment's proxy variables route it there). The
end-to-end proof through a real proxy server is tests/integration/operator/test_operator_proxy.py.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator

import pytest

from secretferry.service import client, errors


async def _answer_with(
    status: str, body: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    await reader.readuntil(b"\r\n\r\n")  # the request line and headers; bodies are not read
    head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    if body:
        head += "Content-Type: application/json\r\n"
    writer.write(head.encode() + b"\r\n" + body)
    await writer.drain()
    writer.close()


async def _listener(status: str, body: bytes = b"") -> AsyncIterator[str]:
    server = await asyncio.start_server(
        lambda r, w: _answer_with(status, body, r, w), host="127.0.0.1", port=0
    )
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(params=["403 Forbidden", "407 Proxy Authentication Required"])
async def refusing_proxy(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    # A policy refusal, and a proxy that wants credentials the operator was not given.
    async for url in _listener(request.param):
        yield url


@pytest.fixture
async def service_403_through_proxy() -> AsyncIterator[str]:
    body = json.dumps({"statusCode": 403, "message": "no access", "error": "PermissionDenied"}).encode()
    async for url in _listener("403 Forbidden", body):
        yield url


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _use_proxy(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, url)
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


async def _login(base_url: str) -> None:
    service = client.ServiceClient(base_url, timeout=5.0)
    try:
        await service.login_universal(client_id="id", client_secret="not-a-real-secret")
    finally:
        await service.aclose()


@pytest.mark.parametrize("base_url", ["http://secrets.example.test", "https://secrets.example.test"])
async def test_a_proxy_that_refuses_is_proxy_refused(
    monkeypatch: pytest.MonkeyPatch, refusing_proxy: str, base_url: str, request: pytest.FixtureRequest
) -> None:
    refusing_proxy_status = request.node.callspec.params["refusing_proxy"]
    # http: the proxy's own 403 page; https: a 403 to CONNECT (httpx's ProxyError).
    _use_proxy(monkeypatch, refusing_proxy)
    with pytest.raises(errors.ProxyRefused) as caught:
        await _login(base_url)
    assert caught.value.is_retriable
    if refusing_proxy_status.startswith("407"):  # the installer's fix named: credentials in the URL
        assert "egress proxy requires authentication" in caught.value.message
        assert "407" in caught.value.message
    else:
        assert "egress proxy refused" in caught.value.message
    assert "not-a-real-secret" not in str(caught.value)


async def test_the_proxy_credentials_are_never_in_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy that refuses the credentials it was given (407 again): the message names the proxy's
    # answer and where credentials go, never the user name or password from the proxy URL.
    async for url in _listener("407 Proxy Authentication Required"):
        _use_proxy(monkeypatch, url.replace("http://", "http://ferry-user:proxy-pass-word@"))
        for base_url in ("http://secrets.example.test", "https://secrets.example.test"):
            with pytest.raises(errors.ProxyRefused) as caught:
                await _login(base_url)
            text = f"{caught.value} {caught.value.message} {caught.value!r}"
            assert "407" in text
            assert "ferry-user" not in text and "proxy-pass-word" not in text


@pytest.mark.parametrize("base_url", ["http://secrets.example.test", "https://secrets.example.test"])
async def test_a_proxy_that_is_down_is_proxy_unreachable(
    monkeypatch: pytest.MonkeyPatch, base_url: str
) -> None:
    _use_proxy(monkeypatch, f"http://127.0.0.1:{_closed_port()}")
    with pytest.raises(errors.ProxyUnreachable) as caught:
        await _login(base_url)
    assert caught.value.is_retriable


async def test_the_services_own_403_through_a_proxy_stays_permission_denied(
    monkeypatch: pytest.MonkeyPatch, service_403_through_proxy: str
) -> None:
    _use_proxy(monkeypatch, service_403_through_proxy)
    with pytest.raises(errors.PermissionDenied):
        await _login("http://secrets.example.test")


async def test_without_a_proxy_a_refused_connect_is_plain_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _use_proxy(monkeypatch, "http://127.0.0.1:1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    with pytest.raises(errors.Unavailable) as caught:
        await _login(f"http://127.0.0.1:{_closed_port()}")
    assert not isinstance(caught.value, errors.ProxyUnreachable | errors.ProxyRefused)

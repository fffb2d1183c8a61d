"""An exec plugin's credential kept until it expires, shared by concurrent requests, renewed after a
401 (and the request sent once more), in virtual time (looptime): the clock is the event loop's.

The last tests put our client in front of a loopback endpoint that accepts one token only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import aiohttp
import pytest
from aiohttp import web

from secretferry.devcluster import certs
from secretferry.kube import access, client, errors, execcache, execplugin

START = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
PLUGIN = execplugin.ExecPlugin(command="get-token", api_version=execplugin.API_VERSIONS[1], user="dev")
TRUST = access.Access(server="http://127.0.0.1:1")


def loop_clock() -> datetime:
    """Wall time that moves with the event loop's (virtual, under looptime) time."""
    return START + timedelta(seconds=asyncio.get_running_loop().time())


@dataclass
class Plugin:
    """A stand-in runner: hands out ``tok-1``, ``tok-2``, … each valid for ``lifetime``; the
    run itself takes ``takes`` seconds (a cloud CLI's network call)."""

    lifetime: timedelta | None = timedelta(minutes=15)
    takes: float = 2.0
    fail: bool = False
    runs: list[datetime] = field(default_factory=list)

    async def __call__(self, plugin: execplugin.ExecPlugin) -> execplugin.ExecCredential:
        await asyncio.sleep(self.takes)
        if self.fail:
            raise errors.CredentialPluginFailed(
                0, "CredentialPluginFailed", f"{plugin.shown} exited with status 1"
            )
        self.runs.append(loop_clock())
        expires = None if self.lifetime is None else loop_clock() + self.lifetime
        return execplugin.ExecCredential(token=f"tok-{len(self.runs)}", expires_at=expires)


def _credentials(runner: Plugin, clock: Callable[[], datetime] = loop_clock) -> execcache.ExecCredentials:
    return execcache.ExecCredentials(PLUGIN, trust=TRUST, clock=clock, runner=runner)


@pytest.mark.looptime
async def test_the_credential_is_kept_until_it_expires() -> None:
    runner = Plugin()
    creds = _credentials(runner)
    first = await creds.current()
    assert first.authorization == "Bearer tok-1"
    await asyncio.sleep(14 * 60)
    assert await creds.current() is first
    await asyncio.sleep(60)  # 15 minutes after the run: expired
    second = await creds.current()
    assert second.authorization == "Bearer tok-2" and len(runner.runs) == 2
    assert creds.bearer_token() == "tok-2"


@pytest.mark.looptime
async def test_without_an_expiry_it_is_kept_until_refused() -> None:
    runner = Plugin(lifetime=None)
    creds = _credentials(runner)
    first = await creds.current()
    await asyncio.sleep(30 * 24 * 3600)
    assert await creds.current() is first and len(runner.runs) == 1
    renewed = await creds.rejected(first)
    assert renewed.authorization == "Bearer tok-2"


@pytest.mark.looptime
async def test_concurrent_requests_share_one_run() -> None:
    runner = Plugin()
    creds = _credentials(runner)
    presented = await asyncio.gather(*(creds.current() for _ in range(20)))
    assert len(runner.runs) == 1 and all(p is presented[0] for p in presented)
    await asyncio.sleep(15 * 60)
    again = await asyncio.gather(*(creds.current() for _ in range(20)))
    assert len(runner.runs) == 2 and all(p is again[0] for p in again)


@pytest.mark.looptime
async def test_after_a_401_the_plugin_runs_once_however_many_requests_were_refused() -> None:
    runner = Plugin()
    creds = _credentials(runner)
    refused = await creds.current()
    renewed = await asyncio.gather(*(creds.rejected(refused) for _ in range(5)))
    assert len(runner.runs) == 2 and all(p.authorization == "Bearer tok-2" for p in renewed)


@pytest.mark.looptime
async def test_a_failed_run_is_not_cached_and_the_next_request_tries_again() -> None:
    runner = Plugin()
    creds = _credentials(runner)
    await creds.current()
    await asyncio.sleep(15 * 60)
    runner.fail = True
    with pytest.raises(errors.CredentialPluginFailed, match="exited with status 1"):
        await creds.current()
    assert creds.bearer_token() is None  # the expired one is gone
    runner.fail = False
    assert (await creds.current()).authorization == "Bearer tok-2"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> certs.Pki:
    return certs.generate(tmp_path_factory.mktemp("pki"))


async def test_a_certificate_pair_becomes_its_own_tls_context(pki: certs.Pki) -> None:
    async def runner(plugin: execplugin.ExecPlugin) -> execplugin.ExecCredential:
        return execplugin.ExecCredential(
            cert_pem=pki.admin_cert.read_bytes(), key_pem=pki.admin_key.read_bytes()
        )

    async def broken(plugin: execplugin.ExecPlugin) -> execplugin.ExecCredential:
        return execplugin.ExecCredential(cert_pem=b"not pem", key_pem=b"secret-key-material")

    trust = access.Access(server="https://127.0.0.1:1", ca_file=pki.ca_cert)
    presented = await execcache.ExecCredentials(PLUGIN, trust=trust, runner=runner).current()
    assert presented.authorization is None and presented.tls is not None
    with pytest.raises(
        errors.CredentialPluginFailed, match="client certificate or key that is not usable"
    ) as caught:
        await execcache.ExecCredentials(PLUGIN, trust=trust, runner=broken).current()
    assert "secret-key-material" not in str(caught.value)


# --- our client: a 401 runs the plugin again and sends the request once more --------------------


@dataclass
class Endpoint:
    url: str
    accepted: set[str]
    seen: list[str] = field(default_factory=list)


@pytest.fixture
async def endpoint() -> AsyncIterator[Endpoint]:
    """Answers 200 to ``Bearer <accepted token>``, else the apiserver's 401 Status."""
    state = Endpoint("", {"tok-2"})

    async def answer(request: web.Request) -> web.Response:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        state.seen.append(token)
        if token in state.accepted:
            return web.json_response({"kind": "Thing", "body": await request.text()})
        return web.json_response(
            {
                "kind": "Status",
                "status": "Failure",
                "reason": "Unauthorized",
                "message": "Unauthorized",
                "code": 401,
            },
            status=401,
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield state
    finally:
        await runner.cleanup()


def _kube(endpoint: Endpoint, runner: Plugin) -> client.Kube:
    creds = execcache.ExecCredentials(PLUGIN, trust=access.Access(server=endpoint.url), runner=runner)
    return client.Kube(
        aiohttp.ClientSession(), server=endpoint.url, authorization=lambda: None, exec_credentials=creds
    )


async def test_a_refused_token_is_renewed_and_the_request_sent_again(endpoint: Endpoint) -> None:
    runner = Plugin(takes=0)
    kube = _kube(endpoint, runner)
    try:
        answer = await kube.request("POST", "/apis/x", body={"a": 1})
        assert answer == {"kind": "Thing", "body": '{"a": 1}'}  # the body went again too
        assert endpoint.seen == ["tok-1", "tok-2"] and len(runner.runs) == 2
        await kube.request("GET", "/apis/x")
        assert endpoint.seen[-1] == "tok-2" and len(runner.runs) == 2  # kept
        async with kube.stream("/apis/x", query={"watch": True}, read_timeout_seconds=5) as content:
            assert b"Thing" in await content.read()
    finally:
        await kube.close()


async def test_a_second_refusal_names_the_plugin_and_not_the_token(endpoint: Endpoint) -> None:
    endpoint.accepted = set()
    runner = Plugin(takes=0)
    kube = _kube(endpoint, runner)
    try:
        with pytest.raises(errors.ExecCredentialRefused) as caught:
            await kube.request("GET", "/api/v1/namespaces")
        with pytest.raises(errors.Unauthorized):
            async with kube.stream("/apis/x", query={}, read_timeout_seconds=5):
                pass
    finally:
        await kube.close()
    assert caught.value.message == (
        "GET /api/v1/namespaces: the apiserver refused the credential from the exec credential plugin"
        " 'get-token' of user 'dev', also after running it again"
    )
    assert "tok-" not in str(caught.value)
    assert endpoint.seen[:2] == ["tok-1", "tok-2"]  # one run again, one retry: not a loop

"""Auth sessions against a fake service (httpx.MockTransport) with injected clocks."""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from clock_fakes import Clock

from secretferry import logfields
from secretferry.service import auth, client, errors, events

BASE = "https://service.test"


def _error(status: int, error: str, message: str = "nope") -> httpx.Response:
    body = {"reqId": "req-1", "statusCode": status, "message": message, "error": error}
    return httpx.Response(status, json=body)


class FakeService:
    """Just enough of the service: logins, renew, revoke, one authenticated read and a stream."""

    def __init__(self) -> None:
        self.expires_in = 100
        self.max_ttl = 10_000
        self.login_delay = 0.0
        self.issued = 0
        self.valid: set[str] = set()
        self.jwts: list[str] = []
        self.logins = 0
        self.renews = 0
        self.revoked: list[str] = []
        self.reads = 0
        self.login_failure: httpx.Response | None = None
        self.renew_failure: httpx.Response | None = None
        self.revoke_failure: httpx.Response | None = None
        self.renew_new_token = False
        self.reject_as = (401, "UnauthorizedError")
        self.down = False  # a gateway answers 503 to everything
        self.login_attempts = 0
        self.revoke_calls = 0
        self.clock: Clock | None = None  # set: renewals follow the real server's max-TTL rule
        self.created: dict[str, float] = {}

    async def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        body = json.loads(request.content) if request.content else {}
        is_login = path.endswith("/auth/kubernetes-auth/login") or path.endswith("/auth/universal-auth/login")
        self.login_attempts += is_login
        if self.down:
            return _error(503, "ServiceUnavailable")
        if is_login:
            if "jwt" in body:
                self.jwts.append(body["jwt"])
            await asyncio.sleep(self.login_delay)
            self.logins += 1
            if self.login_failure is not None:
                return self.login_failure
            return self._issue()
        if path.endswith("/auth/token/renew"):
            self.renews += 1
            if self.renew_failure is not None or body["accessToken"] not in self.valid:
                return self.renew_failure or _error(401, "UnauthorizedError")
            # With a clock, the real rule: refused (token deleted) when now + TTL > createdAt + maxTTL.
            clock = self.clock
            if (
                clock is not None
                and clock.now + self.expires_in > self.created[body["accessToken"]] + self.max_ttl
            ):
                self.valid.discard(body["accessToken"])
                return _error(401, "UnauthorizedError", "Failed to renew MI access token past its Max TTL")
            if self.renew_new_token:
                return self._issue()
            return self._token_response(body["accessToken"])
        if path.endswith("/auth/token/revoke"):
            self.revoke_calls += 1
            if self.revoke_failure is not None:
                return self.revoke_failure
            self.revoked.append(body["accessToken"])
            self.valid.discard(body["accessToken"])
            return httpx.Response(200, json={"message": "revoked"})
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        if token not in self.valid:
            return _error(self.reject_as[0], self.reject_as[1])
        if path.endswith("/projects/slug/my-project"):
            self.reads += 1
            return httpx.Response(200, json={"project": {"id": "p-1", "slug": "my-project"}})
        if path.endswith("/events/subscribe/project-events"):
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=b": hi\n\n")
        return _error(404, "NotFound")

    def _issue(self) -> httpx.Response:
        self.issued += 1
        token = f"token-{self.issued}"
        self.valid.add(token)
        self.created[token] = self.clock.now if self.clock is not None else 0.0
        return self._token_response(token)

    def _token_response(self, token: str) -> httpx.Response:
        return httpx.Response(
            200,
            json={
                "accessToken": token,
                "expiresIn": self.expires_in,
                "accessTokenMaxTTL": self.max_ttl,
                "tokenType": "Bearer",
            },
        )


@pytest.fixture
def service() -> FakeService:
    return FakeService()


@pytest.fixture
async def api(service: FakeService) -> AsyncIterator[client.ServiceClient]:
    async with client.ServiceClient(BASE, transport=httpx.MockTransport(service.handler)) as c:
        yield c


class Minter:
    def __init__(self) -> None:
        self.count = 0

    async def __call__(self) -> str:
        self.count += 1
        return f"jwt-{self.count}"


def k8s_session(api: client.ServiceClient, clock: Clock | None = None, **kwargs: object) -> auth.AuthSession:
    clock = clock or Clock()
    creds = auth.KubernetesCredentials(identity_id="id-1", mint_jwt=Minter())
    return auth.AuthSession(api, creds, clock=clock, wall_clock=lambda: 1_700_000_000.0, **kwargs)  # type: ignore[arg-type]


async def read_project(c: client.ServiceClient) -> str:
    return (await c.get_project_by_slug("my-project")).id


@pytest.mark.looptime
async def test_thousand_concurrent_callers_cause_one_login(
    api: client.ServiceClient, service: FakeService
) -> None:
    service.login_delay = 0.02
    session = k8s_session(api)
    tokens = await asyncio.gather(*(session.token() for _ in range(1000)))
    assert set(tokens) == {"token-1"}
    assert service.logins == 1 and session.logins == 1


async def test_every_login_mints_a_fresh_jwt(api: client.ServiceClient, service: FakeService) -> None:
    session = k8s_session(api)
    assert await session.call(read_project) == "p-1"
    service.valid.clear()  # the service forgets the token (expired)
    assert await session.call(read_project) == "p-1"
    assert service.jwts == ["jwt-1", "jwt-2"]
    assert session.logins == 2


@pytest.mark.parametrize("rejection", [(401, "UnauthorizedError"), (403, "TokenError")])
async def test_call_relogs_in_once_and_retries(
    api: client.ServiceClient, service: FakeService, rejection: tuple[int, str]
) -> None:
    service.reject_as = rejection
    session = k8s_session(api)
    await session.token()
    service.valid.clear()
    assert await session.call(read_project) == "p-1"
    assert service.logins == 2 and service.reads == 1


async def test_second_auth_failure_is_raised(api: client.ServiceClient, service: FakeService) -> None:
    session = k8s_session(api)

    async def always_rejected(c: client.ServiceClient) -> None:
        raise errors.AuthenticationError("rejected", status_code=401)

    with pytest.raises(errors.AuthenticationError):
        await session.call(always_rejected)
    assert service.logins == 2  # the first login, then exactly one re-login


@pytest.mark.looptime
async def test_concurrent_rejections_cause_one_relogin(
    api: client.ServiceClient, service: FakeService
) -> None:
    session = k8s_session(api)
    await session.token()
    service.valid.clear()
    service.login_delay = 0.01
    results = await asyncio.gather(*(session.call(read_project) for _ in range(50)))
    assert results == ["p-1"] * 50
    assert service.logins == 2


async def test_invalidate_ignores_a_token_already_replaced(api: client.ServiceClient) -> None:
    session = k8s_session(api)
    first = await session.token()
    session.invalidate(first)
    second = await session.token()
    session.invalidate(first)  # a late failure with the old token
    assert await session.token() == second == "token-2"


async def test_renews_inside_the_margin(api: client.ServiceClient, service: FakeService) -> None:
    clock = Clock()
    session = k8s_session(api, clock)
    assert await session.token() == "token-1"
    clock.now += 79  # 21 % left: outside the 20 % margin
    await session.token()
    assert service.renews == 0
    clock.now += 2  # 19 % left
    assert await session.token() == "token-1"
    assert service.renews == 1 and session.renewals == 1 and service.logins == 1
    clock.now += 79  # the renewed token is fresh again
    await session.token()
    assert service.renews == 1


async def test_failed_renewal_falls_back_to_login(api: client.ServiceClient, service: FakeService) -> None:
    clock = Clock()
    session = k8s_session(api, clock)
    await session.token()
    service.renew_failure = _error(401, "UnauthorizedError")
    clock.now += 90
    assert await session.token() == "token-2"
    assert service.renews == 1 and service.logins == 2
    assert service.jwts == ["jwt-1", "jwt-2"]


async def test_near_max_ttl_logs_in_instead_of_renewing(
    api: client.ServiceClient, service: FakeService
) -> None:
    service.max_ttl = 150
    clock = Clock()
    session = k8s_session(api, clock)
    await session.token()
    clock.now += 85
    # 65 s to the max TTL: a renewal for another 100 s would pass it, so the service would refuse
    # it; a fresh login instead.
    assert await session.token() == "token-2"
    assert service.renews == 0 and service.logins == 2


async def test_expiry_is_capped_by_max_ttl_and_reported_in_wall_time(
    api: client.ServiceClient, service: FakeService
) -> None:
    service.expires_in, service.max_ttl = 100, 60
    session = k8s_session(api)
    assert session.expires_at is None and session.last_login_at is None
    await session.token()
    epoch = datetime.datetime.fromtimestamp(1_700_000_000.0, tz=datetime.UTC)
    assert session.expires_at == epoch + datetime.timedelta(seconds=60)
    assert session.last_login_at == epoch


async def test_refresh_failure_keeps_a_still_valid_token(
    api: client.ServiceClient, service: FakeService
) -> None:
    clock = Clock()
    session = k8s_session(api, clock)
    await session.token()
    service.renew_failure = _error(503, "InternalServerError")
    service.login_failure = _error(503, "InternalServerError")
    clock.now += 90
    assert await session.token() == "token-1"
    attempts = service.renews + service.logins
    assert await session.token() == "token-1"  # backing off: no new attempt
    assert service.renews + service.logins == attempts
    clock.now += 20  # expired now: the failure surfaces
    with pytest.raises(errors.ServiceError):
        for _ in range(20):
            clock.now += 400  # past any backoff
            await session.token()


@pytest.mark.parametrize(
    ("response", "raised"),
    [
        (_error(401, "UnauthorizedError"), errors.AuthenticationError),
        (_error(403, "PermissionDenied"), errors.PermissionDenied),
        (_error(503, "ServiceUnavailable"), errors.Unavailable),
    ],
)
async def test_login_failure_propagates_and_backs_off(
    api: client.ServiceClient, service: FakeService, response: httpx.Response, raised: type[Exception]
) -> None:
    service.login_failure = response
    clock = Clock()
    session = k8s_session(api, clock)
    with pytest.raises(raised):
        await session.token()
    results = await asyncio.gather(*(session.token() for _ in range(100)), return_exceptions=True)
    assert all(isinstance(r, raised) for r in results)
    assert service.logins == 1 and session.login_failures == 1  # no login storm
    clock.now += 1000
    service.login_failure = None
    assert await session.token() == "token-1"


async def test_universal_credentials(api: client.ServiceClient, service: FakeService) -> None:
    creds = auth.UniversalCredentials(client_id="cid", client_secret="very-secret")
    session = auth.AuthSession(api, creds)
    assert await session.call(read_project) == "p-1"
    assert "very-secret" not in repr(creds)


async def test_static_token_is_never_replaced(api: client.ServiceClient, service: FakeService) -> None:
    service.valid.add("static")
    session = auth.AuthSession(api, auth.StaticTokenCredentials("static"))
    assert await session.call(read_project) == "p-1"
    assert session.expires_at is None
    service.valid.clear()
    with pytest.raises(errors.AuthenticationError):
        await session.call(read_project)
    await session.revoke()
    assert service.logins == 0 and service.revoked == []


async def test_revoke_and_close(api: client.ServiceClient, service: FakeService) -> None:
    session = k8s_session(api)
    await session.token()
    await session.revoke()
    assert service.revoked == ["token-1"] and not session.has_token
    await session.token()
    await session.close()  # shutdown: revokes, and waits for it (bounded)
    assert service.revoked == ["token-1", "token-2"] and not session.has_token
    with pytest.raises(errors.AuthenticationError):
        await session.token()  # a closed session never logs in again
    assert service.logins == 2


async def test_tokens_stay_out_of_repr_and_logs(
    api: client.ServiceClient, service: FakeService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    session = k8s_session(api)
    await session.token()
    service.valid.clear()
    await session.call(read_project)
    assert "token-" not in repr(session)
    assert "token-1" not in caplog.text and "token-2" not in caplog.text and "jwt-" not in caplog.text


async def test_subscribe_drops_a_rejected_token(api: client.ServiceClient, service: FakeService) -> None:
    session = k8s_session(api)
    register = [events.EventRegistration(event=events.SECRET_UPDATE)]
    async with session.subscribe("p-1", register) as messages:
        assert isinstance(await anext(messages), events.Heartbeat)
    service.valid.clear()
    with pytest.raises(errors.AuthenticationError):
        async with session.subscribe("p-1", register):
            pass
    assert not session.has_token
    async with session.subscribe("p-1", register) as messages:
        await anext(messages)
    assert service.logins == 2


# --- replaced tokens are revoked; one login per identity after an outage ---------------------------


async def settle() -> None:
    """Let background revocations (answered at once by the mock transport) finish: no real sleep."""
    for _ in range(20):
        await asyncio.sleep(0)


async def test_relogin_revokes_the_rejected_token(api: client.ServiceClient, service: FakeService) -> None:
    session = k8s_session(api)
    await session.token()
    service.valid.discard("token-1")  # rejected from now on, e.g. after a failed stream re-check
    assert await session.call(read_project) == "p-1"
    await settle()
    assert service.revoked == ["token-1"] and session.revocations == 1


@pytest.mark.parametrize("new_token", [True, False])
async def test_renewal_never_revokes(
    api: client.ServiceClient, service: FakeService, new_token: bool
) -> None:
    """A renewed token is the same token at the service even when it comes back re-signed (newer
    servers): revoking the old string would revoke the renewed one with it."""
    clock = Clock()
    session = k8s_session(api, clock)
    await session.token()
    service.renew_new_token = new_token
    clock.now += 90  # inside the renewal margin
    assert await session.token() == ("token-2" if new_token else "token-1")
    await settle()
    assert service.revoked == [] and service.revoke_calls == 0 and service.logins == 1


@pytest.mark.parametrize(
    ("failure", "revoked"),
    [((401, "UnauthorizedError"), []), ((503, "InternalServerError"), ["token-1"])],
    ids=["refused-dead", "failed-alive"],
)
async def test_login_after_failed_renewal_revokes_only_a_live_token(
    api: client.ServiceClient, service: FakeService, failure: tuple[int, str], revoked: list[str]
) -> None:
    """A refused renewal (401) is a dead token (the service deleted it): no revoke, which would only
    earn another 401. A renewal that failed otherwise leaves a live token: revoked once replaced."""
    clock = Clock()
    session = k8s_session(api, clock)
    await session.token()
    service.renew_failure = _error(*failure)
    clock.now += 90
    assert await session.token() == "token-2"
    await settle()
    assert service.revoked == revoked and service.revoke_calls == len(revoked)


async def test_a_failed_revocation_never_fails_the_caller(
    api: client.ServiceClient, service: FakeService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    service.revoke_failure = _error(503, "ServiceUnavailable")
    session = k8s_session(api)
    await session.token()
    service.valid.discard("token-1")
    assert await session.call(read_project) == "p-1"
    await settle()
    assert service.revoked == [] and session.revocations == 0
    assert "could not revoke" in caplog.text and "token-1" not in caplog.text


async def test_retired_session_revokes_after_the_grace_and_never_logs_in(
    api: client.ServiceClient, service: FakeService
) -> None:
    session = k8s_session(api, retire_grace_seconds=0)
    await session.token()
    session.retire()  # the identity was changed or removed
    await settle()
    assert service.revoked == ["token-1"]
    with pytest.raises(errors.AuthenticationError, match="retired"):
        await session.token()
    assert service.logins == 1


async def test_retired_session_keeps_working_during_the_grace(
    api: client.ServiceClient, service: FakeService
) -> None:
    session = k8s_session(api, retire_grace_seconds=3600)
    await session.token()
    session.retire()
    assert await session.call(read_project) == "p-1"  # a reconcile already under way finishes
    await session.close()  # shutdown does not wait for the grace
    assert service.revoked == ["token-1"]


async def test_static_tokens_are_never_revoked(api: client.ServiceClient, service: FakeService) -> None:
    service.valid.add("static")
    session = auth.AuthSession(api, auth.StaticTokenCredentials("static"), retire_grace_seconds=0)
    await session.token()
    session.retire()
    await session.close()
    await settle()
    assert service.revoked == []


async def test_logins_are_reported_with_method_and_result(
    api: client.ServiceClient, service: FakeService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO")
    seen: list[tuple[str, str]] = []
    session = k8s_session(api, name="ns/ferry", on_login=lambda method, result: seen.append((method, result)))
    await session.token()
    service.valid.clear()
    await session.call(read_project)
    service.login_failure = _error(401, "UnauthorizedError")
    service.valid.clear()
    with pytest.raises(errors.AuthenticationError):
        await session.call(read_project)
    assert seen == [
        ("kubernetes", "success"),
        ("kubernetes", "success"),
        ("kubernetes", "AuthenticationError"),
    ]
    logins = [r.getMessage() for r in caplog.records if r.getMessage().startswith("logged in as")]
    assert logins == [
        f"logged in as ns/ferry (kubernetes): {auth.FIRST_LOGIN}",
        f"logged in as ns/ferry (kubernetes): {auth.TOKEN_REJECTED}",
    ]
    # Every line of the session names its identity as a structured field, failures included.
    lines = [r for r in caplog.records if r.name == auth.__name__]
    assert lines and all(getattr(r, logfields.IDENTITY, None) == "ns/ferry" for r in lines)
    assert any(r.levelname == "WARNING" for r in lines)


async def test_after_an_outage_one_login_per_identity(
    api: client.ServiceClient, service: FakeService
) -> None:
    """The token expires while the service is down: many callers cause one failed login, then
    the login backoff holds; once the host answers again, the next caller logs in at once (the
    backoff is not sat out) and everyone else shares that one login."""
    clock = Clock()
    session = k8s_session(api, clock)
    await session.token()
    service.down = True
    clock.now += 200  # token-1 expired during the outage
    results = await asyncio.gather(*(session.token() for _ in range(100)), return_exceptions=True)
    assert all(isinstance(r, errors.Unavailable) for r in results)
    results = await asyncio.gather(*(session.token() for _ in range(100)), return_exceptions=True)
    assert all(isinstance(r, errors.Unavailable) for r in results)
    assert service.login_attempts == 2  # the first login, one failed attempt, no storm
    assert api.host_health.is_down  # the failed login and the connection's probe both found 503

    service.down = False
    api.host_health.answered()  # what the connection reports when the probe gets an answer
    tokens = await asyncio.gather(*(session.token() for _ in range(100)))
    assert set(tokens) == {"token-2"}
    assert service.login_attempts == 3 and session.logins == 2
    await settle()
    assert service.revoked == ["token-1"]


async def test_a_rate_limited_login_waits_out_its_backoff_even_after_recovery(
    api: client.ServiceClient, service: FakeService
) -> None:
    clock = Clock()
    session = k8s_session(api, clock)
    service.login_failure = _error(429, "RateLimitExceeded")
    with pytest.raises(errors.RateLimited):
        await session.token()
    service.login_failure = None
    api.host_health.failed()
    api.host_health.failed()
    api.host_health.answered()  # some other call got through
    with pytest.raises(errors.RateLimited):
        await session.token()  # retry-after (60 s) not over
    clock.now += 61
    assert await session.token() == "token-1"


@pytest.mark.parametrize(
    ("ttl", "max_ttl", "lifetimes", "renews", "logins"),
    [
        (100, 100, 5, 0, 6),  # TTL = max TTL (the default): never renewable, one login per lifetime
        (100, 10_000, 5, 5, 1),  # plenty of room: renewals only
        (100, 250, 5, 3, 3),  # one renewal fits per login, then a fresh login
    ],
    ids=["ttl-equals-max", "room", "one-renewal-fits"],
)
async def test_renews_only_when_the_service_would_accept(
    api: client.ServiceClient,
    service: FakeService,
    ttl: int,
    max_ttl: int,
    lifetimes: int,
    renews: int,
    logins: int,
) -> None:
    """Against the real renew rule: every renewal tried succeeds, no call is wasted on a 401, and
    nothing dead is revoked."""
    clock = Clock()
    service.clock, service.expires_in, service.max_ttl = clock, ttl, max_ttl
    session = k8s_session(api, clock)
    await session.token()
    for _ in range(lifetimes):
        clock.now += 0.85 * ttl  # past the refresh point (80 % of the lifetime)
        token = await session.token()
        assert token in service.valid
    await settle()
    assert (service.renews, service.logins) == (renews, logins)
    assert session.renewals == renews  # every renewal tried succeeded
    assert service.revoke_calls == len(service.revoked) == logins - 1  # each replaced token was alive

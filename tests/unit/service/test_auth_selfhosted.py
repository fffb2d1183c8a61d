"""The auth answers of the 2024-10 self-hosted release, as the operator's client reads them.

Against the in-process dev server in that profile (``--profile selfhosted-2024-10``) where the dev
server can give the answer, with ``httpx.MockTransport`` where only the real server's text would:
a 404 login is a rejected login (not a missing source) retried only after a long pause; a 401
``ValidationFailure`` is a refused request, never "log in again"; a TokenReview that ignores the
identity's audience is recognised from the apiserver's words.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from clock_fakes import Clock

from secretferry.devserver import profiles
from secretferry.devserver.app import create_app
from secretferry.devserver.config import DevServerConfig
from secretferry.reconcile import outcomes, reasons
from secretferry.service import auth, client, credentials, errors

BASE = "http://service.test"
API_AUD = "https://kubernetes.default.svc.cluster.local"
REVIEW_TEXT = (
    '[invalid bearer token, token audiences ["infisical-real"] is invalid for the target audiences '
    f'["{API_AUD}"]]'
)
SEED: dict[str, Any] = {
    "organizations": [{"id": "org-1", "name": "Org", "slug": "org"}],
    "identities": [
        {
            "id": "aaaaaaaa-0000-4000-8000-00000000000a",
            "name": "reader",
            "organization": "org",
            "universalAuth": {"clientId": "cid", "clientSecret": "csecret"},
        }
    ],
}


@pytest.fixture
async def selfhosted() -> AsyncIterator[client.ServiceClient]:
    clock = Clock(1_800_000_000.0)
    app = create_app(DevServerConfig(seed=SEED, clock=clock, **profiles.overrides("selfhosted-2024-10")))
    async with client.ServiceClient(BASE, transport=httpx.ASGITransport(app=app)) as c:
        yield c


async def test_unknown_client_id_is_a_rejected_login_retried_after_a_long_pause(
    selfhosted: client.ServiceClient,
) -> None:
    clock = Clock()
    logins: list[str] = []
    session = auth.AuthSession(
        selfhosted,
        auth.UniversalCredentials(client_id="nobody", client_secret="x"),
        clock=clock,
        on_login=lambda method, result: logins.append(result),
    )
    with pytest.raises(errors.LoginRejected) as caught:
        await session.token()
    assert caught.value.status_code == 404
    assert "knows no such client id" in caught.value.message and "service said" in caught.value.message
    problem = outcomes.from_service_error(caught.value, scope_text="login")
    assert problem.reason == reasons.AUTH_FAILED and not problem.retriable
    for _ in range(10):  # callers over the next minutes get the remembered refusal, no login
        clock.now += 55
        with pytest.raises(errors.LoginRejected):
            await session.token()
    assert logins == ["LoginRejected"]
    clock.now += errors.LoginRejected.retry_after_seconds
    with pytest.raises(errors.LoginRejected):
        await session.token()
    assert logins == ["LoginRejected", "LoginRejected"]


def _mock(handler: Any) -> client.ServiceClient:
    return client.ServiceClient(BASE, transport=httpx.MockTransport(handler))


async def test_a_401_validation_failure_is_no_expired_token() -> None:
    calls = {"login": 0, "read": 0}

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/login"):
            calls["login"] += 1
            return httpx.Response(200, json={"accessToken": "t", "expiresIn": 3600, "accessTokenMaxTTL": 0})
        calls["read"] += 1
        body = {"statusCode": 401, "error": "ValidationFailure", "message": "Invalid environment"}
        return httpx.Response(401, json=body)

    async with _mock(handler) as api:
        session = auth.AuthSession(api, auth.UniversalCredentials(client_id="c", client_secret="s"))
        with pytest.raises(errors.ValidationError) as caught:
            await session.call(lambda c: c.get_project_by_slug("p"))
    assert calls == {"login": 1, "read": 1}  # no re-login, no retry
    problem = outcomes.from_service_error(caught.value, scope_text="source 1")
    assert problem.reason == reasons.SOURCE_NOT_FOUND and "Invalid environment" in problem.message


def _review_refusal(target: str) -> httpx.Response:
    text = REVIEW_TEXT.replace(API_AUD, target)
    return httpx.Response(
        401, json={"statusCode": 401, "message": text, "error": "KubernetesTokenReviewError"}
    )


@pytest.mark.parametrize(
    ("target", "expected", "reason"),
    [
        (API_AUD, errors.ServerIgnoresAudience, reasons.SERVER_IGNORES_AUDIENCE),
        ("some-other-audience", errors.TokenReviewAudienceRejected, reasons.AUTH_FAILED),
    ],
    ids=["server-ignores-audience", "plain-mismatch"],
)
async def test_a_tokenreview_audience_refusal_is_recognised(
    target: str, expected: type[errors.ServiceError], reason: str
) -> None:
    logins = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal logins
        logins += 1
        assert json.loads(request.content)["jwt"] == "jwt"
        return _review_refusal(target)

    async def mint() -> str:
        return "jwt"

    clock = Clock()
    async with _mock(handler) as api:
        creds = credentials.KubernetesCredentials(
            identity_id="id-1", mint_jwt=mint, api_audiences=lambda: frozenset({API_AUD})
        )
        session = auth.AuthSession(api, creds, clock=clock)
        with pytest.raises(errors.TokenReviewAudienceRejected) as caught:
            await session.token()
        assert type(caught.value) is expected
        assert caught.value.token_audiences == ("infisical-real",) and caught.value.target_audiences == (
            target,
        )
        problem = outcomes.from_service_error(caught.value, scope_text="login")
        assert problem.reason == reason and not problem.retriable
        if expected is errors.ServerIgnoresAudience:
            assert "allowAPIServerAudience" in problem.message and "Upgrade the service" in problem.message
        # Nothing fixes it by itself: no second login for a long while (an identity change makes
        # a new session, which tries at once).
        clock.now += 590
        with pytest.raises(errors.TokenReviewAudienceRejected):
            await session.token()
        assert logins == 1

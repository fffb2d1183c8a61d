"""The auth side of ``--profile selfhosted-2024-10``: its error shapes, next to today's (``newest``)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from devserver_fixtures import ADMIN, SEED, VIEWER_ID
from fastapi import FastAPI

from secretferry.devserver import cli, profiles, tokenreview
from secretferry.devserver.errors import BadRequest

UA = "/api/v1/auth/universal-auth/login"
K8S = "/api/v1/auth/kubernetes-auth/login"


def _seed() -> dict[str, Any]:
    seed = copy.deepcopy(SEED)
    seed["identities"][0]["kubernetesAuth"]["tokenReviewerJwt"] = "reviewer"  # required there
    return seed


@pytest.fixture(params=["newest", "selfhosted-2024-10"])
async def profiled(
    request: pytest.FixtureRequest, make_app: Callable[..., FastAPI]
) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    app = make_app(seed=_seed(), **profiles.overrides(request.param))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dev") as c:
        yield request.param, c


async def test_unknown_client_id(profiled: tuple[str, httpx.AsyncClient]) -> None:
    profile, c = profiled
    r = await c.post(UA, json={"clientId": "nobody", "clientSecret": "x"})
    if profile == "newest":
        assert r.status_code == 401 and r.json()["error"] == "UnauthorizedError"
        return
    assert r.status_code == 404
    assert r.json() == {
        "statusCode": 404,
        "message": "No identity with specified client ID was found",
        "error": "NotFound",
    }


async def test_identity_without_kubernetes_auth_is_404(profiled: tuple[str, httpx.AsyncClient]) -> None:
    profile, c = profiled
    r = await c.post(K8S, json={"identityId": VIEWER_ID, "jwt": "a.b.c"})
    assert r.status_code == 404 and r.json()["error"] == "NotFound"
    assert ("reqId" in r.json()) is (profile == "newest")


async def test_validation_failure(profiled: tuple[str, httpx.AsyncClient]) -> None:
    profile, c = profiled
    r = await c.get(
        "/api/v3/secrets/raw", params={"workspaceId": "proj", "recursive": "maybe"}, headers=ADMIN
    )
    body = r.json()
    assert body["error"] == "ValidationFailure" and isinstance(body["message"], list)
    if profile == "newest":
        assert r.status_code == 422 and "reqId" in body
    else:
        assert r.status_code == 401 and "reqId" not in body


def test_kubernetes_auth_needs_a_reviewer_jwt_there(make_app: Callable[..., FastAPI]) -> None:
    make_app(seed=copy.deepcopy(SEED))  # today's server: the client's own jwt reviews itself
    with pytest.raises(BadRequest, match="tokenReviewerJwt"):
        make_app(seed=copy.deepcopy(SEED), **profiles.overrides("selfhosted-2024-10"))


@pytest.mark.parametrize(("profile", "verified"), [("newest", True), ("selfhosted-2024-10", False)])
async def test_without_a_ca_the_old_server_does_not_verify_the_apiserver(
    monkeypatch: pytest.MonkeyPatch, profile: str, verified: bool
) -> None:
    """``rejectUnauthorized: !!caCert`` on the 2024-10 release; system roots on today's server."""
    seen: list[object] = []

    class Recorder:
        def __init__(self, *, verify: object, timeout: float) -> None:
            seen.append(verify)

        async def __aenter__(self) -> Recorder:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

        async def post(self, url: str, **kwargs: Any) -> httpx.Response:
            seen.append(kwargs["json"]["spec"])
            return httpx.Response(200, json={"status": {"authenticated": False}})

    monkeypatch.setattr(tokenreview.httpx, "AsyncClient", Recorder)
    config = {"kubernetesHost": "https://apiserver", "allowedAudience": "svc"}
    overrides = profiles.overrides(profile)
    await tokenreview.review(
        config,
        "jwt",
        send_audiences=overrides.get("tokenreview_audiences", True),
        verify_without_ca=overrides.get("tokenreview_verify_without_ca", True),
    )
    assert seen[0] is verified
    assert ("audiences" in seen[1]) is verified  # today's server sends its allowed audience


def test_the_command_line_profile_carries_the_auth_differences() -> None:
    config = cli.config_from(cli.parser().parse_args(["--profile", "selfhosted-2024-10"]))
    assert (config.tokenreview_audiences, config.tokenreview_verify_without_ca) == (False, False)
    assert (config.require_token_reviewer_jwt, config.unknown_client_id_status) == (True, 404)
    assert (config.validation_status, config.error_req_id) == (401, False)
    newest = cli.config_from(cli.parser().parse_args([]))
    assert (newest.validation_status, newest.error_req_id, newest.unknown_client_id_status) == (
        422,
        True,
        401,
    )

"""Contract: machine-identity login, renew and revoke through ``ServiceClient`` (real HTTP)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from contract_support import (
    ADMIN,
    ADMIN_CLIENT_ID,
    ADMIN_CLIENT_SECRET,
    ADMIN_TOKEN_TTL,
    EVENTS_RECHECK,
    LIMITED_TOKEN,
    PROJECT,
    client,
    dev_server,
    request_count,
)

from secretferry.devserver.testing import DevServer
from secretferry.service import errors
from secretferry.service.events import SECRET_UPDATE, EventRegistration
from secretferry.service.models import ListSecretsQuery, SecretList

pytestmark = pytest.mark.integration

DEV_ROOT = ListSecretsQuery(project_id=PROJECT, environment="dev")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with dev_server(tmp_path_factory) as running:
        yield running


@pytest.fixture(scope="module")
def server_403(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """Newer servers answer an expired token 403 with error TokenError."""
    with dev_server(tmp_path_factory, "--token-error-status", "403") as running:
        yield running


async def test_universal_login_renew_revoke(server: DevServer) -> None:
    async with client(server, token=None) as anonymous:
        login = await anonymous.login_universal(client_id=ADMIN_CLIENT_ID, client_secret=ADMIN_CLIENT_SECRET)
        assert login.token_type == "Bearer"
        assert 0 < login.expires_in <= ADMIN_TOKEN_TTL
        assert login.access_token_max_ttl == 86400
        assert login.access_token not in repr(login)

        authed = anonymous.with_token(login.access_token)
        assert isinstance(await authed.list_secrets(DEV_ROOT), SecretList)

        renewed = await anonymous.renew_token(login.access_token)
        assert renewed.access_token == login.access_token
        assert 0 < renewed.expires_in <= ADMIN_TOKEN_TTL

        await anonymous.revoke_token(login.access_token)
        with pytest.raises(errors.AuthenticationError) as revoked:
            await authed.list_secrets(DEV_ROOT)
        assert revoked.value.status_code == 401
        assert not isinstance(revoked.value, errors.PermissionDenied)
        with pytest.raises(errors.AuthenticationError):
            await anonymous.renew_token(login.access_token)


async def test_wrong_secret_is_authentication_error(server: DevServer) -> None:
    async with client(server, token=None) as anonymous:
        with pytest.raises(errors.AuthenticationError) as wrong:
            await anonymous.login_universal(client_id="lockable-client-id", client_secret="not-the-secret")
        assert wrong.value.status_code == 401
        with pytest.raises(errors.AuthenticationError):
            await anonymous.login_universal(client_id="no-such-client", client_secret="whatever")
        # One failure is below the lockout threshold: the right secret still works.
        login = await anonymous.login_universal(
            client_id="lockable-client-id", client_secret="lockable-secret"
        )
        assert login.access_token


async def test_unknown_or_missing_token(server: DevServer) -> None:
    async with client(server, token="not-a-token") as bogus:
        with pytest.raises(errors.AuthenticationError) as unknown:
            await bogus.list_secrets(DEV_ROOT)
        assert unknown.value.status_code == 401
    before = request_count(server)
    async with client(server, token=None) as anonymous:
        with pytest.raises(errors.AuthenticationError):
            await anonymous.list_secrets(DEV_ROOT)  # refused before any request: no token to send
    assert request_count(server) == before


async def test_login_input_checked_client_side(server: DevServer) -> None:
    before = request_count(server)
    async with client(server, token=None) as anonymous:
        with pytest.raises(errors.ValidationError) as empty_id:
            await anonymous.login_universal(client_id="", client_secret="x")
        assert empty_id.value.field == "clientId"
        with pytest.raises(errors.ValidationError) as empty_token:
            await anonymous.renew_token("")
        assert empty_token.value.field == "accessToken"
    assert request_count(server) == before


async def test_expired_token_403_token_error_is_authentication_error(server_403: DevServer) -> None:
    token = server_403.issue_token(ADMIN)
    async with client(server_403, token=token) as service:
        assert isinstance(await service.list_secrets(DEV_ROOT), SecretList)
        assert server_403.expire_tokens(ADMIN) >= 1
        with pytest.raises(errors.AuthenticationError) as expired:
            await service.list_secrets(DEV_ROOT)
    assert expired.value.status_code == 403
    assert not isinstance(expired.value, errors.PermissionDenied)


async def test_subscribe_with_expired_token_403_is_authentication_error(server_403: DevServer) -> None:
    token = server_403.issue_token(EVENTS_RECHECK)  # its own identity: expiry is per identity
    server_403.expire_tokens(EVENTS_RECHECK)
    registrations = [EventRegistration(SECRET_UPDATE, "dev", "/")]
    async with client(server_403, token=token) as service:
        with pytest.raises(errors.AuthenticationError) as expired:
            async with service.subscribe_project_events(PROJECT, registrations):
                pytest.fail("subscribed with an expired token")
    assert expired.value.status_code == 403
    assert not isinstance(expired.value, errors.PermissionDenied | errors.StreamError)


async def test_real_permission_403_is_still_permission_denied(server_403: DevServer) -> None:
    async with client(server_403, token=LIMITED_TOKEN) as limited:
        with pytest.raises(errors.PermissionDenied) as denied:
            await limited.list_secrets(DEV_ROOT)
    assert denied.value.status_code == 403
    assert denied.value.details

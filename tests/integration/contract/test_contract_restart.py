"""Contract: a restart of the dev server on the same SQLite file loses nothing."""

from __future__ import annotations

import datetime

import pytest
from contract_support import (
    ADMIN_CLIENT_ID,
    ADMIN_CLIENT_SECRET,
    ADMIN_TOKEN,
    PRIV_TARGET,
    PROJECT,
    PROJECT_SLUG,
    client,
    dev_server,
)

from secretferry.service.models import ListSecretsQuery, SecretList

pytestmark = pytest.mark.integration

QUERY = ListSecretsQuery(
    project_id=PROJECT, environment="prod", secret_path="/", recursive=True, include_imports=False
)


async def _snapshot(base: object, token: str) -> dict[tuple[str | None, str], str]:
    async with client(base, token=token) as service:  # type: ignore[arg-type]
        listed = await service.list_secrets(QUERY)
    assert isinstance(listed, SecretList)
    return {(s.secret_path, s.secret_key): s.secret_value for s in listed.secrets}


async def test_restart_keeps_secrets_tokens_and_privileges(tmp_path_factory: pytest.TempPathFactory) -> None:
    start = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
    with dev_server(tmp_path_factory) as server:
        async with client(server, token=None) as anonymous:
            login = await anonymous.login_universal(
                client_id=ADMIN_CLIENT_ID, client_secret=ADMIN_CLIENT_SECRET
            )
            service = anonymous.with_token(login.access_token)
            await service.create_secret(
                "AFTER_RESTART", project_id=PROJECT, environment="prod", secret_path="/kept", value="v"
            )
            await service.delete_secret(
                "SENTRY_DSN", project_id=PROJECT, environment="prod", secret_path="/shared"
            )
            await service.create_identity_privilege_temporary(
                identity_id=PRIV_TARGET,
                project_slug=PROJECT_SLUG,
                slug="kept",
                temporary_range="1h",
                temporary_access_start_time=start,
                privilege_permission={
                    "actions": ["read"],
                    "subject": "secrets",
                    "conditions": {"environment": "prod"},
                },
            )
        before = await _snapshot(server, login.access_token)
        assert before[("/kept", "AFTER_RESTART")] == "v"
        assert ("/shared", "SENTRY_DSN") not in before

        server.restart()

        # The same login token still works; the seed is not re-applied (the deletion stays).
        assert await _snapshot(server, login.access_token) == before
        assert await _snapshot(server, ADMIN_TOKEN) == before
        async with client(server, token=login.access_token) as service:
            renewed = await service.renew_token(login.access_token)
            assert renewed.access_token == login.access_token
            kept = await service.get_identity_privilege(
                "kept", identity_id=PRIV_TARGET, project_slug=PROJECT_SLUG
            )
            assert kept.temporary_access_end_time == start + datetime.timedelta(hours=1)
            relogin = await service.login_universal(
                client_id=ADMIN_CLIENT_ID, client_secret=ADMIN_CLIENT_SECRET
            )
            assert relogin.access_token != login.access_token

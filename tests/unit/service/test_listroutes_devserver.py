"""v3 raw lists what v4 lists: the in-process dev server with and without its v4 routes.

Both servers hold the same seed (references within and across environments, an import, nested
folders); the operator's fetcher reads every kind of scope from each, and the answers must be the
same secrets with the same values, paths and imports (ids and timestamps are the store's own).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from secretferry.devserver.app import create_app
from secretferry.devserver.config import DevServerConfig
from secretferry.service import auth, client, errors, fetcher, listroutes, models, scopes

PROJECT = "22222222-2222-4222-8222-222222222222"
TOKEN = "reader-token"
SEED: dict[str, Any] = {
    "organizations": [{"id": "org-1", "name": "Org", "slug": "org"}],
    "projects": [
        {
            "id": PROJECT,
            "slug": "proj",
            "environments": [{"slug": "dev", "name": "Dev"}, {"slug": "prod", "name": "Prod"}],
            "secrets": [
                {"environment": "dev", "key": "A", "value": "a"},
                {"environment": "dev", "key": "B", "value": "ref-${A}"},
                {"environment": "dev", "path": "/app", "key": "C", "value": "${prod.shared.S1}-c"},
                {"environment": "dev", "path": "/app/deep", "key": "D", "value": "d-${dev.app.C}"},
                {"environment": "prod", "path": "/shared", "key": "S1", "value": "s1"},
            ],
            "imports": [
                {
                    "id": "imp-1",
                    "environment": "dev",
                    "path": "/",
                    "from": {"environment": "prod", "path": "/shared"},
                },
            ],
        }
    ],
    "identities": [
        {
            "id": "aaaaaaaa-0000-4000-8000-00000000000a",
            "name": "reader",
            "organization": "org",
            "accessTokens": [{"token": TOKEN}],
            "projects": [{"project": "proj", "role": "admin"}],
        }
    ],
}

SCOPES = [
    scopes.Scope("ns/reader", PROJECT, "dev", "/"),
    scopes.Scope("ns/reader", PROJECT, "dev", "/", recursive=True),
    scopes.Scope("ns/reader", PROJECT, "dev", "/app", recursive=True),
    scopes.Scope("ns/reader", PROJECT, "dev", "/", include_imports=False),
    scopes.Scope("ns/reader", PROJECT, "dev", "/", recursive=True, expand_references=False),
    scopes.Scope("ns/reader", PROJECT, "prod", "/shared"),
]


def _secrets(listed: list[models.Secret]) -> list[tuple[Any, ...]]:
    return sorted((s.secret_key, s.secret_value, s.secret_path, s.environment, s.type) for s in listed)


def _view(answer: models.SecretList) -> dict[str, Any]:
    """What a sync reads from a list; store-made ids and timestamps left out."""
    return {
        "secrets": _secrets(answer.secrets),
        "imports": [(g.secret_path, g.environment, _secrets(g.secrets)) for g in answer.imports],
    }


@pytest.fixture
async def sessions() -> AsyncIterator[tuple[auth.AuthSession, auth.AuthSession]]:
    new = create_app(DevServerConfig(seed=SEED, admin_token="unused"))
    old = create_app(DevServerConfig(seed=SEED, admin_token="unused", v4_secrets=False))
    async with (
        client.ServiceClient("http://new.test", transport=httpx.ASGITransport(app=new)) as new_api,
        client.ServiceClient("http://old.test", transport=httpx.ASGITransport(app=old)) as old_api,
    ):
        yield (
            auth.AuthSession(new_api, auth.StaticTokenCredentials(TOKEN)),
            auth.AuthSession(old_api, auth.StaticTokenCredentials(TOKEN)),
        )


async def test_v3_lists_what_v4_lists(sessions: tuple[auth.AuthSession, auth.AuthSession]) -> None:
    new, old = sessions
    fetch = fetcher.ScopeFetcher()
    for scope in SCOPES:
        via_v4 = await fetch.fetch(scope, new)
        via_v3 = await fetch.fetch(scope, old)
        assert _view(via_v3.secret_list) == _view(via_v4.secret_list), scope.describe()
    assert fetch.routes.known("http://new.test/api") == listroutes.V4
    assert fetch.routes.known("http://old.test/api") == listroutes.V3


async def test_the_selection_really_differs_between_scopes(
    sessions: tuple[auth.AuthSession, auth.AuthSession],
) -> None:
    """Guards the comparison above: references expanded, imports and recursion honoured on v3."""
    _, old = sessions
    fetch = fetcher.ScopeFetcher()
    root, recursive, app, no_imports, raw, _ = [(await fetch.fetch(s, old)).secret_list for s in SCOPES]
    assert ("B", "ref-a", "/", "dev", "shared") in _secrets(root.secrets)
    assert [(g.secret_path, g.environment) for g in root.imports] == [("/shared", "prod")]
    assert no_imports.imports == []
    assert ("D", "d-s1-c", "/app/deep", "dev", "shared") in _secrets(recursive.secrets)
    assert {s.secret_key for s in app.secrets} == {"C", "D"}
    assert ("B", "ref-${A}", "/", "dev", "shared") in _secrets(raw.secrets)


async def test_a_data_404_on_the_v4_server_is_not_a_missing_route(
    sessions: tuple[auth.AuthSession, auth.AuthSession],
) -> None:
    new, _ = sessions
    fetch = fetcher.ScopeFetcher()
    with pytest.raises(errors.NotFound) as caught:  # an environment the project does not have
        await fetch.fetch(scopes.Scope("ns/reader", PROJECT, "nope", "/"), new)
    assert type(caught.value) is errors.NotFound
    assert fetch.routes.path_for("http://new.test/api") == listroutes.V4

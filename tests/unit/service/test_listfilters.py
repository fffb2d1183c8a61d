"""Filters on the v3 list: applied on our side when the answer carries what they need, else refused.

Issue 21: a self-hosted 2024-10 server strips ``metadataFilter`` from the v3 list and answers the
whole folder, so a SecretSync meant to match nothing synced every key. The dev server's
``selfhosted-2024-10`` profile does the same; ``newest`` applies the filter on v3 and carries
``secretMetadata``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from secretferry.devserver import profiles
from secretferry.devserver.app import create_app
from secretferry.devserver.config import DevServerConfig
from secretferry.service import client, errors, listfilters, models

PROJECT = "33333333-3333-4333-8333-333333333333"
TOKEN = "reader-token"
SEED: dict[str, Any] = {
    "organizations": [{"id": "org-1", "name": "Org", "slug": "org"}],
    "projects": [
        {
            "id": PROJECT,
            "slug": "proj",
            "environments": [{"slug": "dev", "name": "Dev"}, {"slug": "prod", "name": "Prod"}],
            "tags": [{"slug": "db", "name": "DB"}],
            "secrets": [
                {"environment": "dev", "key": "A", "value": "a", "metadata": [{"key": "team", "value": "x"}]},
                {"environment": "dev", "key": "B", "value": "b", "tags": ["db"]},
                {
                    "environment": "prod",
                    "key": "P",
                    "value": "p",
                    "metadata": [{"key": "team", "value": "x"}],
                },
            ],
            "imports": [
                {
                    "id": "imp-1",
                    "environment": "dev",
                    "path": "/",
                    "from": {"environment": "prod", "path": "/"},
                }
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


@pytest.fixture(params=["newest", "selfhosted-2024-10"])
async def api(request: pytest.FixtureRequest) -> AsyncIterator[client.ServiceClient]:
    config = DevServerConfig(seed=SEED, admin_token="unused", **profiles.overrides(request.param))
    transport = httpx.ASGITransport(app=create_app(config))
    async with client.ServiceClient("http://dev.test", transport=transport, access_token=TOKEN) as c:
        c.profile = request.param  # type: ignore[attr-defined]
        yield c


def _query(**kw: Any) -> models.ListSecretsQuery:
    return models.ListSecretsQuery(project_id=PROJECT, environment="dev", include_imports=True, **kw)


async def test_a_metadata_filter_is_never_widened(api: client.ServiceClient) -> None:
    """Newest: the server applied it (and our check agrees). 2024-10: it would list both keys, so
    the answer is refused, naming the filter."""
    query = _query(metadata_filter=(("team", "nobody"),))
    if api.profile == "newest":  # type: ignore[attr-defined]
        answer = await api.list_secrets_v3(query)
        assert isinstance(answer, models.SecretList) and answer.secrets == []
        # Imports are not filtered, on any route (docs/service-contract.md).
        assert [s.secret_key for g in answer.imports for s in g.secrets] == ["P"]
        return
    with pytest.raises(errors.FilterNotSupported) as refused:
        await api.list_secrets_v3(query)
    assert refused.value.field == "metadataFilter"
    assert (
        "carries no secret metadata" in refused.value.message
        and "nothing was written" in refused.value.message
    )


async def test_tags_apply_on_v3_on_both_generations(api: client.ServiceClient) -> None:
    answer = await api.list_secrets_v3(_query(tag_slugs=("db",)))
    assert isinstance(answer, models.SecretList)
    assert [s.secret_key for s in answer.secrets] == ["B"]


async def test_an_unfiltered_list_passes_untouched(api: client.ServiceClient) -> None:
    answer = await api.list_secrets_v3(_query())
    assert isinstance(answer, models.SecretList)
    assert sorted(s.secret_key for s in answer.secrets) == ["A", "B"]


def _secret(key: str, **fields: Any) -> dict[str, Any]:
    return {"secretKey": key, "secretValue": "v", **fields}


@pytest.mark.parametrize(
    ("secrets", "query", "kept"),
    [
        # A server that ignored the filter: applied here.
        (
            [_secret("A", secretMetadata=[{"key": "team", "value": "x"}]), _secret("B", secretMetadata=[])],
            _query(metadata_filter=(("team", "x"),)),
            ["A"],
        ),
        # Pairs are ANDed; an encrypted value never matches.
        (
            [
                _secret("A", secretMetadata=[{"key": "team", "value": "x"}, {"key": "tier", "value": "1"}]),
                _secret("B", secretMetadata=[{"key": "team", "value": "x"}]),
                _secret("C", secretMetadata=[{"key": "team", "value": "x", "isEncrypted": True}]),
            ],
            _query(metadata_filter=(("team", "x"), ("tier", "1"))),
            ["A"],
        ),
        # Tags: any of the slugs.
        (
            [
                _secret("A", tags=[{"slug": "db"}]),
                _secret("B", tags=[{"slug": "web"}]),
                _secret("C", tags=[]),
            ],
            _query(tag_slugs=("db", "cache")),
            ["A"],
        ),
        # Nothing listed: nothing to widen, whatever the server knows.
        ([], _query(metadata_filter=(("team", "x"),), tag_slugs=("db",)), []),
    ],
)
def test_apply_v3(secrets: list[dict[str, Any]], query: models.ListSecretsQuery, kept: list[str]) -> None:
    answer = models.SecretList.model_validate({"secrets": secrets, "imports": []})
    assert [s.secret_key for s in listfilters.apply_v3(query, answer).secrets] == kept


@pytest.mark.parametrize(
    ("secrets", "query", "field"),
    [
        (
            [_secret("A", secretMetadata=[]), _secret("B")],
            _query(metadata_filter=(("t", "x"),)),
            "metadataFilter",
        ),
        ([_secret("A", tags=[{"slug": "db"}]), _secret("B")], _query(tag_slugs=("db",)), "tagSlugs"),
    ],
)
def test_apply_v3_refuses_when_a_secret_lacks_the_field(
    secrets: list[dict[str, Any]], query: models.ListSecretsQuery, field: str
) -> None:
    answer = models.SecretList.model_validate({"secrets": secrets, "imports": []})
    with pytest.raises(errors.FilterNotSupported) as refused:
        listfilters.apply_v3(query, answer)
    assert refused.value.field == field

"""SlugCache: one look-up per (identity, slug), single flight, short negative caching."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from clock_fakes import Clock

from secretferry.service import auth, client, errors, scopes

pytestmark = pytest.mark.looptime  # the fake service's latency is virtual


class Projects:
    def __init__(self) -> None:
        self.calls = 0
        self.known = {"shop": "p-shop"}
        self.fail_next: httpx.Response | None = None

    async def handler(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/status":  # the connection's probe after a 503: not a look-up
            return httpx.Response(200, json={"message": "Ok"})
        self.calls += 1
        await asyncio.sleep(0.01)  # a look-up takes a while: concurrent callers overlap it
        if self.fail_next is not None:
            response, self.fail_next = self.fail_next, None
            return response
        slug = request.url.path.rsplit("/", 1)[-1]
        if slug not in self.known:
            return httpx.Response(404, json={"statusCode": 404, "message": "no project", "error": "NotFound"})
        return httpx.Response(200, json={"id": self.known[slug], "slug": slug})


@pytest.fixture
def projects() -> Projects:
    return Projects()


@pytest.fixture
async def session(projects: Projects) -> AsyncIterator[auth.AuthSession]:
    async with client.ServiceClient("https://s.test", transport=httpx.MockTransport(projects.handler)) as api:
        yield auth.AuthSession(api, auth.StaticTokenCredentials("t"))


async def test_resolves_once_for_many_callers(projects: Projects, session: auth.AuthSession) -> None:
    cache = scopes.SlugCache()
    ids = await asyncio.gather(*(cache.resolve("id-1", "shop", session) for _ in range(100)))
    assert set(ids) == {"p-shop"} and projects.calls == 1
    assert await cache.resolve("id-1", "shop", session) == "p-shop" and projects.calls == 1
    await cache.resolve("id-2", "shop", session)  # another identity may see another project
    assert projects.calls == 2


async def test_not_found_is_cached_briefly(projects: Projects, session: auth.AuthSession) -> None:
    clock = Clock(50.0)
    cache = scopes.SlugCache(negative_ttl_seconds=30, clock=clock)
    for _ in range(5):
        with pytest.raises(errors.NotFound):
            await cache.resolve("id", "typo", session)
    assert projects.calls == 1
    projects.known["typo"] = "p-new"
    clock.now += 31
    assert await cache.resolve("id", "typo", session) == "p-new"
    assert projects.calls == 2


async def test_other_failures_are_not_cached(projects: Projects, session: auth.AuthSession) -> None:
    cache = scopes.SlugCache()
    projects.fail_next = httpx.Response(
        503, json={"statusCode": 503, "message": "down", "error": "Unavailable"}
    )
    with pytest.raises(errors.Unavailable):
        await cache.resolve("id", "shop", session)
    assert await cache.resolve("id", "shop", session) == "p-shop"
    assert projects.calls == 2


@pytest.mark.parametrize(
    ("scope", "env", "path", "covered"),
    [
        (scopes.Scope("i", "p", "dev", "/a"), "dev", "/a", True),
        (scopes.Scope("i", "p", "dev", "/a"), "dev", "/a/", True),
        (scopes.Scope("i", "p", "dev", "/a"), "dev", "/a/b", False),
        (scopes.Scope("i", "p", "dev", "/a", recursive=True), "dev", "/a/b/c", True),
        (scopes.Scope("i", "p", "dev", "/a", recursive=True), "dev", "/ab", False),
        (scopes.Scope("i", "p", "dev", "/", recursive=True), "dev", "/anything", True),
        (scopes.Scope("i", "p", "dev", "/"), "dev", "/anything", False),
        (scopes.Scope("i", "p", "dev", "/a"), "prod", "/a", False),
    ],
)
def test_scope_covers(scope: scopes.Scope, env: str, path: str, covered: bool) -> None:
    assert scope.covers(env, path) is covered


def test_scope_is_normalized() -> None:
    a = scopes.Scope(
        "i", "p", "dev", "a/b/", tag_slugs=("z", "a", "z"), metadata_filter=(("k2", "v"), ("k1", "v"))
    )
    b = scopes.Scope(
        "i", "p", "dev", "/a/b", tag_slugs=("a", "z"), metadata_filter=(("k1", "v"), ("k2", "v"))
    )
    assert a == b and hash(a) == hash(b)
    query = a.to_query()
    assert query.secret_path == "/a/b" and query.tag_slugs == ("a", "z")
    assert query.metadata_filter == (("k1", "v"), ("k2", "v"))


async def test_a_project_recreated_under_its_slug_is_found_after_forget(
    projects: Projects, session: auth.AuthSession
) -> None:
    cache = scopes.SlugCache()
    assert await cache.resolve("id", "shop", session) == "p-shop"
    projects.known["shop"] = "p-shop-2"  # deleted and recreated: a new id under the same slug
    assert await cache.resolve("id", "shop", session) == "p-shop"  # kept until a call says gone
    assert not cache.forget("id", "shop", "p-other")  # another id: not this mapping, kept
    assert not cache.forget("id-2", "shop", "p-shop")  # another identity's: nothing to drop
    assert cache.forget("id", "shop", "p-shop")
    assert await cache.resolve("id", "shop", session) == "p-shop-2"
    assert projects.calls == 2

"""An identity's status: what its login check and each use of it report, written only on change.

No apiserver: a fake Kube port records status patches (or refuses them). The service is an
``httpx.MockTransport`` without the v4 list (Fastify's route 404), or one that refuses logins.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

import crd_schema
import httpx
import pytest
from reconcile_fakes import FakeKube, FakeSession, FakeSessions

from secretferry import settings as settings_mod
from secretferry.kube import errors as kube_errors
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import identity_status, problems, reasons, tasks
from secretferry.service import auth, client, fetcher, listroutes, scopes
from secretferry.service import errors as service_errors

HOST = "http://127.0.0.1:9"


def _old_server(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/api/v4/secrets":
        message = f"Route GET:{request.url.raw_path.decode()} not found"
        return httpx.Response(404, json={"message": message, "error": "Not Found", "statusCode": 404})
    return httpx.Response(200, json={"secrets": [{"secretKey": "K", "secretValue": "v"}], "imports": []})


@pytest.fixture
async def api() -> AsyncIterator[client.ServiceClient]:
    async with client.ServiceClient(HOST, transport=httpx.MockTransport(_old_server)) as c:
        yield c


def _identity_body(name: str = "old") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": 1},
        "spec": {"auth": {"accessToken": {"secretRef": {"name": "tok", "key": "token"}}}},
    }


def _registry(kube: FakeKube) -> ident_mod.IdentityRegistry:
    return ident_mod.IdentityRegistry(kube=kube.port(), settings=settings_mod.Settings(default_host_api=HOST))


def _status(
    kube: FakeKube, routes: listroutes.ListRoutes
) -> tuple[identity_status.IdentityStatus, ident_mod.IdentityRegistry]:
    registry = ident_mod.IdentityRegistry(
        kube=kube.port(), settings=settings_mod.Settings(default_host_api=HOST)
    )
    status = identity_status.IdentityStatus(
        kube=kube.port(), identities=registry, routes=routes, background=tasks.Tasks()
    )
    return status, registry


def _patched(kube: FakeKube) -> list[tuple[str, dict[str, Any]]]:
    return [(path, kw["body"]["status"]) for method, path, kw in kube.calls if method == "PATCH"]


async def test_status_names_the_v3_list_once_a_list_showed_it_and_skips_unchanged_reports(
    api: client.ServiceClient,
) -> None:
    kube = FakeKube()
    routes = listroutes.ListRoutes()
    status, registry = _status(kube, routes)
    entry = registry.upsert(ident_mod.MACHINE, _identity_body())
    entry.session = auth.AuthSession(api, auth.StaticTokenCredentials("t"))

    await status.report(entry, None)  # logged in, nothing listed yet: route unknown
    ((path, written),) = _patched(kube)
    assert path.endswith("/namespaces/ns/machineidentities/old/status")
    assert "listEndpoint" not in written
    assert written["conditions"][0]["message"] == "login works"

    scope = scopes.Scope(ident_mod.key_str(entry.key), "p", "dev", "/")
    await fetcher.ScopeFetcher(backoff_initial=1, backoff_max=1, routes=routes).fetch(scope, entry.session)
    await status.report(entry, None)
    written = _patched(kube)[-1][1]
    assert written["listEndpoint"] == "/api/v3/secrets/raw"
    ready = written["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == (reasons.READY, "True", reasons.LOGGED_IN)
    assert ready["message"] == "login works; listing via /api/v3/secrets/raw (the server has no v4 list)"

    await status.report(entry, None)  # nothing new: no write
    assert len(_patched(kube)) == 2
    # A failure keeps saying which route the host has (the field), the message is the problem's.
    await status.report(entry, problems.Problem(reasons.AUTH_FAILED, "rejected"))
    written = _patched(kube)[-1][1]
    assert written["listEndpoint"] == "/api/v3/secrets/raw"
    assert written["conditions"][0]["message"] == "rejected"


async def test_a_status_patch_the_apiserver_refuses_is_tried_again_on_the_next_report() -> None:
    async def refuse_once(method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(kube.calls) == 1:
            raise kube_errors.Unavailable(503, "ServiceUnavailable", "apiserver busy")
        return {}

    kube = FakeKube(refuse_once)
    status, registry = _status(kube, listroutes.ListRoutes())
    entry = registry.upsert(ident_mod.MACHINE, _identity_body())

    await status.report(entry, problems.Problem(reasons.AUTH_FAILED, "rejected"))
    assert entry.reported is None  # not written: not remembered as reported
    await status.report(entry, problems.Problem(reasons.AUTH_FAILED, "rejected"))
    assert len(_patched(kube)) == 2
    assert entry.reported is not None
    await status.report(entry, problems.Problem(reasons.AUTH_FAILED, "rejected"))
    assert len(_patched(kube)) == 2  # now it is known: no write


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (service_errors.AuthenticationError("Token invalid", status_code=401), reasons.AUTH_FAILED),
        (service_errors.Unavailable("down", status_code=503), reasons.SERVICE_UNAVAILABLE),
        (
            problems.Problem(reasons.CREDENTIALS_NOT_FOUND, "secret tok not found"),
            reasons.CREDENTIALS_NOT_FOUND,
        ),
    ],
)
async def test_a_login_check_that_fails_reports_the_identity_not_ready_with_the_reason(
    error: Exception, reason: str
) -> None:
    kube = FakeKube()
    routes = listroutes.ListRoutes()
    registry = ident_mod.IdentityRegistry(
        kube=kube.port(), settings=settings_mod.Settings(default_host_api=HOST)
    )
    entry = registry.upsert(ident_mod.MACHINE, _identity_body())
    session = FakeSession(error)
    status = identity_status.IdentityStatus(
        kube=kube.port(), identities=FakeSessions(session).port(), routes=routes, background=tasks.Tasks()
    )

    await status.check(entry)

    assert session.logins == 1
    ((_, written),) = _patched(kube)
    ready = written["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", reason)
    assert "lastLoginTime" not in written


async def test_a_login_check_that_works_reports_the_identity_ready() -> None:
    kube = FakeKube()
    registry = ident_mod.IdentityRegistry(
        kube=kube.port(), settings=settings_mod.Settings(default_host_api=HOST)
    )
    entry = registry.upsert(ident_mod.MACHINE, _identity_body())
    status = identity_status.IdentityStatus(
        kube=kube.port(),
        identities=FakeSessions(FakeSession()).port(),
        routes=listroutes.ListRoutes(),
        background=tasks.Tasks(),
    )

    await status.spawn_check(entry)

    ((_, written),) = _patched(kube)
    assert written["conditions"][0]["reason"] == reasons.LOGGED_IN
    assert written["observedGeneration"] == 1


async def test_an_identity_with_an_invalid_spec_reports_it_without_logging_in() -> None:
    kube = FakeKube()
    status, registry = _status(kube, listroutes.ListRoutes())
    entry = registry.upsert(ident_mod.MACHINE, {"metadata": {"name": "bad", "namespace": "ns"}, "spec": {}})
    assert entry.model is None

    await status.check(entry)

    ((path, written),) = _patched(kube)
    assert path.endswith("/namespaces/ns/machineidentities/bad/status")
    assert written["conditions"][0]["reason"] == reasons.INVALID_SPEC


class _LoggedInSession:
    """A session that logged in: wall-clock times with microseconds, as ``AuthSession`` keeps them."""

    api_root = "http://127.0.0.1:9/api"
    last_login_at = datetime(2026, 3, 1, 12, 0, 0, 654321, tzinfo=UTC)
    expires_at = datetime(2026, 3, 1, 12, 10, 0, 654321, tzinfo=UTC)


async def test_the_status_written_fits_the_crd_with_whole_second_utc_times() -> None:
    kube = FakeKube()
    routes = cast(listroutes.ListRoutes, SimpleNamespace(known=lambda api_root: listroutes.V4))
    status, registry = _status(kube, routes)
    entry = registry.upsert(ident_mod.MACHINE, _identity_body())
    entry.session = cast(auth.AuthSession, _LoggedInSession())

    await status.report(entry, None)
    await status.report(
        entry, problems.Problem(reasons.AUTH_FAILED, "x" * 40_000)
    )  # longer than a condition holds

    first, second = (written for _, written in _patched(kube))
    assert first["lastLoginTime"] == "2026-03-01T12:00:00Z"
    assert first["tokenExpiresAt"] == "2026-03-01T12:10:00Z"
    assert first["listEndpoint"] == listroutes.V4
    assert set(first) == {
        "conditions",
        "observedGeneration",
        "lastLoginTime",
        "tokenExpiresAt",
        "listEndpoint",
    }
    for plural in ("machineidentities", "clustermachineidentities"):
        schema = crd_schema.status_schema(plural)
        assert crd_schema.problems(first, schema) == []
        assert crd_schema.problems(second, schema) == []


async def test_what_a_report_does_not_know_is_left_out_of_the_patch() -> None:
    kube = FakeKube()
    status, registry = _status(kube, listroutes.ListRoutes())
    entry = registry.upsert(ident_mod.MACHINE, _identity_body())  # no session: never logged in

    await status.report(entry, problems.Problem(reasons.CREDENTIALS_NOT_FOUND, "secret tok not found"))

    ((_, written),) = _patched(kube)
    assert set(written) == {"conditions", "observedGeneration"}


async def test_status_names_the_v2_slug_route_once_a_look_up_showed_it() -> None:
    """Issue 21: a host without ``/api/v1/projects/slug`` is shown, like the v3 list, in the
    status of every identity on it — and the report changes (one patch) when it is learned."""

    def old_server(request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/api/v1/projects/slug/"):
            message = f"Route GET:{request.url.raw_path.decode()} not found"
            return httpx.Response(404, json={"message": message, "error": "Not Found", "statusCode": 404})
        return httpx.Response(200, json={"id": "p-1", "slug": "proj"})

    kube = FakeKube()
    slugs = scopes.SlugCache()
    registry = ident_mod.IdentityRegistry(
        kube=kube.port(), settings=settings_mod.Settings(default_host_api=HOST)
    )
    status = identity_status.IdentityStatus(
        kube=kube.port(),
        identities=registry,
        routes=listroutes.ListRoutes(),
        slug_routes=slugs.routes,
        background=tasks.Tasks(),
    )
    entry = registry.upsert(ident_mod.MACHINE, _identity_body())
    async with client.ServiceClient(HOST, transport=httpx.MockTransport(old_server)) as api:
        entry.session = auth.AuthSession(api, auth.StaticTokenCredentials("t"))
        await status.report(entry, None)
        assert await slugs.resolve(ident_mod.key_str(entry.key), "proj", entry.session) == "p-1"
        await status.report(entry, None)
        await status.report(entry, None)
    first, second = (written["conditions"][0]["message"] for _, written in _patched(kube))
    assert first == "login works"
    assert second == (
        "login works; project slugs via GET /api/v2/workspace/{slug} "
        "(the server has no GET /api/v1/projects/slug/{slug})"
    )

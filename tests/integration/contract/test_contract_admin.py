"""Contract: identity privileges (v1 + v2), auth-method removal, memberships, dynamic secrets,
project slugs, and the limits table (client-side checks, and the server enforcing them too)."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import httpx
import pytest
from contract_support import (
    ADMIN_TOKEN,
    DYNAMIC_SECRET,
    LIMITED,
    LIMITED_TOKEN,
    MEMBERSHIP,
    ORG,
    PRIV_TARGET,
    PROJECT,
    PROJECT_SLUG,
    REMOVABLE,
    SEEDED_PRIVILEGE,
    client,
    dev_server,
    request_count,
)

from secretferry.devserver.testing import DevServer
from secretferry.service import errors, wire
from secretferry.service.models import GlobPattern, PermissionConditions, PermissionSent

pytestmark = pytest.mark.integration

START = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
ADDRESS = {"identity_id": PRIV_TARGET, "project_slug": PROJECT_SLUG}
READ_DEV_X = {
    "actions": ["read"],
    "subject": "secrets",
    "conditions": {"environment": "dev", "secretPath": {"$glob": "/x/**"}},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with dev_server(tmp_path_factory) as running:
        yield running


# --- v1 privileges -----------------------------------------------------------------------------------


async def test_v1_privilege_lifecycle(server: DevServer) -> None:
    async with client(server) as service:
        created = await service.create_identity_privilege_temporary(
            **ADDRESS,
            slug="temp-read-x",
            temporary_range="2h",
            temporary_access_start_time=START,
            privilege_permission=READ_DEV_X,
        )
        assert created.slug == "temp-read-x" and created.id and created.project_membership_id
        assert (created.is_temporary, created.temporary_mode, created.temporary_range) == (
            True,
            "relative",
            "2h",
        )
        assert created.temporary_access_start_time == START
        assert created.temporary_access_end_time == START + datetime.timedelta(hours=2)
        assert [(p.action, p.subject) for p in created.permissions] == [("read", "secrets")]
        assert created.permissions[0].conditions == READ_DEV_X["conditions"]

        got = await service.get_identity_privilege("temp-read-x", **ADDRESS)
        assert got.id == created.id and got.temporary_access_end_time == created.temporary_access_end_time
        listed = await service.list_identity_privileges(**ADDRESS)
        assert [p.slug for p in listed] == ["temp-read-x"]

        updated = await service.update_identity_privilege(
            privilege_slug="temp-read-x",
            **ADDRESS,
            slug="temp-read-x2",
            temporary_range="1d",
            temporary_access_start_time=START,
            permissions=[
                PermissionSent(
                    action="read",  # v1 items take one action (real ProjectPermissionSchema)
                    subject="secrets",
                    conditions=PermissionConditions(
                        environment="prod", secret_path=GlobPattern(glob="/y/**")
                    ),
                )
            ],
        )
        assert (updated.id, updated.slug, updated.temporary_range) == (created.id, "temp-read-x2", "1d")
        assert updated.temporary_access_end_time == START + datetime.timedelta(days=1)
        assert updated.permissions[0].conditions == {"environment": "prod", "secretPath": {"$glob": "/y/**"}}
        with pytest.raises(errors.NotFound):
            await service.get_identity_privilege("temp-read-x", **ADDRESS)

        deleted = await service.delete_identity_privilege(privilege_slug="temp-read-x2", **ADDRESS)
        assert deleted.id == created.id
        with pytest.raises(errors.NotFound):
            await service.get_identity_privilege("temp-read-x2", **ADDRESS)
        with pytest.raises(errors.NotFound):
            await service.delete_identity_privilege(privilege_slug="temp-read-x2", **ADDRESS)
        assert await service.list_identity_privileges(**ADDRESS) == []


async def test_v1_create_with_deprecated_permissions_and_errors(server: DevServer) -> None:
    async with client(server) as service:
        created = await service.create_identity_privilege_temporary(
            **ADDRESS,
            slug="deprecated-form",
            temporary_range="30m",
            temporary_access_start_time=START,
            permissions=[
                PermissionSent(
                    action="read", subject="secrets", conditions=PermissionConditions(environment="dev")
                )
            ],
        )
        assert created.temporary_access_end_time == START + datetime.timedelta(minutes=30)
        assert [(p.action, p.subject, p.conditions) for p in created.permissions] == [
            ("read", "secrets", {"environment": "dev"})
        ]
        with pytest.raises(errors.ValidationError) as duplicate:
            await service.create_identity_privilege_temporary(
                **ADDRESS,
                slug="deprecated-form",
                temporary_range="1h",
                temporary_access_start_time=START,
                privilege_permission=READ_DEV_X,
            )
        assert duplicate.value.status_code == 400
        with pytest.raises(errors.NotFound):
            await service.list_identity_privileges(identity_id=PRIV_TARGET, project_slug="no-such-project")
        await service.delete_identity_privilege(privilege_slug="deprecated-form", **ADDRESS)
    async with client(server, token=LIMITED_TOKEN) as limited:  # not a project admin
        with pytest.raises(errors.PermissionDenied) as denied:
            await limited.list_identity_privileges(**ADDRESS)
        assert denied.value.details


async def test_seeded_privilege_is_listed(server: DevServer) -> None:
    async with client(server) as service:
        (seeded,) = await service.list_identity_privileges(identity_id=LIMITED, project_slug=PROJECT_SLUG)
    assert seeded.slug == SEEDED_PRIVILEGE and not seeded.is_temporary
    assert {p.subject for p in seeded.permissions} == {"secrets", "secret-events"}


# --- v2 privileges -----------------------------------------------------------------------------------


async def test_v2_update_and_delete(server: DevServer) -> None:
    async with client(server) as service:
        created = await service.create_identity_privilege_temporary(
            **ADDRESS,
            slug="for-v2",
            temporary_range="1h",
            temporary_access_start_time=START,
            privilege_permission=READ_DEV_X,
        )
        assert created.id is not None
        permanent = await service.update_identity_privilege_v2(
            created.id,
            slug="v2-permanent",
            permissions=[
                PermissionSent(
                    action="read", subject="secrets", conditions=PermissionConditions(environment="dev")
                )
            ],
            type={"isTemporary": False},
        )
        assert (permanent.id, permanent.slug, permanent.is_temporary) == (created.id, "v2-permanent", False)
        assert permanent.temporary_access_end_time is None
        assert permanent.project_membership_id is None  # absent from v2 answers
        assert [(p.action, p.subject) for p in permanent.permissions] == [("read", "secrets")]

        temporary = await service.update_identity_privilege_v2(
            created.id,
            slug="v2-temporary",
            permissions=[PermissionSent(action="read", subject="secrets")],
            type={
                "isTemporary": True,
                "temporaryMode": "relative",
                "temporaryRange": "45m",
                "temporaryAccessStartTime": "2030-01-01T00:00:00Z",
            },
        )
        assert temporary.is_temporary and temporary.temporary_range == "45m"
        assert temporary.temporary_access_end_time == START + datetime.timedelta(minutes=45)
        v1_view = await service.get_identity_privilege("v2-temporary", **ADDRESS)
        assert v1_view.id == created.id and v1_view.project_membership_id == created.project_membership_id

        deleted = await service.delete_identity_privilege_v2(created.id)
        assert deleted.id == created.id and deleted.project_membership_id is None
        with pytest.raises(errors.NotFound):
            await service.delete_identity_privilege_v2(created.id)
        with pytest.raises(errors.NotFound):
            await service.update_identity_privilege_v2(
                created.id, slug="gone", permissions=[], type={"isTemporary": False}
            )


# --- auth methods, memberships, dynamic secrets, projects --------------------------------------------


async def test_remove_universal_auth(server: DevServer) -> None:
    async with client(server) as service:
        removed = await service.remove_universal_auth(REMOVABLE)
        assert (removed.identity_id, removed.client_id) == (REMOVABLE, "removable-client-id")
        assert removed.id and removed.access_token_ttl == 2592000 and removed.lockout_enabled is True
        with pytest.raises(errors.NotFound):
            await service.remove_universal_auth(REMOVABLE)
        with pytest.raises(errors.NotFound):
            await service.remove_universal_auth("0c0a0000-0000-4000-8000-0000000000ee")
        with pytest.raises(errors.AuthenticationError):
            await service.login_universal(client_id="removable-client-id", client_secret="removable-secret")


async def test_remove_kubernetes_auth(server: DevServer) -> None:
    async with client(server, token=LIMITED_TOKEN) as limited:  # not an org admin
        with pytest.raises(errors.PermissionDenied):
            await limited.remove_kubernetes_auth(REMOVABLE)
    async with client(server) as service:
        removed = await service.remove_kubernetes_auth(REMOVABLE)
        assert removed.identity_id == REMOVABLE
        assert (removed.allowed_namespaces, removed.allowed_audience, removed.access_token_ttl) == (
            "team-a,team-*",
            "contract",
            600,
        )
        assert (removed.kubernetes_host, removed.token_review_mode) == ("https://127.0.0.1:1", "api")
        with pytest.raises(errors.NotFound):
            await service.remove_kubernetes_auth(REMOVABLE)


async def test_delete_org_membership(server: DevServer) -> None:
    async with client(server) as service:
        membership = await service.delete_org_membership(ORG, MEMBERSHIP)
        assert (membership.id, membership.org_id, membership.status) == (MEMBERSHIP, ORG, "invited")
        assert membership.invite_email == "invitee@example.com" and membership.role == "member"
        with pytest.raises(errors.NotFound):
            await service.delete_org_membership(ORG, MEMBERSHIP)


async def test_get_dynamic_secret_needs_a_token(server: DevServer) -> None:
    """Its inputs are root credentials: the real service answers no one without a token."""
    async with client(server, token=None) as anonymous:
        with pytest.raises(errors.AuthenticationError):
            await anonymous.get_dynamic_secret(
                DYNAMIC_SECRET, project_slug=PROJECT_SLUG, environment_slug="dev"
            )
    async with client(server) as service:
        dynamic = await service.get_dynamic_secret(
            DYNAMIC_SECRET, project_slug=PROJECT_SLUG, environment_slug="dev"
        )
        assert (dynamic.name, dynamic.type, dynamic.default_ttl, dynamic.max_ttl) == (
            DYNAMIC_SECRET,
            "sql-database",
            "1h",
            "24h",
        )
        assert [(m.key, m.value) for m in dynamic.metadata] == [("owner", "platform")]
        assert dynamic.folder_id and "db.example" not in repr(dynamic)
        with pytest.raises(errors.NotFound):
            await service.get_dynamic_secret("nope", project_slug=PROJECT_SLUG, environment_slug="dev")
        with pytest.raises(errors.NotFound):
            await service.get_dynamic_secret(
                DYNAMIC_SECRET, project_slug=PROJECT_SLUG, environment_slug="dev", path="/other"
            )
    async with client(server, token=LIMITED_TOKEN) as limited:
        with pytest.raises(errors.PermissionDenied):
            await limited.get_dynamic_secret(
                DYNAMIC_SECRET, project_slug=PROJECT_SLUG, environment_slug="dev"
            )


async def test_project_slug_to_id(server: DevServer) -> None:
    async with client(server) as service:
        project = await service.get_project_by_slug(PROJECT_SLUG)
        assert (project.id, project.slug, project.org_id) == (PROJECT, PROJECT_SLUG, ORG)
        with pytest.raises(errors.NotFound):
            await service.get_project_by_slug("no-such-project")
    async with client(server, token=LIMITED_TOKEN) as limited:
        assert (await limited.get_project_by_slug(PROJECT_SLUG)).id == PROJECT  # a member, even no-access


# --- limits table: client-side ------------------------------------------------------------------------


async def test_client_side_limits_send_nothing(server: DevServer) -> None:
    before = request_count(server)
    async with client(server) as service:

        async def field_of(call: object) -> str | None:
            with pytest.raises(errors.ValidationError) as refused:
                await call  # type: ignore[misc]
            assert refused.value.status_code is None
            return refused.value.field

        temp = {"temporary_range": "1h", "temporary_access_start_time": START}
        assert (
            await field_of(service.create_identity_privilege_temporary(**ADDRESS, slug="s" * 61, **temp))
            == "slug"
        )
        assert (
            await field_of(service.create_identity_privilege_temporary(**ADDRESS, slug="", **temp)) == "slug"
        )
        assert (
            await field_of(service.update_identity_privilege_v2("id", slug="s" * 61, permissions=[], type={}))
            == "slug"
        )
        assert (
            await field_of(service.update_identity_privilege(privilege_slug="p", **ADDRESS, slug="s" * 61))
            == "privilegeDetails.slug"
        )
        assert (
            await field_of(
                service.create_identity_privilege_temporary(
                    **ADDRESS, temporary_range="abc", temporary_access_start_time=START
                )
            )
            == "temporaryRange"
        )
        assert (
            await field_of(
                service.update_identity_privilege(privilege_slug="p", **ADDRESS, temporary_range="abc")
            )
            == "privilegeDetails.temporaryRange"
        )
        naive = datetime.datetime(2030, 1, 1)  # the point: naive times are refused
        assert (
            await field_of(
                service.create_identity_privilege_temporary(
                    **ADDRESS, temporary_range="1h", temporary_access_start_time=naive
                )
            )
            == "temporaryAccessStartTime"
        )
        # minimum length 1: identityId, projectSlug, privilegeSlug, name, environmentSlug
        assert (
            await field_of(
                service.create_identity_privilege_temporary(identity_id="", project_slug="p", **temp)
            )
            == "identityId"
        )
        assert (
            await field_of(
                service.create_identity_privilege_temporary(identity_id="i", project_slug="", **temp)
            )
            == "projectSlug"
        )
        assert await field_of(service.get_identity_privilege("", **ADDRESS)) == "privilegeSlug"
        assert (
            await field_of(service.get_identity_privilege("p", identity_id="", project_slug="p"))
            == "identityId"
        )
        assert (
            await field_of(service.list_identity_privileges(identity_id="i", project_slug=""))
            == "projectSlug"
        )
        assert (
            await field_of(service.update_identity_privilege(privilege_slug="", **ADDRESS)) == "privilegeSlug"
        )
        assert (
            await field_of(
                service.delete_identity_privilege(privilege_slug="p", identity_id="", project_slug="p")
            )
            == "identityId"
        )
        assert (
            await field_of(service.get_dynamic_secret("", project_slug="p", environment_slug="dev")) == "name"
        )
        assert (
            await field_of(service.get_dynamic_secret("n", project_slug="", environment_slug="dev"))
            == "projectSlug"
        )
        assert (
            await field_of(service.get_dynamic_secret("n", project_slug="p", environment_slug=""))
            == "environmentSlug"
        )
        assert await field_of(service.delete_identity_privilege_v2("")) == "id"
        assert await field_of(service.remove_universal_auth("")) == "identityId"
        assert await field_of(service.remove_kubernetes_auth("")) == "identityId"
        assert await field_of(service.delete_org_membership(ORG, "")) == "membershipId"
        assert await field_of(service.get_project_by_slug("")) == "slug"
    assert request_count(server) == before


async def test_slug_of_60_is_accepted(server: DevServer) -> None:
    async with client(server) as service:
        created = await service.create_identity_privilege_temporary(
            **ADDRESS,
            slug="s" * 60,
            temporary_range="1h",
            temporary_access_start_time=START,
            privilege_permission=READ_DEV_X,
        )
        assert created.slug == "s" * 60
        await service.delete_identity_privilege(privilege_slug="s" * 60, **ADDRESS)


# --- limits table: the server enforces them too (raw httpx, client checks bypassed) -------------------


def _raw(server: DevServer, method: str, path: str, **kwargs: object) -> httpx.Response:
    return httpx.request(
        method,
        f"{server.base_url}{path}",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        **kwargs,  # type: ignore[arg-type]
    )


def _issue_paths(response: httpx.Response) -> list[list[str]]:
    body = response.json()
    assert isinstance(body["message"], list), body
    return [issue["path"] for issue in body["message"]]


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "field"),
    [
        (
            "POST",
            "/api/v1/additional-privilege/identity/temporary",
            {
                "json": {
                    "identityId": PRIV_TARGET,
                    "projectSlug": PROJECT_SLUG,
                    "slug": "s" * 61,
                    "temporaryMode": "relative",
                    "temporaryRange": "1h",
                    "temporaryAccessStartTime": "2030-01-01T00:00:00Z",
                }
            },
            "slug",
        ),
        (
            "PATCH",
            "/api/v2/identity-project-additional-privilege/some-id",
            {"json": {"slug": "s" * 61, "permissions": [], "type": {"isTemporary": False}}},
            "slug",
        ),
        (
            "POST",
            "/api/v1/additional-privilege/identity/temporary",
            {
                "json": {
                    "identityId": "",
                    "projectSlug": PROJECT_SLUG,
                    "temporaryMode": "relative",
                    "temporaryRange": "1h",
                    "temporaryAccessStartTime": "2030-01-01T00:00:00Z",
                }
            },
            "identityId",
        ),
        (
            "DELETE",
            "/api/v1/additional-privilege/identity",
            {"json": {"privilegeSlug": "", "identityId": PRIV_TARGET, "projectSlug": PROJECT_SLUG}},
            "privilegeSlug",
        ),
        (
            "GET",
            "/api/v1/additional-privilege/identity",
            {"params": {"identityId": PRIV_TARGET, "projectSlug": ""}},
            "projectSlug",
        ),
        (
            "GET",
            f"/api/v1/dynamic-secrets/{DYNAMIC_SECRET}",
            {"params": {"projectSlug": PROJECT_SLUG, "environmentSlug": ""}},
            "environmentSlug",
        ),
    ],
    ids=[
        "slug-61-v1",
        "slug-61-v2",
        "identityId-empty",
        "privilegeSlug-empty",
        "projectSlug-empty",
        "environmentSlug-empty",
    ],
)
def test_server_enforces_limits(
    server: DevServer, method: str, path: str, kwargs: dict[str, object], field: str
) -> None:
    response = _raw(server, method, path, **kwargs)
    assert response.status_code == 422, response.text
    assert _issue_paths(response) == [[field]]
    mapped = wire.error_for(response.status_code, response.json(), endpoint=f"{method} {path}")
    assert isinstance(mapped, errors.ValidationError) and field in mapped.message


def test_server_refuses_bad_temporary_range(server: DevServer) -> None:
    """zod's refine ``ms(val) > 0`` fails: 422 (docs/service-contract.md, "Strictness")."""
    response = _raw(
        server,
        "POST",
        "/api/v1/additional-privilege/identity/temporary",
        json={
            "identityId": PRIV_TARGET,
            "projectSlug": PROJECT_SLUG,
            "slug": "bad-range",
            "temporaryMode": "relative",
            "temporaryRange": "abc",
            "temporaryAccessStartTime": "2030-01-01T00:00:00Z",
        },
    )
    assert response.status_code == 422, response.text
    assert _issue_paths(response) == [["temporaryRange"]]
    assert isinstance(wire.error_for(422, response.json(), endpoint="POST temporary"), errors.ValidationError)

"""Typed async client for the whole secrets-service API (docs/service-api.md + docs/service-contract.md).

One ``ServiceClient`` owns one connection pool; ``with_token`` gives views that share it, one per
access token (auth sessions hold the tokens; this module only sends them). Every method validates
its input first (``errors.ValidationError`` with ``field``), then makes exactly one request, and
returns a model from ``models`` or raises a class from ``errors``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from secretferry.service import (
    admin,
    client_base,
    events,
    leases,
    models,
    privileges,
    secrets_v3,
    validation,
    wire,
)

DEFAULT_USER_AGENT = client_base.DEFAULT_USER_AGENT


# --- response envelopes (the API wraps most resources in one named member) -------------------------


class _SecretEnvelope(models.ApiModel):
    secret: models.Secret


class _SecretsEnvelope(models.ApiModel):
    secrets: list[models.Secret]


class _FolderEnvelope(models.ApiModel):
    folder: models.Folder


class _SecretImportEnvelope(models.ApiModel):
    message: str | None = None
    secret_import: models.SecretImport


def _unwrap_project(body: Any) -> Any:
    """The project comes bare, or as ``{project: …}`` / ``{workspace: …}`` depending on version."""
    if isinstance(body, dict) and "id" not in body and "_id" not in body:
        for key in ("project", "workspace"):
            if isinstance(body.get(key), dict):
                return body[key]
    return body


class ServiceClient(
    privileges.PrivilegeEndpoints, admin.AdminEndpoints, secrets_v3.SecretsV3Endpoints, leases.LeaseEndpoints
):
    """Async client for one service base URL; use as ``async with ServiceClient(...) as client``.

    ``ServiceClient(base_url, *, access_token=None, verify=True, timeout=10.0,
    stream_read_timeout=60.0, transport=None, user_agent="secretferry/<version>",
    on_host_recovered=None)``; see ``client_base.ClientBase`` for the lifecycle (``with_token``,
    ``aclose``) and ``host_health``.
    """

    # --- authentication (docs/service-contract.md) --------------------------------------------------------

    async def login_kubernetes(
        self, *, identity_id: str, jwt: str, organization_slug: str | None = None
    ) -> models.LoginResult:
        """Log in with a (freshly minted) ServiceAccount token; no bearer is sent."""
        validation.non_empty(identity_id, field="identityId")
        validation.non_empty(jwt, field="jwt")
        body = client_base.drop_none(
            {"identityId": identity_id, "jwt": jwt, "organizationSlug": organization_slug}
        )
        path = "/api/v1/auth/kubernetes-auth/login"
        return await self._conn.call(
            models.LoginResult, "POST", path, endpoint=f"POST {path}", token=None, json_body=body
        )

    async def login_oidc(self, *, identity_id: str, jwt: str) -> models.LoginResult:
        """OIDC auth: the service verifies ``jwt`` against the issuer's discovery document and keys."""
        return await self._login_jwt_route("/api/v1/auth/oidc-auth/login", identity_id=identity_id, jwt=jwt)

    async def login_jwt(self, *, identity_id: str, jwt: str) -> models.LoginResult:
        """JWT auth: the service verifies ``jwt`` against its static keys or its JWKS URL."""
        return await self._login_jwt_route("/api/v1/auth/jwt-auth/login", identity_id=identity_id, jwt=jwt)

    async def _login_jwt_route(self, path: str, *, identity_id: str, jwt: str) -> models.LoginResult:
        validation.non_empty(identity_id, field="identityId")
        validation.non_empty(jwt, field="jwt")
        body = {"identityId": identity_id, "jwt": jwt}
        return await self._conn.call(
            models.LoginResult, "POST", path, endpoint=f"POST {path}", token=None, json_body=body
        )

    async def login_universal(self, *, client_id: str, client_secret: str) -> models.LoginResult:
        validation.non_empty(client_id, field="clientId")
        validation.non_empty(client_secret, field="clientSecret")
        path = "/api/v1/auth/universal-auth/login"
        body = {"clientId": client_id, "clientSecret": client_secret}
        return await self._conn.call(
            models.LoginResult, "POST", path, endpoint=f"POST {path}", token=None, json_body=body
        )

    async def renew_token(self, access_token: str) -> models.LoginResult:
        """Extend ``access_token``; 401 once its use limit, TTL or max TTL is reached."""
        validation.non_empty(access_token, field="accessToken")
        path = "/api/v1/auth/token/renew"
        return await self._conn.call(
            models.LoginResult,
            "POST",
            path,
            endpoint=f"POST {path}",
            token=None,
            json_body={"accessToken": access_token},
        )

    async def revoke_token(self, access_token: str) -> None:
        validation.non_empty(access_token, field="accessToken")
        path = "/api/v1/auth/token/revoke"
        endpoint = f"POST {path}"
        response = await self._conn.send(
            "POST", path, endpoint=endpoint, token=None, json_body={"accessToken": access_token}
        )
        self._conn.raise_for_status(response, endpoint=endpoint)

    async def get_project_by_slug(self, slug: str) -> models.Project:
        validation.non_empty(slug, field="slug")
        endpoint = "GET /api/v1/projects/slug/{slug}"
        token = self._required_token(endpoint)
        response = await self._conn.send(
            "GET", f"/api/v1/projects/slug/{wire.segment(slug)}", endpoint=endpoint, token=token
        )
        body = _unwrap_project(self._conn.json(response, endpoint=endpoint))
        return self._conn.validate(models.Project, body, endpoint=endpoint)

    async def get_workspace_by_slug_v2(self, slug: str) -> models.Project:
        """``GET /api/v2/workspace/{slug}``: where servers without the v1 slug route (self-hosted
        2024-10) find a project by slug; the project comes bare. See ``slugroutes``."""
        validation.non_empty(slug, field="slug")
        endpoint = "GET /api/v2/workspace/{slug}"
        token = self._required_token(endpoint)
        response = await self._conn.send(
            "GET", f"/api/v2/workspace/{wire.segment(slug)}", endpoint=endpoint, token=token
        )
        body = _unwrap_project(self._conn.json(response, endpoint=endpoint))
        return self._conn.validate(models.Project, body, endpoint=endpoint)

    # --- secrets -------------------------------------------------------------------------------------

    async def list_secrets(
        self, query: models.ListSecretsQuery, *, etag: str | None = None
    ) -> models.SecretList | models.NotModified:
        """List one scope; with ``etag`` a 304 answer becomes ``NotModified``. A server older than
        v4 answers ``RouteNotFound``: see ``list_secrets_v3`` and ``listroutes``."""
        return await self._list_scope(wire.LIST_PATH_V4, params=wire.list_secrets_params(query), etag=etag)

    async def delete_secrets_batch(
        self,
        *,
        project_id: str,
        environment: str,
        secrets: Sequence[tuple[str, str]],
        secret_path: str = "/",
    ) -> list[models.Secret]:
        """Delete several secrets, given as ``(secretKey, type)`` pairs."""
        validation.non_empty(project_id, field="projectId")
        validation.non_empty(environment, field="environment")
        validation.count(secrets, field="secrets", minimum=1)
        for key, _type in secrets:
            validation.non_empty(key, field="secrets.secretKey")
        body = {
            "projectId": project_id,
            "environment": environment,
            "secretPath": secret_path,
            "secrets": [{"secretKey": key, "type": kind} for key, kind in secrets],
        }
        envelope = await self._authed(
            _SecretsEnvelope, "DELETE", "/api/v4/secrets/batch", "/api/v4/secrets/batch", json_body=body
        )
        return envelope.secrets

    async def create_secret(
        self,
        name: str,
        *,
        project_id: str,
        environment: str,
        value: str,
        secret_path: str = "/",
        comment: str | None = None,
        type: str = "shared",
        tag_ids: Sequence[str] | None = None,
        metadata: Mapping[str, str] | None = None,
        skip_multiline_encoding: bool | None = None,
    ) -> models.Secret:
        validation.non_empty(name, field="secretName")
        body = self._secret_body(project_id, environment, secret_path, type) | client_base.drop_none(
            {
                "secretValue": value,
                "secretComment": comment,
                "tagIds": list(tag_ids) if tag_ids is not None else None,
                "secretMetadata": _metadata(metadata),
                "skipMultilineEncoding": skip_multiline_encoding,
            }
        )
        return await self._secret_call("POST", name, body)

    async def update_secret(
        self,
        name: str,
        *,
        project_id: str,
        environment: str,
        secret_path: str = "/",
        value: str | None = None,
        new_name: str | None = None,
        comment: str | None = None,
        type: str = "shared",
        tag_ids: Sequence[str] | None = None,
        metadata: Mapping[str, str] | None = None,
        skip_multiline_encoding: bool | None = None,
    ) -> models.Secret:
        """Change only what is given (``None`` leaves a field as it is)."""
        validation.non_empty(name, field="secretName")
        if new_name is not None:
            validation.non_empty(new_name, field="newSecretName")
        body = self._secret_body(project_id, environment, secret_path, type) | client_base.drop_none(
            {
                "secretValue": value,
                "newSecretName": new_name,
                "secretComment": comment,
                "tagIds": list(tag_ids) if tag_ids is not None else None,
                "secretMetadata": _metadata(metadata),
                "skipMultilineEncoding": skip_multiline_encoding,
            }
        )
        return await self._secret_call("PATCH", name, body)

    async def delete_secret(
        self, name: str, *, project_id: str, environment: str, secret_path: str = "/", type: str = "shared"
    ) -> models.Secret:
        validation.non_empty(name, field="secretName")
        return await self._secret_call(
            "DELETE", name, self._secret_body(project_id, environment, secret_path, type)
        )

    @staticmethod
    def _secret_body(project_id: str, environment: str, secret_path: str, type: str) -> dict[str, Any]:
        validation.non_empty(project_id, field="projectId")
        validation.non_empty(environment, field="environment")
        validation.non_empty(secret_path, field="secretPath")
        return {"projectId": project_id, "environment": environment, "secretPath": secret_path, "type": type}

    async def _secret_call(self, method: str, name: str, body: dict[str, Any]) -> models.Secret:
        path = f"/api/v4/secrets/{wire.segment(name)}"
        envelope = await self._authed(
            _SecretEnvelope, method, path, "/api/v4/secrets/{secretName}", json_body=body
        )
        return envelope.secret

    # --- folders and imports -------------------------------------------------------------------------

    async def create_folder(
        self,
        *,
        project_id: str,
        environment: str,
        name: str,
        path: str = "/",
        description: str | None = None,
    ) -> models.Folder:
        """Create folder ``name`` under ``path`` in ``environment`` (the environment's slug)."""
        validation.non_empty(project_id, field="projectId")
        validation.non_empty(environment, field="environment")
        validation.non_empty(name, field="name")
        body = client_base.drop_none(
            {
                "projectId": project_id,
                "environment": environment,
                "name": name,
                "path": path,
                "description": description,
            }
        )
        envelope = await self._authed(
            _FolderEnvelope, "POST", "/api/v2/folders", "/api/v2/folders", json_body=body
        )
        return envelope.folder

    async def update_secret_import(
        self,
        secret_import_id: str,
        *,
        project_id: str,
        environment: str,
        import_environment: str | None = None,
        import_path: str | None = None,
        position: int | None = None,
        path: str = "/",
    ) -> models.SecretImport:
        validation.non_empty(secret_import_id, field="secretImportId")
        validation.non_empty(project_id, field="projectId")
        validation.non_empty(environment, field="environment")
        body = {
            "projectId": project_id,
            "environment": environment,
            "path": path,
            "import": client_base.drop_none(
                {"environment": import_environment, "path": import_path, "position": position}
            ),
        }
        envelope = await self._authed(
            _SecretImportEnvelope,
            "PATCH",
            f"/api/v2/secret-imports/{wire.segment(secret_import_id)}",
            "/api/v2/secret-imports/{secretImportId}",
            json_body=body,
        )
        return envelope.secret_import

    # --- event stream --------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def subscribe_project_events(
        self, project_id: str, register: Sequence[events.EventRegistration]
    ) -> AsyncIterator[AsyncIterator[events.StreamMessage]]:
        """Open one event stream for ``project_id`` (the id, not the slug) with 1 to 10 filters.

        Refusals raise before anything is yielded: ``PlanNotSupported`` (400), ``StreamLimitReached``
        (429), ``PermissionDenied`` (403), ``AuthenticationError`` (401/TokenError). While iterating:
        ``StreamError`` for ``event: error``, ``Unavailable`` for a broken or silent connection (read
        timeout ``stream_read_timeout``). The iterator simply ends when the server closes the stream.
        """
        validation.non_empty(project_id, field="projectId")
        validation.count(register, field="register", minimum=1, maximum=validation.MAX_EVENT_REGISTRATIONS)
        for registration in register:
            validation.non_empty(registration.event, field="register.event")
        path = "/api/v1/events/subscribe/project-events"
        endpoint = f"POST {path}"
        token = self._required_token(endpoint)
        body = {"projectId": project_id, "register": [r.to_wire() for r in register]}
        async with self._conn.stream("POST", path, endpoint=endpoint, token=token, json_body=body) as chunks:
            messages = events.iter_messages(chunks)
            try:
                yield messages
            finally:
                await messages.aclose()


def _metadata(metadata: Mapping[str, str] | None) -> list[dict[str, str]] | None:
    if metadata is None:
        return None
    return [{"key": key, "value": value} for key, value in metadata.items()]

"""``/api/v3/secrets/raw``: the list (and write) endpoints of self-hosted servers older than v4.

The writes (``POST/PATCH/DELETE /api/v3/secrets/raw/{secretName}``) are what a PushSecret falls
back to on a host whose list answer proved it has no v4 (``listroutes``): such a server has no v4
writes either. The project goes as ``workspaceId``, as in the list.

Why a group of its own: the operator lists through v4 (``client.list_secrets``); this route is
only what ``listroutes`` falls back to on a host whose answer proved it has no v4 list. The answer
has the v4 shape (``{secrets, imports}``), and the real server computes an ETag for every GET (v3
included) and answers ``If-None-Match`` with 304, so conditional GETs work the same way.

Filters are the exception: a v3 route may drop ``metadataFilter`` or ``tagSlugs`` (zod strips what
its schema lacks) and answer the whole folder, so every answer goes through ``listfilters``.
"""

from __future__ import annotations

from typing import Any

from secretferry.service import client_base, listfilters, models, validation, wire

RAW_WRITE_TEMPLATE = wire.LIST_PATH_V3 + "/{secretName}"


class _RawSecretEnvelope(models.ApiModel):
    secret: models.Secret


class SecretsV3Endpoints(client_base.ClientBase):
    async def list_secrets_v3(
        self, query: models.ListSecretsQuery, *, etag: str | None = None
    ) -> models.SecretList | models.NotModified:
        """List one scope through v3 raw, with the same selection as ``list_secrets`` (every boolean
        explicit, the project as ``workspaceId``, the imports flag as ``include_imports``); the tag
        and metadata filters are applied to the answer or refused (``listfilters``)."""
        answer = await self._list_scope(
            wire.LIST_PATH_V3, params=wire.list_secrets_v3_params(query), etag=etag
        )
        if isinstance(answer, models.NotModified):  # the cached list passed the filters already
            return answer
        return listfilters.apply_v3(query, answer)

    # --- writes (PushSecret on servers older than v4) -------------------------------------------

    async def write_secret_v3(
        self,
        method: str,
        name: str,
        *,
        project_id: str,
        environment: str,
        secret_path: str = "/",
        value: str | None = None,
    ) -> models.Secret:
        """``POST`` (create), ``PATCH`` (update) or ``DELETE`` one shared secret through v3 raw."""
        validation.non_empty(name, field="secretName")
        validation.non_empty(project_id, field="workspaceId")
        validation.non_empty(environment, field="environment")
        if method not in {"POST", "PATCH", "DELETE"}:
            raise ValueError(f"not a write method: {method}")
        body: dict[str, Any] = {
            "workspaceId": project_id,
            "environment": environment,
            "secretPath": secret_path,
            "type": "shared",
        }
        if value is not None and method != "DELETE":
            body["secretValue"] = value
        path = f"{wire.LIST_PATH_V3}/{wire.segment(name)}"
        envelope = await self._authed(_RawSecretEnvelope, method, path, RAW_WRITE_TEMPLATE, json_body=body)
        return envelope.secret

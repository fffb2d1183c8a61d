"""``GET /api/v3/secrets/raw``: the list endpoint of self-hosted servers older than v4.

Why a group of its own: the operator lists through v4 (``client.list_secrets``); this route is
only what ``listroutes`` falls back to on a host whose answer proved it has no v4 list. The answer
has the v4 shape (``{secrets, imports}``), and the real server computes an ETag for every GET (v3
included) and answers ``If-None-Match`` with 304, so conditional GETs work the same way.

Filters are the exception: a v3 route may drop ``metadataFilter`` or ``tagSlugs`` (zod strips what
its schema lacks) and answer the whole folder, so every answer goes through ``listfilters``.
"""

from __future__ import annotations

from secretferry.service import client_base, listfilters, models, wire


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

"""Which route finds a project by slug on each host: v1, or ``/api/v2/workspace`` on older servers.

Why: ``GET /api/v1/projects/slug/{slug}`` (docs/service-contract.md) is missing on self-hosted
servers of 2024-10 — a framework 404 (``Route GET:/api/v1/projects/slug/… not found``) — while the
same servers answer ``GET /api/v2/workspace/{slug}`` with the project itself. Before this module,
every SecretSync naming ``projectSlug`` on such a server showed ``SourceNotFound`` and asked again
every 30 s. Like the list route (``listroutes``), the route is a property of the host: the first
answer that proves v1 missing (``errors.RouteNotFound``, never a data 404) switches that host to
v2 for as long as the operator runs, logged once and shown in the status of every identity on it
(``V2_NOTE``). A data 404 from either route is the answer (the project does not exist). Should v2
be missing too, nothing is remembered and the error is the caller's. A switched host that loses
its v2 route (upgraded while we ran) is asked v1 again.

Slug look-ups are rare (``scopes.SlugCache`` keeps every id it found), so no single flight here.
"""

from __future__ import annotations

import logging

from secretferry.service import client as service_client
from secretferry.service import errors, models

logger = logging.getLogger(__name__)

V1 = "/api/v1/projects/slug/{slug}"
V2 = "/api/v2/workspace/{slug}"
V2_NOTE = f"project slugs via GET {V2} (the server has no GET {V1})"
"""For an identity's status: why its host resolves slugs differently from the documented API."""


class SlugRoutes:
    """The slug route of each host, and the fallback from v1 to v2 (see the module docstring)."""

    def __init__(self) -> None:
        self._known: dict[str, str] = {}

    def known(self, api_root: str) -> str | None:
        """The slug route used on ``api_root`` once an answer there showed it; ``None`` before."""
        return self._known.get(api_root)

    async def project(self, client: service_client.ServiceClient, slug: str) -> models.Project:
        """The project named ``slug``, through the host's route."""
        host = client.api_root
        if self._known.get(host) == V2:
            try:
                return await client.get_workspace_by_slug_v2(slug)
            except errors.RouteNotFound:
                if self._known.pop(host, None) is not None:
                    logger.info("the service at %s has no GET %s any more; trying GET %s again", host, V2, V1)
                raise
        try:
            project = await client.get_project_by_slug(slug)
        except errors.RouteNotFound:
            pass
        except errors.ServiceError as exc:
            if not isinstance(exc, errors.Unavailable):
                self._known.setdefault(host, V1)
            raise
        else:
            self._known.setdefault(host, V1)
            return project
        try:
            project = await client.get_workspace_by_slug_v2(slug)
        except errors.ServiceError as exc:
            if not isinstance(exc, errors.RouteNotFound | errors.Unavailable):
                self._switched(host)
            raise
        self._switched(host)
        return project

    def _switched(self, host: str) -> None:
        if self._known.get(host) == V2:
            return
        self._known[host] = V2
        logger.warning(
            "the service at %s has no GET %s (route not found); resolving project slugs through GET %s "
            "for every identity on it",
            host,
            V1,
            V2,
        )

"""What the real server answers for a route it does not have, and how a route is made absent.

The real service is a Fastify app without its own not-found handler (its UI plugin hands every
unmatched ``/api`` request back to ``reply.callNotFound()``), so an unknown route gets Fastify's
default answer::

    404 {"message":"Route GET:/api/v4/secrets?projectId=p not found","error":"Not Found","statusCode":404}

``<url>`` is the request target as sent (path and query, still percent-encoded), and the method
does not matter for matching: a known path with another method is just as unknown (Fastify has no
405). This differs from a *data* 404 (``{reqId, statusCode, message, error}``, ``error`` being
``NotFound`` or a service-specific name such as ``GetSecretByName``), which is how a client tells
"this server lacks the route" from "the route is there, the thing is not".
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.routing import BaseRoute

FASTIFY_ERROR = "Not Found"


def body(method: str, url: str) -> dict[str, Any]:
    """Fastify's ``basic404`` body, keys in its order."""
    return {"message": f"Route {method}:{url} not found", "error": FASTIFY_ERROR, "statusCode": 404}


def raw_url(request: Request) -> str:
    """The request target as the client sent it (``request.raw.url`` in Fastify)."""
    raw_path = request.scope.get("raw_path")
    path = raw_path.decode("latin-1") if isinstance(raw_path, bytes) else request.url.path
    path = path.split("?", 1)[0]  # some servers leave the query on raw_path
    query = request.scope.get("query_string") or b""
    return f"{path}?{query.decode('latin-1')}" if query else path


def response(request: Request) -> JSONResponse:
    return JSONResponse(body(request.method, raw_url(request)), status_code=404)


def _under(route: BaseRoute, prefixes: tuple[str, ...]) -> bool:
    path = getattr(route, "path", None)
    return isinstance(path, str) and any(path == p or path.startswith(p + "/") for p in prefixes)


def without(router: APIRouter, *prefixes: str) -> APIRouter:
    """``router`` minus its routes at or below any of ``prefixes``, so those answer like routes the
    server never had (``--no-v4``: a self-hosted server older than the v4 secrets API; the
    ``selfhosted-2024-10`` profile: no event route, no v1 slug route).

    A new router, not an edited one: a module's router is shared by every app built in the process
    (tests build many), and FastAPI keeps included routers as live views of the original.
    """
    if not any(_under(route, prefixes) for route in router.routes):
        return router
    return APIRouter(routes=[route for route in router.routes if not _under(route, prefixes)])

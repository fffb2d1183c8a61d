"""Error bodies ``{reqId, statusCode, message, error}`` for every failure, like the real service.

Tree::

    ApiError                      any documented error; carries status, name, message, details
    ├── BadRequest (400)
    ├── Unauthorized (401)        also "TokenError" when the server answers expiry with 403
    ├── PermissionDenied (403)    adds ``details``
    ├── NotFound (404)
    └── RateLimited (429)         adds a ``retry-after`` header

FastAPI's own validation errors are re-shaped to 422 (``validation_status``: 401 on the 2024-10
release, whose bodies also lack ``reqId``) with ``message`` as an array of issues, and
any unexpected exception becomes 500 "Something went wrong" so internals never leak. A request no
route matches gets the real server's framework answer instead (``notfound``), not this shape.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from secretferry.devserver import notfound
from secretferry.devserver.config import DevServerConfig

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error answered with the service's JSON error body."""

    status = 500
    name = "InternalServerError"

    def __init__(
        self,
        message: str | list[Any],
        *,
        details: Any = None,
        name: str | None = None,
        status: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message if isinstance(message, str) else "validation failed")
        self.message = message
        self.details = details
        self.headers = headers or {}
        if name is not None:
            self.name = name
        if status is not None:
            self.status = status


class BadRequest(ApiError):
    status = 400
    name = "BadRequest"


class Unauthorized(ApiError):
    status = 401
    name = "UnauthorizedError"


class PermissionDenied(ApiError):
    status = 403
    name = "PermissionDenied"


class NotFound(ApiError):
    status = 404
    name = "NotFound"


class RateLimited(ApiError):
    status = 429
    name = "RateLimitExceeded"

    def __init__(self, message: str, *, retry_after_seconds: int = 60) -> None:
        super().__init__(message, headers={"retry-after": str(retry_after_seconds)})


def error_body(
    status: int, name: str, message: str | list[Any], details: Any = None, *, req_id: bool = True
) -> dict[str, Any]:
    """The JSON error body; ``details`` only when there are some (403 permission errors); no
    ``reqId`` with ``req_id=False`` (the 2024-10 release sent none)."""
    body: dict[str, Any] = {"reqId": f"req-{uuid.uuid4().hex[:16]}"} if req_id else {}
    body |= {"statusCode": status, "message": message, "error": name}
    if details is not None:
        body["details"] = details
    return body


def error_response(error: ApiError, *, req_id: bool = True) -> JSONResponse:
    return JSONResponse(
        error_body(error.status, error.name, error.message, error.details, req_id=req_id),
        status_code=error.status,
        headers=error.headers,
    )


def _issues(exc: RequestValidationError) -> list[dict[str, Any]]:
    issues = []
    for item in exc.errors():
        issues.append(
            {
                "code": item.get("type", "invalid"),
                "path": [str(part) for part in item.get("loc", ()) if part not in ("body", "query", "path")],
                "message": item.get("msg", "invalid"),
            }
        )
    return issues


VALIDATION_FAILURE = "ValidationFailure"
_HTTP_NAMES = {400: "BadRequest", 401: "UnauthorizedError", 403: "PermissionDenied", 404: "NotFound"}


def _config(request: Request) -> DevServerConfig:
    config: DevServerConfig = request.app.state.dev.config
    return config


def install(app: FastAPI) -> None:
    """Replace FastAPI's default error handlers with the service's error shape."""

    async def on_api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        config = _config(request)
        if exc.name == VALIDATION_FAILURE and exc.status == 422:  # zod's answer, 401 on old servers
            exc.status = config.validation_status
        return error_response(exc, req_id=config.error_req_id)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        config = _config(request)
        status = config.validation_status  # 422, or 401 on old servers (profiles.py)
        body = error_body(status, VALIDATION_FAILURE, _issues(exc), req_id=config.error_req_id)
        return JSONResponse(body, status_code=status)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code in (404, 405):  # no such route: the real server's Fastify answer
            return notfound.response(request)
        name = _HTTP_NAMES.get(exc.status_code, "Error")
        body = error_body(exc.status_code, name, str(exc.detail), req_id=_config(request).error_req_id)
        return JSONResponse(body, status_code=exc.status_code)

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        body = error_body(
            500, "InternalServerError", "Something went wrong", req_id=_config(request).error_req_id
        )
        return JSONResponse(body, status_code=500)

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)

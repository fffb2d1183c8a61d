"""Pure translation between our calls and the service's wire format (no I/O, table-tested).

- ``api_root``: where the API lives for a configured host.
- ``list_secrets_params`` / ``list_secrets_v3_params``: the query of ``GET /api/v4/secrets`` and
  of ``GET /api/v3/secrets/raw`` (servers older than v4).
- ``error_for``: status code + error body → the ``errors`` class that callers branch on;
  ``route_missing`` tells a 404 for a missing endpoint from a 404 for missing data.
- ``service_said``: the service's own words, marked as such, for messages that reach status.
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from typing import Any

from secretferry import backoff
from secretferry.service import authwire, errors, models, validation

# The list endpoints: v4, and v3 "raw" on self-hosted servers older than v4 (docs/service-contract.md).
LIST_PATH_V4 = "/api/v4/secrets"
LIST_PATH_V3 = "/api/v3/secrets/raw"

# Text the service wrote reaches status conditions and Events: a status message must stay
# readable, and a hostile service must not fill it with text that reads as ours.
_MAX_SERVICE_TEXT_LENGTH = 200
# Request ids are short opaque tokens; anything else is not shown.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")

# docs/service-contract.md: an expired token is answered 401, or 403 with this error name.
_TOKEN_ERROR = "TokenError"
# docs/service-contract.md, "Errors": the service's own 404 (a project, folder or secret that does not
# exist) names its error class; a route the server does not have is answered by the web framework
# (Fastify) with the reason phrase and "Route GET:/api/v4/secrets?… not found", and no reqId.
_SERVICE_NOT_FOUND = "NotFound"
_FRAMEWORK_NOT_FOUND = "Not Found"
_MISSING_ROUTE_MESSAGE = re.compile(r"Route [A-Z]+:.+ not found")


def api_root(base_url: str) -> str:
    """``https://host[/prefix][/api][/]`` → ``https://host[/prefix]/api`` (the contract appends /api)."""
    parts = urllib.parse.urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise errors.ValidationError("base URL must be an absolute http(s) URL", field="base_url")
    path = parts.path.rstrip("/")
    if not path.endswith("/api"):
        path = f"{path}/api"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


# Path segments a URL normalizer (httpx's included) removes, changing the route: ``slug/..`` is
# ``GET /api/v1/projects``. A name the user wrote must never pick the route it is sent to.
_DOT_SEGMENTS = (".", "..")


def segment(value: str) -> str:
    """Quote one path segment (names may hold characters that are special in URLs); ``.`` and
    ``..`` are refused, since no quoting keeps them in place."""
    if value in _DOT_SEGMENTS:
        raise errors.ValidationError(
            f"{value!r} is not a name: as a URL path segment it would address another route",
            field="name",
        )
    return urllib.parse.quote(value, safe="")


def boolean(value: bool) -> str:
    return "true" if value else "false"


def list_secrets_params(query: models.ListSecretsQuery) -> list[tuple[str, str]]:
    """Every boolean explicit: the real service's defaults differ from the documented ones."""
    _check_location(query)
    params = [
        ("projectId", query.project_id),
        ("environment", query.environment),
        ("secretPath", query.secret_path),
        ("viewSecretValue", boolean(query.view_secret_value)),
        ("expandSecretReferences", boolean(query.expand_secret_references)),
        ("recursive", boolean(query.recursive)),
        ("includePersonalOverrides", boolean(query.include_personal_overrides)),
        # Documented spelling and the real server's spelling; each ignores the other.
        ("includeImports", boolean(query.include_imports)),
        ("include_imports", boolean(query.include_imports)),
    ]
    return params + _filters(query)


def list_secrets_v3_params(query: models.ListSecretsQuery) -> list[tuple[str, str]]:
    """The same selection for ``GET /api/v3/secrets/raw`` (servers without the v4 list).

    v3 names the project ``workspaceId`` and knows the imports flag only as ``include_imports``;
    its booleans default to false like v4's, so every one is sent. It has no personal-overrides
    flag: asking for them is refused rather than silently answered without them.
    """
    _check_location(query)
    if query.include_personal_overrides:
        raise errors.ValidationError(
            "the v3 list (GET /api/v3/secrets/raw) cannot include personal overrides",
            field="includePersonalOverrides",
        )
    params = [
        ("workspaceId", query.project_id),
        ("environment", query.environment),
        ("secretPath", query.secret_path),
        ("viewSecretValue", boolean(query.view_secret_value)),
        ("expandSecretReferences", boolean(query.expand_secret_references)),
        ("recursive", boolean(query.recursive)),
        ("include_imports", boolean(query.include_imports)),
    ]
    return params + _filters(query)


def _check_location(query: models.ListSecretsQuery) -> None:
    validation.non_empty(query.project_id, field="projectId")
    validation.non_empty(query.environment, field="environment")
    validation.non_empty(query.secret_path, field="secretPath")


def _filters(query: models.ListSecretsQuery) -> list[tuple[str, str]]:
    """``tagSlugs`` and ``metadataFilter``: the same names and syntax on v3 and v4."""
    params: list[tuple[str, str]] = []
    if query.tag_slugs:
        for tag in query.tag_slugs:
            validation.non_empty(tag, field="tagSlugs")
            if "," in tag:
                raise errors.ValidationError("tagSlugs entries must not contain ','", field="tagSlugs")
        params.append(("tagSlugs", ",".join(query.tag_slugs)))
    if query.metadata_filter:
        if len(query.metadata_filter) > validation.MAX_METADATA_FILTERS:
            raise errors.ValidationError(
                f"metadataFilter takes at most {validation.MAX_METADATA_FILTERS} pairs "
                "(the service answers 422)",
                field="metadataFilter",
            )
        for key, value in query.metadata_filter:
            validation.metadata_filter_pair(key, value)
        params.append(
            ("metadataFilter", "|".join(f"key={key},value={value}" for key, value in query.metadata_filter))
        )
    return params


def retry_after(header: str | None) -> float | None:
    """Seconds from a ``retry-after`` header, at most ``backoff.RETRY_AFTER_MAX_SECONDS``; ``None``
    when absent or not a non-negative number."""
    if header is None:
        return None
    try:
        seconds = float(header.strip())
    except ValueError:
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, backoff.RETRY_AFTER_MAX_SECONDS)


def decode_error_body(content: bytes) -> dict[str, Any]:
    """The JSON object of an error body, or ``{}`` when it is not one (never echoed raw)."""
    try:
        body = json.loads(content) if content else None
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def service_said(text: str) -> str:
    """``service said: "…"``: the service's text, quoted, cut to 200 characters, unprintable
    characters (line breaks, bidi controls) replaced, so it can neither pass for the operator's
    own words nor forge a line in a log or an Event."""
    clean = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    if len(clean) > _MAX_SERVICE_TEXT_LENGTH:
        clean = clean[:_MAX_SERVICE_TEXT_LENGTH] + "…"
    return f"service said: {json.dumps(clean, ensure_ascii=False)}"


def request_id(value: object) -> str | None:
    """A request id the service sent, if it looks like one (it is shown in status)."""
    return value if isinstance(value, str) and _REQUEST_ID.fullmatch(value) else None


def _message(body: dict[str, Any]) -> str:
    raw = body.get("message")
    if isinstance(raw, list):
        parts = []
        for issue in raw:
            if isinstance(issue, dict):
                text = str(issue.get("message", ""))
                path = issue.get("path")
                if isinstance(path, list) and path:
                    text = f"{'.'.join(str(p) for p in path)}: {text}"
                parts.append(text)
            else:
                parts.append(str(issue))
        raw = "; ".join(p for p in parts if p)
    if not isinstance(raw, str) or not raw:
        raw = body.get("error") if isinstance(body.get("error"), str) else None
    return raw or ""


def route_missing(body: dict[str, Any]) -> bool:
    """Whether a 404 body says the ROUTE is missing (the server has no such endpoint), not data.

    Only a positive sign counts: an empty or foreign body (a proxy's page) is a plain ``NotFound``,
    because a host wrongly taken for one without the endpoint would be switched for good.
    """
    error = body.get("error")
    if error == _SERVICE_NOT_FOUND:
        return False
    message = body.get("message")
    said_route = isinstance(message, str) and _MISSING_ROUTE_MESSAGE.fullmatch(message) is not None
    return said_route or error == _FRAMEWORK_NOT_FOUND


def error_for(
    status_code: int,
    body: dict[str, Any],
    *,
    endpoint: str,
    retry_after_header: str | None = None,
    subscribe: bool = False,
    reason: str = "",
) -> errors.ServiceError:
    """Map a non-success answer to its error class; ``subscribe`` enables the stream refusals."""
    req_id = request_id(body.get("reqId"))
    text = _message(body) or reason  # the service's words (a reason phrase is the server's too)
    if status_code == 403:
        text = authwire.forbidden_text(body, text)
    message = f"{endpoint}: {service_said(text)}" if text else f"{endpoint}: HTTP {status_code}"
    common: dict[str, Any] = {"status_code": status_code, "req_id": req_id}
    is_issue_list = isinstance(body.get("message"), list)
    if status_code == 401:
        # Older servers (the 2024-10 self-hosted release) answer validation failures with 401.
        if is_issue_list or authwire.is_validation_failure(body):
            return errors.ValidationError(message, **common)
        if audiences := authwire.audience_mismatch(body):
            token_auds, target_auds = audiences
            return errors.TokenReviewAudienceRejected(
                message, token_audiences=token_auds, target_audiences=target_auds, **common
            )
        return errors.AuthenticationError(message, **common)
    if status_code == 403:
        if body.get("error") == _TOKEN_ERROR:
            return errors.AuthenticationError(message, **common)
        return errors.PermissionDenied(message, details=body.get("details"), **common)
    if status_code == 404:
        not_found = errors.RouteNotFound if route_missing(body) else errors.NotFound
        return not_found(message, **common)
    if status_code == 409:
        return errors.Conflict(message, **common)
    if status_code == 400 and subscribe and "plan" in text.lower():
        return errors.PlanNotSupported(message, **common)
    if status_code in (400, 422):
        return errors.ValidationError(message, **common)
    if status_code == 429:
        cls = errors.StreamLimitReached if subscribe else errors.RateLimited
        return cls(message, retry_after=retry_after(retry_after_header), **common)
    if 300 <= status_code <= 399:  # we never follow redirects: a redirect means a wrong base URL
        return errors.ProtocolError(
            f"{endpoint}: unexpected redirect (HTTP {status_code}); check the base URL", **common
        )
    # 408 Request Timeout and every 5xx: the service (or a proxy in front of it) may recover.
    if status_code == 408 or 500 <= status_code <= 599:
        return errors.Unavailable(message, retry_after=retry_after(retry_after_header), **common)
    return errors.ServiceError(message, **common)

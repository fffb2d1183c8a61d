"""Readings of the service's error bodies that only the auth side needs (pure, table-tested).

``wire.error_for`` maps every error body to its class; these three answers of real servers need a
closer look at the body than a status code gives, and are kept here so that the list/slug side of
``wire`` stays about listing:

- ``audience_mismatch``: a 401 ``KubernetesTokenReviewError`` whose text is the apiserver's
  ``token audiences [...] is invalid for the target audiences [...]``: the TokenReview the service
  made rejected the token's audiences. Both lists are parsed, so the caller can tell a plain
  mismatch (the server's allowed audience differs from ours) from a server that sends no audience
  at all (the target audiences are then the apiserver's own).
- ``is_validation_failure``: ``error: "ValidationFailure"``; the 2024-10 self-hosted release
  answers its validation errors 401 (not 422), which must not read as "token expired".
- ``forbidden_text``: that release puts a 403's useful text in ``error`` (``Identity is not a
  member of the specified project with ID '…'``) and a generic sentence in ``message``.
"""

from __future__ import annotations

import re
from typing import Any, Final

TOKEN_REVIEW_ERROR: Final = "KubernetesTokenReviewError"
VALIDATION_FAILURE: Final = "ValidationFailure"
# The apiserver's own words (k8s.io/apiserver authenticator/audagnostic), lists printed by Go's %q.
_AUDIENCES = re.compile(
    r"token audiences \[(?P<token>[^\]]*)\] is invalid for the target audiences \[(?P<target>[^\]]*)\]"
)
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
# An ``error`` that is a class name (``PermissionDenied``) says nothing more; one with a space is text.
_ERROR_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")


def audience_mismatch(body: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(token audiences, target audiences) of a TokenReview audience refusal, else None."""
    if body.get("error") != TOKEN_REVIEW_ERROR:
        return None
    message = body.get("message")
    match = _AUDIENCES.search(message) if isinstance(message, str) else None
    if match is None:
        return None
    return _quoted(match.group("token")), _quoted(match.group("target"))


def _quoted(listing: str) -> tuple[str, ...]:
    return tuple(item.encode().decode("unicode_escape") for item in _QUOTED.findall(listing))


def is_validation_failure(body: dict[str, Any]) -> bool:
    return body.get("error") == VALIDATION_FAILURE


def forbidden_text(body: dict[str, Any], text: str) -> str:
    """``text`` (from ``message``) with the body's ``error`` added when that is prose, not a name."""
    error = body.get("error")
    if not isinstance(error, str) or not error.strip() or _ERROR_NAME.fullmatch(error.strip()):
        return text
    if error.strip() in text:
        return text
    return f"{text}: {error.strip()}" if text and text != error else error.strip()

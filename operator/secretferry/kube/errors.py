"""Errors of the Kubernetes layer; nothing from aiohttp leaks past it.

Callers decide what to do by class (retry, give up, relist), never by message text::

    KubeError(status, reason, message)      any failed API call
    ├── BadRequest                          400 and other 4xx not listed below
    ├── Unauthorized                        401: credentials missing, expired or rejected
    │   └── ExecCredentialRefused           401 twice: to an exec plugin's credential and its re-run
    ├── Forbidden                           403: RBAC says no
    ├── NotFound                            404
    │   └── SecretKeyMissing                the Secret exists but lacks the requested key
    ├── Conflict                            409: stale resourceVersion or server-side apply
    │   │                                   field-manager conflict (see ``.conflicts``)
    │   └── AlreadyExists                   409 on create
    ├── Gone                                410: resourceVersion / continue token too old → relist
    ├── Invalid                             422: the object was rejected by validation
    │   └── SecretValueUndecodable          a referenced Secret value is not UTF-8 text
    ├── Unavailable                         5xx, 429, timeouts and connection failures: retry later
    ├── NotConfigured                       no kubeconfig / in-cluster config to connect with
    └── CredentialPluginFailed              a kubeconfig's exec credential plugin failed to run
                                            or printed no usable ExecCredential (execplugin.py)

Messages come from the apiserver's ``Status`` (which names fields and keys, not values) or from
this package; a Secret's data never goes into one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# The apiserver words every field-manager conflict cause as
# 'conflict with "<manager>"[ with subresource "<sub>"] using <apiVersion>' (k8s.io/apimachinery
# merge.Conflict.Error); the manager is the only part we need.
_MANAGER_RE = re.compile(r'conflict with "([^"]*)"')


class KubeError(Exception):
    """A Kubernetes API call failed; ``status`` is the HTTP code (0 when there was no answer)."""

    def __init__(self, status: int, reason: str, message: str, *, details_kind: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        #: The resource the apiserver's Status is about (``details.kind``, e.g. ``namespaces``).
        self.details_kind = details_kind


class BadRequest(KubeError):
    pass


class Unauthorized(KubeError):
    pass


class ExecCredentialRefused(Unauthorized):
    """The apiserver refused an exec credential plugin's credential, and the one a second run
    printed: the message names the plugin (what the user must fix), never the credential."""


class Forbidden(KubeError):
    pass


class NotFound(KubeError):
    pass


class SecretKeyMissing(NotFound):
    pass


@dataclass(frozen=True)
class FieldConflict:
    """One field another field manager owns: ``field`` like ``.data.password``."""

    field: str
    manager: str
    message: str


class Conflict(KubeError):
    """409. For server-side apply, ``conflicts`` lists each contested field and its owner."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        details_kind: str = "",
        conflicts: tuple[FieldConflict, ...] = (),
    ) -> None:
        super().__init__(status, reason, message, details_kind=details_kind)
        self.conflicts = conflicts

    @property
    def managers(self) -> frozenset[str]:
        """Field managers that own the contested fields (empty for resourceVersion conflicts)."""
        return frozenset(c.manager for c in self.conflicts)

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(c.field for c in self.conflicts)


class AlreadyExists(Conflict):
    pass


class Gone(KubeError):
    pass


class Invalid(KubeError):
    """422. ``fields`` names each refused field and the kind of refusal (``data[ssh-privatekey]:
    FieldValueRequired``) without the apiserver's detail text, which may quote a value: Go's JSON
    errors name the offending character (``invalid character 'N'``)."""

    def __init__(
        self, status: int, reason: str, message: str, *, details_kind: str = "", fields: tuple[str, ...] = ()
    ) -> None:
        super().__init__(status, reason, message, details_kind=details_kind)
        self.fields = fields


class SecretValueUndecodable(Invalid):
    pass


class Unavailable(KubeError):
    pass


class NotConfigured(KubeError):
    pass


class CredentialPluginFailed(KubeError):
    """Not NotConfigured: the kubeconfig is fine, its plugin failed this time (expired cloud login,
    network) and may work when run again. The message names the plugin and quotes the tail of its
    stderr with token-shaped text redacted, never its stdout."""


def _conflicts(details: dict[str, Any]) -> tuple[FieldConflict, ...]:
    found: list[FieldConflict] = []
    for cause in details.get("causes") or ():
        # StatusCause serialises its type under the JSON key "reason".
        if not isinstance(cause, dict) or cause.get("reason") != "FieldManagerConflict":
            continue
        text = str(cause.get("message", ""))
        match = _MANAGER_RE.search(text)
        found.append(
            FieldConflict(
                field=str(cause.get("field", "")), manager=match.group(1) if match else "", message=text
            )
        )
    return tuple(found)


def _fields(details: dict[str, Any]) -> tuple[str, ...]:
    return tuple(
        f"{cause.get('field') or '?'}: {cause.get('reason') or 'invalid'}"
        for cause in details.get("causes") or ()
        if isinstance(cause, dict)
    )


def from_status(status: int, body: bytes | dict[str, Any]) -> KubeError:
    """Build the error for an HTTP status and its (usually ``Status``) body."""
    payload: Any = body
    if isinstance(body, bytes):
        try:
            payload = json.loads(body)
        except ValueError:
            payload = {}
    if not isinstance(payload, dict):
        payload = {}
    reason = str(payload.get("reason") or "")
    # A plain-text body (a proxy, a webhook failure) is cut short: it is not ours to trust.
    message = str(
        payload.get("message") or (body[:200].decode(errors="replace") if isinstance(body, bytes) else "")
    )
    raw_details = payload.get("details")
    details: dict[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    kind = str(details.get("kind") or "")
    if status == 409:
        conflicts = _conflicts(details)
        if reason == "AlreadyExists":
            return AlreadyExists(status, reason, message, details_kind=kind, conflicts=conflicts)
        return Conflict(status, reason or "Conflict", message, details_kind=kind, conflicts=conflicts)
    if status == 422:
        return Invalid(status, reason or "Invalid", message, details_kind=kind, fields=_fields(details))
    cls: type[KubeError]
    if status == 401:
        cls = Unauthorized
    elif status == 403:
        cls = Forbidden
    elif status == 404:
        cls = NotFound
    elif status == 410:
        cls = Gone
    elif status == 422:
        cls = Invalid
    elif status == 429 or status >= 500:
        cls = Unavailable
    elif 400 <= status < 500:
        cls = BadRequest
    else:
        cls = KubeError
    return cls(status, reason or _DEFAULT_REASONS.get(status, "Unknown"), message, details_kind=kind)


_DEFAULT_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    410: "Gone",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}

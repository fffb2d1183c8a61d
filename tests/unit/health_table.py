"""How every reason of reasons.py reads in GitOps tools: Argo CD's health and kstatus' Stalled.

One explicit row per constant, on purpose not derived from ``reasons.WAITING_FOR_REFERENCE``: a new
reason fails test_argocd.py and test_conditions.py until someone decides here how Argo CD and Flux
should show it (and the operator and docs/argocd/ agree).

Each row: the Ready status the reason comes with, Argo CD's health for it, and whether Ready=False
with it is kstatus' Stalled (Failed) rather than InProgress.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Final, Literal, NamedTuple

REASONS = Path(__file__).resolve().parents[2] / "operator" / "secretferry" / "reconcile" / "reasons.py"

Health = Literal["Healthy", "Progressing", "Degraded", "Suspended"]


class Row(NamedTuple):
    ready: Literal["True", "False", "Unknown"]
    argo: Health
    stalled: bool


OK: Final = Row("True", "Healthy", False)
WAITS: Final = Row("False", "Progressing", False)  # a referenced object may still come
RETRIED: Final = Row("False", "Degraded", False)  # the service: retried, shown, not Stalled
FAILS: Final = Row("False", "Degraded", True)  # only a change fixes it

READY_REASONS: Final[dict[str, Row]] = {
    "SYNCED": OK,
    "NO_NAMESPACES_SELECTED": OK,
    "LOGGED_IN": OK,
    "GENERATED": OK,
    "SPEC_CHANGED_SINCE_GENERATED": OK,
    "LEASED": OK,
    "LEASE_RENEW_FAILED": OK,
    "PUSHED": OK,
    "GRANTED": OK,
    "PROGRESSING": Row("Unknown", "Progressing", False),
    "IDENTITY_NOT_FOUND": WAITS,
    "IDENTITY_NOT_READY": WAITS,
    "CREDENTIALS_NOT_FOUND": WAITS,
    "CREDENTIALS_NOT_OPTED_IN": WAITS,
    "GENERATOR_NOT_FOUND": WAITS,
    "GENERATOR_NOT_READY": WAITS,
    "TEMPLATE_SOURCE_MISSING": WAITS,
    "TARGET_NOT_FOUND": WAITS,
    "PUSH_SOURCE_NOT_OPTED_IN": WAITS,
    "PUSH_GENERATOR_NOT_READY": WAITS,
    "GRANTER_NOT_FOUND": WAITS,
    "GRANTER_NOT_READY": WAITS,
    "SERVICE_UNAVAILABLE": RETRIED,
    "RATE_LIMITED": RETRIED,
    "LEASE_EXPIRED": RETRIED,
    "PROXY_UNREACHABLE": RETRIED,  # nothing answers at the proxy yet: retried, passes when it is back
    "NAMESPACES_FAILED": FAILS,
    "INVALID_SPEC": FAILS,
    "IDENTITY_NOT_ALLOWED": FAILS,
    "HOST_NOT_ALLOWED": FAILS,
    "AUDIENCE_REQUIRED": FAILS,
    "TOKEN_REQUESTS_DISABLED": FAILS,
    "TEMPLATES_NOT_ALLOWED": FAILS,
    "AUDIENCE_NOT_ALLOWED": FAILS,
    "AUTH_FAILED": FAILS,
    "SERVER_IGNORES_AUDIENCE": FAILS,
    "FORBIDDEN": FAILS,
    "SOURCE_NOT_FOUND": FAILS,
    "SOURCE_EMPTY": FAILS,
    "SOURCE_TOO_DEEP": FAILS,
    "FILTER_NOT_SUPPORTED": FAILS,
    "TEMPLATE_ERROR": FAILS,
    "TEMPLATE_SOURCE_NOT_LABELLED": FAILS,
    "TEMPLATE_SOURCE_TOO_LARGE": FAILS,
    "TEMPLATE_SOURCE_KEY_MISSING": FAILS,
    "TEMPLATE_SOURCE_INVALID": FAILS,
    "INVALID_KEY": FAILS,
    "KEY_COLLISION": FAILS,
    "DECODING_FAILED": FAILS,
    "INVALID_SECRET_TYPE": FAILS,
    "TARGET_TOO_LARGE": FAILS,
    "TARGET_CONFLICT": FAILS,
    "TARGET_NOT_OPTED_IN": FAILS,
    "TARGET_PROTECTED": FAILS,
    "TARGET_METADATA_FORBIDDEN": FAILS,
    "KUBERNETES_ERROR": FAILS,
    "LEASE_REFUSED": FAILS,
    "LEASE_LIMIT_REACHED": FAILS,
    "LEASE_DATA_INVALID": FAILS,
    "LEASE_WRITE_FAILED": FAILS,
    "TARGET_NOT_OWNED": FAILS,
    "PUSH_CONFLICT": FAILS,
    "PUSH_SOURCE_EMPTY": FAILS,
    "PUSH_NOT_ALLOWED": FAILS,
    "PUSH_FAILED": FAILS,
    "PUSH_LOOP": FAILS,
    "PERMANENT_NOT_ALLOWED": FAILS,
    "GRANT_FORBIDDEN": FAILS,
    "GRANT_REFUSED": FAILS,
    "SLUG_CONFLICT": FAILS,
    "SERVER_NOT_SUPPORTED": FAILS,
    "PROXY_REFUSED": FAILS,  # the proxy says no (403/407): its configuration must change
    "TLS_VERIFY_FAILED": FAILS,  # the CA or the server's certificate must change
}

# TemporaryPrivilege's Active condition, with Ready=True (Granted): Argo CD's health.
ACTIVE_REASONS: Final[dict[str, tuple[Literal["True", "False"], Health]]] = {
    "ACTIVE": ("True", "Healthy"),
    "PENDING": ("False", "Suspended"),  # waits for its window to start, by itself
    "EXPIRED": ("False", "Healthy"),  # over as specified; the message says so
    "NOT_GRANTED": ("False", "Healthy"),  # only with Ready=False in practice, which decides
}

# Constants that are no reason of Ready or Active: condition types, status.updateMode words, the
# PushSecret Conflict condition's reasons (Ready decides its health), Event-only reasons.
OTHER: Final = {
    "READY",
    "STALLED",
    "STREAMING",
    "POLLING",
    "ON_CHANGE",
    "CREATED_ONCE",
    "INSTANT_UPDATES_DISABLED",
    "PUSH_CONFLICT_REPLACED",
    "NO_CONFLICT",
    "LEASE_REPLACED",
    "LEASE_REVOKED",
    "LEASE_RETAINED",
    "LEASE_REVOKE_FAILED",
}


def constants() -> dict[str, str]:
    """NAME -> value of every string constant in reasons.py."""
    found: dict[str, str] = {}
    for node in ast.parse(REASONS.read_text()).body:
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found[node.target.id] = node.value.value
    return found


def unclassified() -> list[str]:
    """Constants of reasons.py with no row here (and rows whose constant is gone)."""
    names = set(constants())
    rows = set(READY_REASONS) | set(ACTIVE_REASONS) | OTHER
    return sorted(names ^ rows)

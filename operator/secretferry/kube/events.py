"""Kubernetes Events (events.k8s.io/v1) about our objects — best effort by design.

An Event is a courtesy to humans running ``kubectl describe``; losing one must never fail or
delay a reconcile, so every failure is logged and swallowed here.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Literal, NotRequired, TypedDict
from urllib.parse import quote

from secretferry.kube import errors
from secretferry.kube.client import Kube

logger = logging.getLogger(__name__)

REPORTING_CONTROLLER = "secretferry.io/operator"
# events.k8s.io/v1 validation limits (k8s.io/kubernetes pkg/apis/core/validation/events.go).
_NOTE_MAX_BYTES = 1024
_SHORT_MAX_CHARS = 128  # reason, action, reportingController, reportingInstance
# Where Events about cluster-scoped objects go, as kubectl and client-go's recorder do.
_CLUSTER_SCOPED_EVENT_NAMESPACE = "default"


class ObjectRef(TypedDict):
    apiVersion: str
    kind: str
    name: str
    uid: str
    namespace: NotRequired[str | None]


def event_namespace(regarding: ObjectRef) -> str:
    return regarding.get("namespace") or _CLUSTER_SCOPED_EVENT_NAMESPACE


def _clip_bytes(text: str, limit: int) -> str:
    raw = text.encode()
    return text if len(raw) <= limit else raw[: limit - 3].decode(errors="ignore") + "..."


def build(
    *,
    regarding: ObjectRef,
    reason: str,
    note: str,
    type: Literal["Normal", "Warning"],
    action: str,
    reporting_controller: str = REPORTING_CONTROLLER,
    reporting_instance: str,
    now: datetime | None = None,
) -> dict[str, object]:
    """The Event body (pure; separate so tests can check the limits)."""
    moment = now or datetime.now(UTC)
    namespace = event_namespace(regarding)
    ref = {k: v for k, v in regarding.items() if v}
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        # client-go's naming: the object's name plus a nanosecond timestamp in hex.
        "metadata": {"name": f"{regarding['name']}.{time.time_ns():x}", "namespace": namespace},
        "eventTime": moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": reporting_controller[:_SHORT_MAX_CHARS],
        "reportingInstance": reporting_instance[:_SHORT_MAX_CHARS],
        "action": action[:_SHORT_MAX_CHARS],
        "reason": reason[:_SHORT_MAX_CHARS],
        "note": _clip_bytes(note, _NOTE_MAX_BYTES),
        "type": type,
        "regarding": ref,
    }


async def post(
    kube: Kube,
    *,
    regarding: ObjectRef,
    reason: str,
    note: str,
    type: Literal["Normal", "Warning"],
    action: str,
    reporting_controller: str = REPORTING_CONTROLLER,
    reporting_instance: str,
) -> None:
    """Record an Event; failures are logged at WARNING and otherwise ignored."""
    body = build(
        regarding=regarding,
        reason=reason,
        note=note,
        type=type,
        action=action,
        reporting_controller=reporting_controller,
        reporting_instance=reporting_instance,
    )
    namespace = event_namespace(regarding)
    try:
        await kube.request(
            "POST", f"/apis/events.k8s.io/v1/namespaces/{quote(namespace, safe='')}/events", body=body
        )
    except errors.KubeError as exc:
        logger.warning(
            "could not post event %s for %s %s/%s: %s",
            reason,
            regarding["kind"],
            namespace,
            regarding["name"],
            exc,
        )

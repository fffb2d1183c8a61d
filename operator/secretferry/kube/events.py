"""Kubernetes Events (events.k8s.io/v1) about our objects — best effort by design.

An Event is a courtesy to humans running ``kubectl describe``; losing one must never fail or
delay a reconcile, so every failure is logged and swallowed here.

A namespace being deleted refuses every new object, Events included, and its deletion flips many
of our objects at once (the identity goes first, so every SecretSync there turns
IdentityNotFound): a thousand SecretSyncs meant a thousand WARNING lines about Events nobody
could read anyway. So a namespace seen refusing for that reason is remembered for a while
(:class:`TerminatingNamespaces`): no Event is posted there, one DEBUG line says so, and callers
ask :func:`terminating` before they log a transition of an object in it.

Before an Event is sent it goes through client-go's correlation (``eventcache``): a rate limit
per object, aggregation of many different notes, and repeats counted into the first Event's
``series`` instead of new Events. That needs ``patch`` on events besides ``create``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal, NotRequired, TypedDict
from urllib.parse import quote

from secretferry import controlchars, logfields, metrics
from secretferry.kube import errors, eventcache
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


# How long a namespace seen terminating is remembered. The namespace controller removes a
# thousand objects within seconds to a minute, and a namespace held up by a finalizer is asked
# again (one refused post) only this often; a namespace recreated under the same name meanwhile
# gets Events again at the latest after this long.
TERMINATING_MEMORY_SECONDS = 300.0
# The apiserver's NamespaceLifecycle admission (k8s.io/apiserver, plugin/namespace/lifecycle)
# refuses a create in a terminating namespace with 403 "unable to create new content in namespace
# <ns> because it is being terminated", and the status cause NamespaceTerminating; ``KubeError``
# keeps no causes, so the sentence is what is matched. Once the namespace is gone: 404 with
# details.kind "namespaces".
_TERMINATING_TEXT = "because it is being terminated"


class TerminatingNamespaces:
    """Namespaces seen being deleted, each forgotten ``memory_seconds`` after it was last seen."""

    def __init__(
        self,
        *,
        memory_seconds: float = TERMINATING_MEMORY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.memory_seconds = memory_seconds
        self._clock = clock
        self._until: dict[str, float] = {}

    def seen(self, namespace: str) -> bool:
        """Remember ``namespace`` as terminating; True when it was not remembered already."""
        new = namespace not in self
        self._until[namespace] = self._clock() + self.memory_seconds
        return new

    def __contains__(self, namespace: object) -> bool:
        until = self._until.get(namespace) if isinstance(namespace, str) else None
        if until is None:
            return False
        if self._clock() >= until:
            del self._until[namespace]  # type: ignore[arg-type]  # a str, checked above
            return False
        return True


TERMINATING = TerminatingNamespaces()
"""The process's memory of terminating namespaces (a module-level one: every poster shares it)."""


CORRELATOR = eventcache.Correlator()
"""The process's Event correlation (module-level like ``TERMINATING``: every poster shares it)."""


def terminating(namespace: str | None) -> bool:
    """Whether ``namespace`` was seen being deleted lately: then nothing about its objects is
    worth an Event or a WARNING line."""
    return bool(namespace) and namespace in TERMINATING


def namespace_going(exc: errors.KubeError) -> bool:
    """Whether a create was refused because its namespace is being deleted, or is gone already."""
    if isinstance(exc, errors.NotFound):
        return exc.details_kind == "namespaces"
    return isinstance(exc, errors.Forbidden | errors.Conflict) and _TERMINATING_TEXT in exc.message


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
        # The note quotes tenants' and the service's text: escaped like log lines and statuses.
        "note": _clip_bytes(controlchars.escape(note), _NOTE_MAX_BYTES),
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
    namespaces: TerminatingNamespaces | None = None,
    correlator: eventcache.Correlator | None = None,
) -> bool:
    """Record an Event; returns whether it was recorded (posted, or counted into an Event posted
    before). Failures are logged at WARNING and otherwise ignored, except in a namespace being
    deleted: nothing is posted there, and one DEBUG line says so (``namespaces``: the memory of
    those, the process's own by default). ``correlator``: the process's own by default."""
    memory = TERMINATING if namespaces is None else namespaces
    namespace = event_namespace(regarding)
    if namespace in memory:
        return False
    correlation = CORRELATOR if correlator is None else correlator
    decision = correlation.decide(
        source=(reporting_controller, reporting_instance),
        regarding=tuple(str(regarding.get(k) or "") for k in _REGARDING_KEYS),
        type=type,
        reason=reason,
        action=action,
        note=note,
    )
    fields = logfields.about(regarding["kind"], regarding.get("namespace"), regarding["name"], reason=reason)
    if decision.action == "drop":
        metrics.EVENTS.labels(result="dropped").inc()
        logger.debug("event %s dropped: over the rate limit of Events for this object", reason, extra=fields)
        return False
    if decision.combined:
        metrics.EVENTS_COMBINED.inc()
    if decision.action == "count":
        metrics.EVENTS.labels(result="series").inc()
        return True
    series = decision.series
    assert series is not None  # post and patch always carry their series
    if decision.action == "patch" and series.name is not None:
        try:
            await kube.request(
                "PATCH",
                f"{_collection(namespace)}/{quote(series.name, safe='')}",
                body={"series": {"count": series.count, "lastObservedTime": _micro(series.last_observed)}},
                content_type=_MERGE_PATCH,
            )
        except errors.NotFound:
            series = correlation.renew(series)  # expired (1 h by default) or deleted: post anew
        except errors.KubeError as exc:
            _failed(exc, regarding=regarding, reason=reason, namespace=namespace, fields=fields)
            return False
        else:
            metrics.EVENTS.labels(result="series").inc()
            return True
    body = build(
        regarding=regarding,
        reason=reason,
        note=decision.note,
        type=type,
        action=action,
        reporting_controller=reporting_controller,
        reporting_instance=reporting_instance,
    )
    try:
        await kube.request("POST", _collection(namespace), body=body)
    except errors.KubeError as exc:
        correlation.forget(series)
        if namespace_going(exc):
            if memory.seen(namespace):
                logger.debug(
                    "namespace %s is being deleted: no Events there for %.0f s",
                    namespace,
                    memory.memory_seconds,
                    extra=fields,
                )
            return False
        _failed(exc, regarding=regarding, reason=reason, namespace=namespace, fields=fields)
        return False
    correlation.posted(series, str(body["metadata"]["name"]))  # type: ignore[index]  # built above
    metrics.EVENTS.labels(result="posted").inc()
    return True


_MERGE_PATCH = "application/merge-patch+json"
# What identifies the regarding object for the correlation (client-go's spam key, but the source).
_REGARDING_KEYS = ("apiVersion", "kind", "namespace", "name", "uid")


def _collection(namespace: str) -> str:
    return f"/apis/events.k8s.io/v1/namespaces/{quote(namespace, safe='')}/events"


def _micro(seconds: float) -> str:
    """A wall-clock time as events.k8s.io's MicroTime."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _failed(
    exc: errors.KubeError, *, regarding: ObjectRef, reason: str, namespace: str, fields: dict[str, str]
) -> None:
    metrics.EVENTS.labels(result="failed").inc()
    logger.warning(
        "could not post event %s for %s %s/%s: %s",
        reason,
        regarding["kind"],
        namespace,
        regarding["name"],
        exc,
        extra=fields,
    )

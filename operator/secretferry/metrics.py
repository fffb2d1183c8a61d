"""Prometheus metrics, defined once. Label values are bounded (results, reasons, endpoints),
never object names: 10,000 SecretSyncs must not become 10,000 time series. The one exception,
``secretferry_secretsync_condition``, is off unless ``per_object_metrics`` turns it on.

Every metric here is in README's Metrics section, and
``tests/integration/operator/test_operator_metrics.py`` checks that each one in its table has
samples after a sync (the opt-in gauge is described below the table, not in it).
Where they are fed: syncs, durations and writes in ``reconcile/sync.py``; list calls through the
fetcher's ``on_call``; the gauges and stream counters in ``reconcile/resync.py`` and
``reconcile/streaming.py``; logins
through ``AuthSession(on_login=...)`` in ``reconcile/identities.py``; rollouts in
``reconcile/rollouts.py``; Events in ``kube/events.py``; build info here, at import; the queue
depth from the scheduler
(``reconcile/scheduler.py``, a callback read at each scrape); the opt-in per-SecretSync condition
gauge in ``reconcile/sync_report.py``, removed in ``reconcile/sync_intake.py``.

No ``*_created`` series: prometheus_client adds one per counter and histogram child by default (a
creation timestamp no dashboard or alert here reads), which doubles the series of every counter."""

from __future__ import annotations

import contextlib
import platform
from collections.abc import Callable

import prometheus_client
from prometheus_client import Counter, Gauge, Histogram

import secretferry

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped upstream

SYNCS = Counter("secretferry_syncs_total", "SecretSync reconciles by result.", ["result"])
SYNC_DURATION = Histogram(
    "secretferry_sync_duration_seconds",
    "Time of one SecretSync reconcile.",
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
WRITES = Counter("secretferry_target_writes_total", "Secret/ConfigMap writes by reason.", ["reason"])
SERVICE_CALLS = Counter(
    "secretferry_service_calls_total",
    "List calls to the secrets service by outcome (changed, unchanged, not_modified, or the error class).",
    ["endpoint", "status"],
)


def count_list_call(scope: object, outcome: str, endpoint: str) -> None:
    """``ScopeFetcher``'s ``on_call`` hook: the scope is not a label (unbounded cardinality)."""
    SERVICE_CALLS.labels(endpoint=endpoint, status=outcome).inc()


IDENTITY_SUMMARY_WRITES = Counter(
    "secretferry_identity_summary_writes_total",
    "Status patches of an identity's streams and scopes summary (at most one per identity per"
    " SECRETFERRY_IDENTITY_SUMMARY_INTERVAL_SECONDS, never one per list call).",
)
LOGINS = Counter(
    "secretferry_logins_total",
    "Logins at the secrets service by method and result (success, or the error class).",
    ["method", "result"],
)
ACTIVE_SCOPES = Gauge("secretferry_active_scopes", "Distinct scopes currently read.")
RESOURCES = Gauge("secretferry_secretsyncs", "SecretSyncs by readiness.", ["ready"])
CLUSTER_SYNC_NAMESPACES = Gauge(
    "secretferry_clustersecretsync_namespaces",
    "Namespaces selected by each ClusterSecretSync, by state (ready, failed, pending).",
    ["clustersecretsync", "state"],
)
"""One series per ClusterSecretSync and state: a handful of objects, admin-made, so a name label is
fine here where it is not for SecretSyncs."""
OPEN_STREAMS = Gauge("secretferry_open_streams", "Event streams currently open.")
STREAM_EVENTS = Counter("secretferry_stream_events_total", "Events received on streams by type.", ["type"])
WEBHOOK_REQUESTS = Counter(
    "secretferry_webhook_requests_total",
    "Requests to the webhook receiver by result (accepted, unsigned, forged, replayed, too_large, "
    "rate_limited, malformed, ignored, no_key; at a standby: relayed, relay_failed, no_leader); only"
    " accepted ones can nudge a scope. rate_limited: refused 429 without an HMAC (over the source's"
    " rate and over the shared budget, or over rate with a body above 4 KiB).",
    ["result"],
)
WEBHOOK_OVER_RATE_VERIFIED = Counter(
    "secretferry_webhook_over_rate_verified_total",
    "Requests over their source's rate whose signature was still checked from the shared budget"
    " (webhook_over_rate_verify_per_second); each is also counted in secretferry_webhook_requests_total"
    " by its result, so a flood from one address shows as forged there and a genuine webhook in it as"
    " accepted.",
)
WEBHOOK_NUDGES = Counter(
    "secretferry_webhook_scope_nudges_total",
    "Scopes nudged (made stale, their SecretSyncs queued) by verified webhooks, after debouncing.",
)
STREAM_UNKNOWN_SCOPE = Counter(
    "secretferry_stream_unknown_scope_events_total",
    "Stream messages that named no usable location (not understood, or no payload); each nudges "
    "every scope of its stream, at most once per 5 s.",
)
STREAM_RECONNECTS = Counter("secretferry_stream_reconnects_total", "Stream reconnects.")
RESYNCS_AFTER_RECONNECT = Counter(
    "secretferry_resyncs_after_reconnect_total", "Scopes resynced because a stream (re)connected."
)
ROLLOUTS = Counter("secretferry_rollouts_total", "Workload rollout restarts by kind.", ["kind"])
# templateFrom (reconcile/template_intake.py): the labelled ConfigMaps and Secrets kept, and the
# re-renders their changes queued.
TEMPLATE_SOURCES = Gauge(
    "secretferry_template_sources", "Labelled template sources (ConfigMaps and Secrets) kept.", ["kind"]
)
TEMPLATE_SOURCE_RERENDERS = Counter(
    "secretferry_template_source_rerenders_total",
    "SecretSyncs queued because a template source they use appeared, changed or went.",
)
# PasswordGenerator / UUIDGenerator (reconcile/generators/): values generated, by kind and cause
# (created: the first value or a deleted Secret; requested: the regenerate annotation; key-missing).
GENERATIONS = Counter(
    "secretferry_generations_total", "Values generated by generator kind and cause.", ["kind", "cause"]
)
GENERATOR_SOURCE_RESYNCS = Counter(
    "secretferry_generator_source_resyncs_total",
    "SecretSyncs queued because a generator they use wrote a new value.",
)
# Fed in kube/events.py, after client-go's correlation (kube/eventcache.py).
EVENTS = Counter(
    "secretferry_events_total",
    "Events the operator meant to record, by what became of each: posted (a new Event), series"
    " (counted into an equal Event posted before), dropped (over the rate limit per object),"
    " failed (refused by the apiserver).",
    ["result"],
)
for _result in ("posted", "series", "dropped", "failed"):  # all at 0 from the start
    EVENTS.labels(result=_result)
EVENTS_COMBINED = Counter(
    "secretferry_events_combined_total",
    "Events recorded as '(combined from similar events)': 10 different notes for one object,"
    " type and reason within 10 minutes.",
)
# The usual build-info idiom: a constant 1 whose labels say what runs, so a dashboard can join on it
# or count replicas by version during an upgrade. Set here, at import, because it never changes
# within a process; one series per process, so bounded.
# TemporaryPrivileges by state (reconcile/privileges/report.py); every state is set from the start,
# so a dashboard reads 0 rather than no series.
PRIVILEGE_STATES = ("active", "pending", "expired", "failed")
TEMPORARY_PRIVILEGES = Gauge(
    "secretferry_temporary_privileges",
    "TemporaryPrivileges by state: active (in its window), pending, expired, failed (none at the service).",
    ["state"],
)
for _state in PRIVILEGE_STATES:
    TEMPORARY_PRIVILEGES.labels(state=_state).set(0)

BUILD_INFO = Gauge(
    "secretferry_build_info",
    "Always 1; the labels name the running secretferry and Python versions.",
    ["version", "python"],
)
BUILD_INFO.labels(version=secretferry.__version__, python=platform.python_version()).set(1)

QUEUE_DEPTH = Gauge(
    "secretferry_queue_depth",
    "SecretSyncs waiting for a worker: live (changes, events, retries due) or backlog (start-up list,"
    " periodic resyncs).",
    ["queue"],
)
# Both series exist from the start (at 0), so a dashboard shows an empty queue, not "no data".
for _queue in ("live", "backlog"):
    QUEUE_DEPTH.labels(queue=_queue)


def watch_queue_depth(depth: Callable[[bool], int] | None) -> None:
    """Read the work queue's depth at each scrape (``depth(live)``), or 0 again with None.

    A callback, not a ``set()`` per enqueue: the queue changes thousands of times a second during
    a start-up storm, and a scrape every 30 s needs only the value at that moment. It is called
    from the metrics server's thread; it only reads counters.
    """
    for queue, live in (("live", True), ("backlog", False)):
        QUEUE_DEPTH.labels(queue=queue).set_function(_reader(depth, live))


def _reader(depth: Callable[[bool], int] | None, live: bool) -> Callable[[], float]:
    if depth is None:
        return lambda: 0.0
    return lambda: float(depth(live))


# Opt-in (``Settings.per_object_metrics``): namespace and name are labels, so this is one series per
# SecretSync and status, the cardinality every other metric here avoids. As External Secrets'
# ``externalsecret_status_condition``: 1 on the current status, 0 on the other.
SECRETSYNC_CONDITION = Gauge(
    "secretferry_secretsync_condition",
    "Per SecretSync (opt-in): 1 for the status its condition has now, 0 for the other status.",
    ["namespace", "name", "condition", "status"],
)
_STATUSES = ("True", "False")
_sync_conditions: dict[tuple[str, str], dict[str, str]] = {}
"""The status each SecretSync's series say now, per condition: a pass that changes nothing (10,000
per resync) then costs a dict lookup, and a deletion removes exactly the series there are."""
_per_object = False


def export_per_object(enabled: bool) -> None:
    """Turn ``secretferry_secretsync_condition`` on or off (start-up, from the settings)."""
    global _per_object
    _per_object = enabled


def set_sync_condition(key: tuple[str, str], condition: str, status: str) -> None:
    """The SecretSync ``key`` (namespace, name) has ``condition`` at ``status`` now; a no-op unless
    :func:`export_per_object` turned the per-object gauge on."""
    if not _per_object:
        return
    known = _sync_conditions.setdefault(key, {})
    if known.get(condition) == status:
        return
    known[condition] = status
    namespace, name = key
    for each in _STATUSES:
        SECRETSYNC_CONDITION.labels(namespace, name, condition, each).set(1.0 if each == status else 0.0)


def forget_sync(key: tuple[str, str]) -> None:
    """The SecretSync is gone: its series go too (a gauge left behind would say it still exists)."""
    namespace, name = key
    for condition in _sync_conditions.pop(key, {}):
        for each in _STATUSES:
            with contextlib.suppress(KeyError):  # older prometheus_client raises for a missing child
                SECRETSYNC_CONDITION.remove(namespace, name, condition, each)


# --- rate-limit budgets (issue 21) ---------------------------------------------------------------
RateBudgets = Callable[[], list[tuple[str, str, int, int]]]
"""(host, route, limit, remaining) of every limited route a pacer knows."""
_rate_budgets: list[RateBudgets] = []


def read_rate_budgets_from(source: RateBudgets) -> None:
    """Where the budget gauges read at each scrape: ``service/pacing.py`` registers itself here
    (metrics is imported by kube/ too, so it may not import the service layer)."""
    _rate_budgets[:] = [source]


class _RateBudgets:
    """``secretferry_service_rate_limit_remaining``/``_limit``: what each host's pacer
    (``service/pacing.py``) believes is left of the current window, per route, read at each scrape
    (a ``set()`` per call would cost a lock per list call; the budget only matters when read).
    Label values are bounded: the service hosts of the identities, and the few API routes the
    operator calls. Only routes the server limits have series (none against an unlimited host)."""

    def describe(self) -> list[prometheus_client.Metric]:
        return []  # no fixed series: the registry must not call collect() at registration

    def collect(self) -> list[prometheus_client.Metric]:
        remaining = prometheus_client.metrics_core.GaugeMetricFamily(
            "secretferry_service_rate_limit_remaining",
            "Calls left in the current rate-limit window of a service route, as the operator's pacer "
            "believes (learned from x-ratelimit-* headers).",
            labels=["host", "route"],
        )
        limit = prometheus_client.metrics_core.GaugeMetricFamily(
            "secretferry_service_rate_limit",
            "Calls per window the service allows on a route (x-ratelimit-limit).",
            labels=["host", "route"],
        )
        for host, route, most, left in (row for source in _rate_budgets for row in source()):
            remaining.add_metric([host, route], float(left))
            limit.add_metric([host, route], float(most))
        return [remaining, limit]


prometheus_client.REGISTRY.register(_RateBudgets())

# DynamicSecretLease (reconcile/leases/keeper.py); no object names as labels, like the rest.
LEASES_ACTIVE = Gauge("secretferry_dynamic_secret_leases", "DynamicSecretLeases currently holding a lease.")
LEASE_OPERATIONS = Counter(
    "secretferry_lease_operations_total",
    "Lease calls by operation (acquire, renew, revoke) and result (success, refused, or the error class).",
    ["operation", "result"],
)

# PushSecret (reconcile/push/).
PUSHES = Counter(
    "secretferry_pushes_total",
    "PushSecret passes by result: pushed (wrote), unchanged, conflict, refused, failed.",
    ["result"],
)
PUSH_WRITES = Counter(
    "secretferry_push_writes_total", "Writes to the service by PushSecrets, by operation.", ["operation"]
)


# Counters of the write-side kinds, primed with their known label values at 0: a dashboard (and
# the documented-metrics test) reads 0 before the first PushSecret, generator or lease, not no
# series. The error classes of a failed lease call appear when they happen.
for _result in ("pushed", "unchanged", "conflict", "refused", "failed"):
    PUSHES.labels(_result)
for _operation in ("create", "update", "delete"):
    PUSH_WRITES.labels(_operation)
for _kind in ("PasswordGenerator", "UUIDGenerator"):
    for _cause in ("created", "key-missing", "requested"):
        GENERATIONS.labels(kind=_kind, cause=_cause)
for _operation in ("acquire", "renew", "revoke"):
    LEASE_OPERATIONS.labels(operation=_operation, result="success")

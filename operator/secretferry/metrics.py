"""Prometheus metrics, defined once. Label values are bounded (results, reasons, endpoints),
never object names: 10,000 SecretSyncs must not become 10,000 time series.

Every metric here is in README's Metrics table, and
``tests/integration/operator/test_operator_metrics.py`` checks that each has samples after a sync.
Where they are fed: syncs, durations and writes in ``reconcile/sync.py``; list calls through the
fetcher's ``on_call`` and the gauges and stream counters in ``reconcile/controller.py``; logins
through ``AuthSession(on_login=...)`` in ``reconcile/identities.py``; rollouts in
``reconcile/rollouts.py``."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
LOGINS = Counter(
    "secretferry_logins_total",
    "Logins at the secrets service by method and result (success, or the error class).",
    ["method", "result"],
)
ACTIVE_SCOPES = Gauge("secretferry_active_scopes", "Distinct scopes currently read.")
RESOURCES = Gauge("secretferry_secretsyncs", "SecretSyncs by readiness.", ["ready"])
OPEN_STREAMS = Gauge("secretferry_open_streams", "Event streams currently open.")
STREAM_EVENTS = Counter("secretferry_stream_events_total", "Events received on streams by type.", ["type"])
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

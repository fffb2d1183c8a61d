"""Operator settings, loaded once at start-up from ``SECRETFERRY_*`` environment variables.

Why one flat object with units in the names: the Helm chart maps values to these variables one
to one, and a wrong unit is the classic operator misconfiguration. Everything has a default
that works for a single-replica, cluster-wide install.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SECRETFERRY_", extra="ignore", frozen=True)

    # --- where we run ---------------------------------------------------------------------
    namespace: str = Field(
        "secretferry-system", description="Namespace the operator runs in; holds its HMAC key."
    )
    watch_namespaces: str = Field(
        "", description="Comma-separated namespaces to serve; empty means the whole cluster."
    )
    kubeconfig: str | None = Field(
        None, description="Kubeconfig path; unset means in-cluster or $KUBECONFIG."
    )
    pod_name: str = Field(
        "",
        description=(
            "This replica's name as a Lease holder (the chart sets it from the pod name); empty means"
            " $HOSTNAME. Not HOSTNAME alone: with hostNetwork every replica on a node has the node's."
        ),
    )

    # --- the service ----------------------------------------------------------------------
    default_host_api: str = Field(
        "https://app.infisical.com", description="Service URL for identities that do not set spec.hostAPI."
    )
    service_timeout_seconds: float = Field(10.0, description="Per-call timeout for list and login calls.")

    # --- scheduling -------------------------------------------------------------------------
    workers: int = Field(
        32, ge=1, description="Concurrent reconciles; bounded so a resync storm cannot starve writes."
    )
    default_refresh_interval_seconds: float = Field(
        300.0, description="Polling period when spec.refreshInterval is unset."
    )
    streaming_refresh_interval_seconds: float = Field(
        3600.0, description="Safety-net resync period while a scope's event stream is healthy."
    )
    resync_jitter_fraction: float = Field(
        0.1, ge=0, le=0.5, description="Spreads periodic resyncs to avoid bursts."
    )
    event_debounce_seconds: float = Field(
        0.01,
        description="After an event nudges its scopes at once, further events within this window are "
        "coalesced into one more nudge per scope (a batch write at the service arrives within a few ms).",
    )
    backoff_initial_seconds: float = Field(
        1.0, description="First retry delay after a failed fetch or login."
    )
    backoff_max_seconds: float = Field(
        300.0, description="Cap on retry delay so a recovered service is seen soon."
    )

    # --- streams ----------------------------------------------------------------------------
    stream_heartbeat_seconds: float = Field(15.0, description="The service's heartbeat period.")
    stream_watchdog_heartbeats: float = Field(
        3.0, description="Silent heartbeats before a stream is replaced."
    )
    stream_retry_after_refusal_seconds: float = Field(
        3600.0,
        description="How long scopes poll before retrying a stream the service refused (plan, permission).",
    )

    # --- rollouts ---------------------------------------------------------------------------
    rollout_cooldown_seconds: float = Field(
        30.0, description="At most one restart per workload per cooldown."
    )

    # --- identity -----------------------------------------------------------------------------
    token_renew_margin_fraction: float = Field(
        0.2, description="Renew or re-login when this fraction of the access token's lifetime is left."
    )
    hmac_key_secret: str = Field(
        "secretferry-hmac-key", description="Secret in `namespace` holding the HMAC key."
    )

    # --- observability / HA -------------------------------------------------------------------
    metrics_port: int = Field(8080, description="Prometheus metrics on /metrics; 0 disables.")
    liveness_port: int = Field(8081, description="kopf liveness endpoint on /healthz; 0 disables.")
    log_level: str = Field("INFO", description="Python log level.")
    log_format: str = Field(
        "json", pattern="^(json|text)$", description="json for clusters, text for humans."
    )
    peering: str = Field(
        "", description="Lease name for leader election (replicas > 1); empty runs as the only replica."
    )

    def watched_namespaces(self) -> list[str]:
        return [ns.strip() for ns in self.watch_namespaces.split(",") if ns.strip()]


def load() -> Settings:
    """Read and validate the environment once; a bad value stops start-up with pydantic's message."""
    return Settings()

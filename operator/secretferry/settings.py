"""Operator settings, loaded once at start-up from ``SECRETFERRY_*`` environment variables.

Why one flat object with units in the names: the Helm chart maps values to these variables one
to one, and a wrong unit is the classic operator misconfiguration. Everything has a default
that works for a single-replica, cluster-wide install.
"""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from secretferry import origins


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
    allowed_hosts: str = Field(
        "",
        description=(
            "Comma-separated service hosts (URLs, or host[:port] with port 443 when omitted) a namespaced"
            " MachineIdentity may send credentials to, besides default_host_api, which is always allowed."
            " Set by whoever installs the operator, so a namespace user cannot point tokens at a host of"
            " their own. ClusterMachineIdentities (cluster-admin objects) may name any host."
        ),
    )
    allow_insecure_http: bool = Field(
        False,
        description="Allow plain http to service hosts that are not loopback; off, credentials travel over"
        " https only (a loopback host never leaves the machine).",
    )
    max_token_expiration_seconds: int = Field(
        600,
        ge=600,  # TokenRequest's own floor
        le=48 * 3600,  # the CRD's ceiling for tokenExpirationSeconds
        description="Cap on the lifetime of a minted ServiceAccount token: it is used once, for one login,"
        " within a second; a larger spec.auth.kubernetes.tokenExpirationSeconds is lowered to this.",
    )

    # --- scheduling -------------------------------------------------------------------------
    workers: int = Field(
        32, ge=1, description="Concurrent reconciles; bounded so a resync storm cannot starve writes."
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

    # --- templates (rendered in worker processes; reconcile/renderpool.py) -----------------------
    template_workers: int = Field(
        2,
        ge=1,
        le=16,
        description="Worker processes rendering templates, started on first use (~25 MiB each): two, so"
        " one namespace's slow template never holds the only one.",
    )
    template_cpu_limit_seconds: float = Field(
        1.0,
        gt=0,
        description="CPU time one SecretSync's templates may use per render; real templates take"
        " milliseconds. Beyond it: TemplateError, and the worker is replaced.",
    )
    template_timeout_seconds: float = Field(
        5.0,
        gt=0,
        description="Wall-clock time a worker may take for one render before it is killed and replaced;"
        " above the CPU limit, because a busy node runs the (niced) workers slower.",
    )
    template_memory_limit_mib: int = Field(
        64,
        ge=16,
        description="Memory a worker may allocate for a render, beyond its own ~25 MiB (RLIMIT_AS). Each"
        " worker counts against the pod's memory limit.",
    )
    template_max_output_bytes: int = Field(
        1024 * 1024,
        ge=1,
        le=1024 * 1024,
        description="Bytes the rendered values of one SecretSync may add up to (a Secret holds 1 MiB).",
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

    @model_validator(mode="after")
    def _hosts_parse(self) -> Self:
        """A host that does not parse, or a default host every identity would be refused (plain
        http off loopback without the opt-in), stops start-up rather than every login."""
        default = origins.parse_url(self.default_host_api)
        origins.parse_list(self.allowed_hosts)
        insecure = default.scheme == "http" and not origins.is_loopback(default.origin)
        if insecure and not self.allow_insecure_http:
            raise ValueError(
                f"default_host_api {default} is plain http to a host that is not loopback;"
                " use https, or set SECRETFERRY_ALLOW_INSECURE_HTTP=true"
            )
        return self

    @model_validator(mode="after")
    def _template_deadline_above_cpu_limit(self) -> Self:
        """A wall-clock deadline below the CPU limit would report every slow template as a timeout."""
        if self.template_timeout_seconds <= self.template_cpu_limit_seconds:
            raise ValueError("template_timeout_seconds must be above template_cpu_limit_seconds")
        return self

    def watched_namespaces(self) -> list[str]:
        return [ns.strip() for ns in self.watch_namespaces.split(",") if ns.strip()]


def load() -> Settings:
    """Read and validate the environment once; a bad value stops start-up with pydantic's message."""
    return Settings()

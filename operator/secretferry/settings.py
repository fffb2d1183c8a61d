"""Operator settings, loaded once at start-up from ``SECRETFERRY_*`` environment variables.

Why one flat object with units in the names: the Helm chart maps values to these variables one
to one, and a wrong unit is the classic operator misconfiguration. Everything has a default
that works for a single-replica, cluster-wide install.
"""

from __future__ import annotations

import ipaddress
from typing import Self

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from secretferry import origins
from secretferry.models import base as models_base
from secretferry.models import identity as identity_models
from secretferry.models import reserved, selectors


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SECRETFERRY_", extra="ignore", frozen=True)

    # --- where we run ---------------------------------------------------------------------
    namespace: str = Field(
        "secretferry-system",
        description="Namespace the operator runs in (the chart sets it to the pod's own). Its HMAC key"
        " Secret (`hmac_key_secret`) and its leader-election Lease (`peering`) live there.",
    )
    watch_namespaces: str = Field(
        "",
        description="Comma-separated namespaces whose SecretSyncs and MachineIdentities the operator"
        " serves; empty means the whole cluster. Listing them lets its RBAC stay namespaced (the chart's"
        " scope.namespaces), so it can read no Secret elsewhere.",
    )
    watch_namespace_selector: str = Field(
        "",
        description="Label selector (kubectl's `-l` syntax: `team=payments,env in (prod,staging),!legacy`)"
        " a namespace's labels must match for the operator to serve its SecretSyncs and MachineIdentities;"
        " empty means every namespace. With `watch_namespaces` as well, a namespace must be listed there"
        " and match. Followed live: a namespace that comes to match is served within a second or two, one"
        " that stops matching is let go, its Secrets left as they are. Lets two releases split a cluster"
        " by label. Cluster-wide RBAC is still needed (README, Namespace selection). A selector that does"
        " not parse stops start-up.",
    )
    kubeconfig: str | None = Field(
        None,
        description="Path of the kubeconfig to reach the apiserver with, for running outside a cluster;"
        " unset means the pod's ServiceAccount inside one, else $KUBECONFIG or ~/.kube/config.",
    )
    pod_name: str = Field(
        "",
        description=(
            "This replica's name as a Lease holder (the chart sets it from the pod name); empty means"
            " $HOSTNAME. Not HOSTNAME alone: with hostNetwork every replica on a node has the node's."
        ),
    )
    pod_ip: str = Field(
        "",
        description=(
            "This replica's IP address (the chart sets it from the pod's status.podIP). While it leads,"
            " it advertises `<pod_ip>:<webhook_port>` on the Lease, so that standbys relay the webhooks"
            " that reach them to it; empty: nothing is advertised and a standby answers such a webhook"
            " 503. Only used with the webhook receiver and leader election."
        ),
    )

    # --- the service ----------------------------------------------------------------------
    default_host_api: str = Field(
        "https://app.infisical.com",
        description="Service base URL for identities that do not set spec.hostAPI; always an allowed"
        " host. https, or http to loopback, unless `allow_insecure_http`: checked at start-up, so a wrong"
        " value stops the operator rather than every login.",
    )
    service_timeout_seconds: float = Field(
        10.0,
        description="Seconds one call to the service (list, login, token renewal) may wait at each step:"
        " connecting (at most 5 of them), sending, and each wait for the answer. Calls are small, so a"
        " slower answer means an overloaded service, better retried with backoff than waited for. Event"
        " streams are exempt: heartbeats tell a live one from a dead one.",
    )
    allowed_hosts: str = Field(
        "",
        description=(
            "Comma-separated service hosts (URLs, or host[:port] meaning https, port 443 when omitted;"
            " scheme, host and port are all compared) a namespaced"
            " MachineIdentity may send credentials to, besides `default_host_api`, which is always allowed."
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
        description="Cap on the lifetime of a minted ServiceAccount token, in seconds (600 is"
        " TokenRequest's floor, 172800 the CRD's ceiling). The token is used once, for one login, within"
        " a second, so a longer life only lengthens the time a leaked one works; a larger"
        " spec.auth.kubernetes.tokenExpirationSeconds is lowered to this.",
    )

    # --- targets ----------------------------------------------------------------------------
    forbidden_target_keys: str = Field(
        "",
        description=(
            "Comma-separated label/annotation keys (`example.com/owner`) or domains ending in `/`"
            " (`example.com/`: every key in it and its subdomains) that no SecretSync may put on its"
            " target, on top of the built-in list (README, Security model): the marks a controller of"
            " this cluster reads as ownership or orders. Refused with TargetMetadataForbidden and"
            " nothing written; it also overrides the built-in exceptions (app.kubernetes.io/name,"
            " version, component, part-of). Set by whoever installs the operator; a namespace user"
            " cannot change it. An entry that does not parse stops start-up."
        ),
    )

    # --- scheduling -------------------------------------------------------------------------
    workers: int = Field(
        32,
        ge=1,
        description="SecretSync reconciles that run at once (a count). The bound keeps a start-up or resync"
        " of thousands of SecretSyncs to this many requests in flight at the apiserver and the service;"
        " live changes are queued ahead of that backlog, so they do not wait for it. No namespace starts"
        " more than its share (this count divided by the namespaces with work queued, rounded up), and a"
        " SecretSync waiting for a template worker holds none of them.",
    )
    streaming_refresh_interval_seconds: float = Field(
        3600.0,
        description="Seconds between safety-net resyncs of a scope while its event stream is healthy."
        " Events only nudge, so one that is lost is repaired by this full list at the latest; without a"
        " stream a scope follows its SecretSyncs' spec.refreshInterval instead.",
    )
    resync_jitter_fraction: float = Field(
        0.1,
        ge=0,
        le=0.5,
        description="Fraction of each periodic resync interval by which it is moved earlier or later at"
        " random (0.1: ±10 %), so that scopes created together do not all resync in the same second.",
    )
    event_debounce_seconds: float = Field(
        0.01,
        description="Seconds: after an event nudges its scopes at once, further events within this window"
        " are coalesced into one more nudge per scope, so a burst costs two lists per scope, not one per"
        " event (a batch write at the service arrives within a few ms).",
    )
    backoff_initial_seconds: float = Field(
        1.0,
        gt=0,
        description="Seconds before the first retry after a failed fetch, login or stream connection; each"
        " further failure doubles the delay (streams add full jitter), so a failing service is not"
        " hammered.",
    )
    backoff_max_seconds: float = Field(
        300.0,
        gt=0,
        description="Cap on that doubling retry delay, in seconds (streams cap theirs at 60), so a service"
        " that recovers is used again within this long at the latest; sooner when the operator's probe"
        " of a silent host sees it answer.",
    )

    # --- streams ----------------------------------------------------------------------------
    stream_heartbeat_seconds: float = Field(
        15.0,
        description="Seconds between the heartbeats the service sends on an event stream (15 for the real"
        " one); the stream watchdog's timeout is this times `stream_watchdog_heartbeats`. Change it only"
        " for a service that beats at another pace.",
    )
    stream_watchdog_heartbeats: float = Field(
        3.0,
        description="Heartbeat periods (a count, fractions allowed) a stream may stay silent before it is"
        " dropped and replaced: three tolerate a late heartbeat, yet a connection a proxy or NAT dropped"
        " without a word is noticed within 45 s.",
    )
    stream_retry_after_refusal_seconds: float = Field(
        3600.0,
        description="Seconds the scopes of a stream the service refused (a plan without events, a missing"
        " permission) poll before the stream is tried again: retrying does not fix a refusal soon, and"
        " each attempt costs a login and a request.",
    )

    # --- identity status: streams and scopes (reconcile/identity_summary.py) -------------------------
    identity_summary_interval_seconds: float = Field(
        30.0,
        gt=0,
        description="Seconds between writes of an identity's status.streams and status.scopes, at most:"
        " a list or a stream change only marks the summary, and it is patched at the next tick if it"
        " changed. Never a write per list: 10,000 SecretSyncs on one identity cost at most one"
        " identity status write per interval.",
    )
    identity_summary_max_scopes: int = Field(
        identity_models.MAX_STATUS_SCOPES,
        ge=0,
        le=identity_models.MAX_STATUS_SCOPES,
        description="Scopes listed in an identity's status.scopes (failing ones first); the rest are"
        " counted in scopesOmitted. 0 lists none (the counts stay): for a cluster whose"
        " ClusterMachineIdentity readers should not see the paths other namespaces read.",
    )

    # --- templates (rendered in worker processes; reconcile/rendering/pool.py) -----------------------
    template_workers: int = Field(
        2,
        ge=1,
        le=16,
        description="Worker processes (a count) rendering templates, started on first use (~25 MiB each):"
        " two, so one namespace's slow template never holds the only one.",
    )
    template_cpu_limit_seconds: float = Field(
        1.0,
        gt=0,
        description="CPU seconds one SecretSync's templates may use per render; real templates take"
        " milliseconds. Beyond it: TemplateError, and the worker is replaced.",
    )
    template_timeout_seconds: float = Field(
        5.0,
        gt=0,
        description="Wall-clock seconds a worker may take for one render before it is killed and replaced;"
        " above the CPU limit, because a busy node runs the (niced) workers slower.",
    )
    template_memory_limit_mib: int = Field(
        64,
        ge=16,
        description="MiB a worker may allocate for a render, beyond its own ~25 MiB (RLIMIT_AS). Each"
        " worker counts against the pod's memory limit.",
    )
    template_max_output_bytes: int = Field(
        1024 * 1024,
        ge=1,
        le=1024 * 1024,
        description="Bytes the rendered values of one SecretSync may add up to (a Secret holds 1 MiB).",
    )

    # --- rollouts ---------------------------------------------------------------------------
    rollouts_enabled: bool = Field(
        True,
        description="Restart workloads whose Secret data changed (rolloutRestartTargets, auto-reload)."
        " Off (the chart's config.rolloutsEnabled=false, which also drops the workload RBAC rules):"
        " nothing is listed or restarted, so an install may hold no rights on workloads at all.",
    )
    rollout_cooldown_seconds: float = Field(
        30.0,
        description="Seconds: each workload is restarted at most once per this period; changes inside it"
        " coalesce into one restart at its end, so a burst of secret changes restarts a workload once,"
        " not once per change.",
    )
    max_leases_per_namespace: int = Field(
        20,
        ge=0,
        description="DynamicSecretLeases that may hold a lease at once in one namespace (0: none). Each"
        " lease is a real role or user in a real database: without a bound, a tenant who may create"
        " DynamicSecretLeases could exhaust the database's roles and connections (README,"
        ' "DynamicSecretLease"). Over it a DynamicSecretLease waits with reason LeaseLimitReached.',
    )
    lease_retry_seconds: float = Field(
        30.0,
        gt=0,
        description="Seconds between attempts of a lease, renewal or revocation that failed for a"
        " reason that may pass (service unavailable, identity not ready); doubled up to 5 minutes.",
    )

    # --- identity -----------------------------------------------------------------------------
    token_requests_enabled: bool = Field(
        True,
        description="Mint ServiceAccount tokens (TokenRequest) for Kubernetes-auth logins. Off (the chart's"
        " config.tokenRequestsEnabled=false, which also drops the serviceaccounts rules): every identity"
        " with spec.auth.kubernetes is refused with TokenRequestsDisabled before anything is read or"
        " minted, so an install may hold no right to mint tokens.",
    )
    token_renew_margin_fraction: float = Field(
        0.2,
        description="Fraction of an access token's lifetime still left when the operator renews it (or"
        " logs in again): 0.2 renews a one-hour token 12 minutes early, time for retries before it"
        " expires.",
    )
    hmac_key_secret: str = Field(
        "secretferry-hmac-key",
        description="Name of the Secret in `namespace` holding the key the HMACs in status (dataHMAC) are"
        " derived from (one key per SecretSync and spec generation), created on first start; a digest of"
        " secret data is shown only keyed, so it reveals nothing without this key. No SecretSync may"
        " write to it.",
    )

    # --- observability / HA -------------------------------------------------------------------
    metrics_port: int = Field(
        8080,
        description="TCP port of the Prometheus metrics endpoint (/metrics, on `listen_address`); 0 turns"
        " it off.",
    )
    liveness_port: int = Field(
        8081,
        description="TCP port of kopf's liveness endpoint (/healthz, on `listen_address`) that the kubelet"
        " probes; 0 turns it off.",
    )
    readiness_port: int = Field(
        8082,
        description="TCP port of the readiness endpoint (/readyz, on `listen_address`): 200 once this replica"
        " serves (caches complete) or, under leader election, stands by; 503 while starting, listing or"
        " stopping. 0 turns it off.",
    )
    listen_address: str = Field(
        "0.0.0.0",
        description="IP address the metrics, liveness and readiness endpoints listen on. 0.0.0.0 (the"
        " default, as in earlier releases): every IPv4 interface. `::`: every IPv6 interface (the liveness"
        " endpoint then takes IPv6 only). 127.0.0.1 keeps them on loopback, out of reach of Prometheus and"
        " of the kubelet's probes (turn the probes off then). Checked at start-up.",
    )
    per_object_metrics: bool = Field(
        False,
        description="Export `secretferry_secretsync_condition`, one series per SecretSync and condition"
        " status (namespace and name as labels), like External Secrets' per-object gauge. Off by default:"
        " 10,000 SecretSyncs would be 20,000 series; the aggregate `secretferry_secretsyncs` costs two.",
    )
    log_level: str = Field(
        "INFO",
        description="Python log level: DEBUG, INFO, WARNING or ERROR. httpx's per-request lines and kopf's"
        " per-object ones stay at WARNING whatever this says: they would name every object and URL.",
    )
    log_format: str = Field(
        "json",
        pattern="^(json|text)$",
        description="json (one object per line) for log collectors, text for humans.",
    )
    peering: str = Field(
        "",
        description="Name of the coordination.k8s.io Lease in `namespace` that replicas elect the active one"
        " with (timed by `leader_lease_duration_seconds` and the two below it); needed for more than one"
        " replica. Empty: this process is the only replica and starts at once.",
    )
    leader_lease_duration_seconds: int = Field(
        15,
        ge=1,
        description="Seconds a standby waits, after it last saw the Lease change, before it takes over"
        " (written into the Lease as leaseDurationSeconds). Measured on the standby's own clock, never"
        " against the holder's renewTime, so clock skew between nodes cannot cause an early takeover. A"
        " killed leader is replaced 13-21 s later with the defaults; longer is slower, shorter gives less"
        " room to a slow apiserver. Must be above `leader_renew_deadline_seconds`.",
    )
    leader_renew_deadline_seconds: float = Field(
        10.0,
        gt=0,
        description="Seconds the leader keeps trying to renew the Lease after its last good renewal; then it"
        " stops its work and exits, and the kubelet restarts it as a standby. Below"
        " `leader_lease_duration_seconds`, so the leader stops before any standby may take over; the gap"
        " (5 s by default) covers stopping and clocks running at slightly different rates.",
    )
    leader_retry_period_seconds: float = Field(
        2.0,
        gt=0,
        description="Seconds between the leader's renewals, and (plus up to half again, at random, so"
        " standbys do not poll in step) between a standby's reads of the Lease. Below"
        " `leader_renew_deadline_seconds`, so a leader gets several tries (five by default) before it"
        " gives up.",
    )
    leader_release_on_shutdown: bool = Field(
        False,
        description="A leader that shuts down hands the Lease over once its work has stopped, so a standby"
        " takes over within a retry period instead of after the lease duration (a rolling update or a"
        " drain then leaves no gap). Off by default, as client-go's ReleaseOnCancel: a write the"
        " apiserver received just before the stop may still land after the standby started, which the"
        " lease duration otherwise leaves time for.",
    )

    # --- TemporaryPrivilege ---------------------------------------------------------------------
    allow_permanent_privileges: bool = Field(
        False,
        description="Let a TemporaryPrivilege set permanent: true (a grant with no end). Off: such a"
        " resource is refused with PermanentNotAllowed and nothing is created at the service, so a"
        " forgotten resource can never leave an identity with more access forever.",
    )
    privilege_check_interval_seconds: float = Field(
        300.0,
        gt=0,
        description="Seconds between reads of each TemporaryPrivilege's privilege at the service: a"
        " privilege deleted or changed there behind our back is recreated or corrected within this"
        " time. The end of a grant's window needs no read (a timer at expiresAt updates the status).",
    )

    # --- signed webhook receiver ---------------------------------------------------------------
    webhook_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="TCP port of the signed-webhook receiver (POST, on `listen_address`), served by every"
        " replica (a standby verifies and relays to the leader); 0 (the default) turns it off. A"
        " verified `secrets.modified` webhook nudges the scopes it names; anything else changes nothing.",
    )
    webhook_signing_key_file: str = Field(
        "/etc/secretferry/webhook/signing-key",
        description="File holding the webhook's secret key (one per line: during a rotation both the old"
        " and the new verify). The chart mounts it from the Secret named by `webhook.signingKeySecret`;"
        " re-read when it changes. Missing or empty: every request is refused (503).",
    )
    webhook_replay_window_seconds: float = Field(
        300.0,
        gt=0,
        description="Seconds a signed webhook's timestamp may differ from our clock; older (or future)"
        " ones are refused as replays.",
    )
    webhook_max_body_bytes: int = Field(
        65536,
        gt=0,
        description="Bytes: a webhook body larger than this is refused (413) without being read (the"
        " real payload is a few hundred bytes).",
    )
    webhook_rate_per_second: float = Field(
        20.0,
        gt=0,
        description="Requests per second each source address may send to the webhook receiver (token"
        " bucket; the source is the TCP peer, or the client a trusted proxy names:"
        " `webhook_trusted_proxies`); more are refused (429) before any signature is computed, except"
        " small ones within `webhook_over_rate_verify_per_second`.",
    )
    webhook_burst: float = Field(
        100.0,
        ge=1,
        description="Bucket size of the per-source rate limit: requests a source may send at once.",
    )
    webhook_over_rate_verify_per_second: float = Field(
        20000.0,
        ge=0,
        description="Requests per second, shared by all sources, whose signature is still checked once"
        " their source is over `webhook_rate_per_second` (bodies up to 4 KiB; larger ones are refused"
        " 429 without an HMAC). So a forged flood from the service's own address (an Ingress, a NAT)"
        " cannot starve its genuine webhooks: they are accepted while the forgeries are refused 401."
        " Verifying such a request costs ~20 µs of CPU on top of the ~85 µs of receiving it at all; the"
        " default is above what one core can receive, so no flood outruns it. 0: off"
        " (every request over rate is refused 429).",
    )
    webhook_trusted_proxies: str = Field(
        "",
        description="Comma-separated CIDRs or addresses of the proxies in front of the webhook receiver"
        " (your ingress controller's pods, a load balancer that appends X-Forwarded-For). Only a request"
        " whose TCP peer is in this list has its client address read from"
        " `webhook_client_address_header` (the right-most entry that is not itself a trusted proxy, as"
        " nginx's real_ip_recursive), for the per-source rate limit; otherwise the peer counts. Empty"
        " (the default): the peer always counts and the header is ignored. List them as narrowly as"
        " you can: any host in the list can name the bucket it is counted in.",
    )
    webhook_client_address_header: str = Field(
        "X-Forwarded-For",
        pattern="^(X-Forwarded-For|Forwarded)$",
        description="Header a trusted proxy names the client in: `X-Forwarded-For` (ingress-nginx,"
        " Traefik, Envoy, HAProxy's forwardfor) or RFC 7239 `Forwarded` (its `for=`). Only this one is"
        " read: a proxy that sets one passes a client's own copy of the other through unchanged.",
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
    def _namespace_selector_parses(self) -> Self:
        """A mistyped selector would serve no namespace, or every one: it stops start-up instead."""
        try:
            selectors.parse(self.watch_namespace_selector)
        except selectors.SelectorError as exc:
            raise ValueError(f"SECRETFERRY_WATCH_NAMESPACE_SELECTOR: {exc}") from None
        return self

    @model_validator(mode="after")
    def _forbidden_keys_parse(self) -> Self:
        """A mistyped entry would silently refuse nothing: it stops start-up instead."""
        reserved.parse_rules(self.forbidden_target_keys)
        return self

    @model_validator(mode="after")
    def _backoff_ordered(self) -> Self:
        """Every retry schedule starts at the initial delay and doubles up to the cap: a cap below
        the start is no schedule, and would fail each retrying thing when it first fails."""
        if self.backoff_max_seconds < self.backoff_initial_seconds:
            raise ValueError("backoff_max_seconds must be at least backoff_initial_seconds")
        return self

    @model_validator(mode="after")
    def _listen_address_is_an_ip(self) -> Self:
        """A host name would be resolved by each server on its own, maybe to different addresses:
        an IP literal binds both endpoints to the same one, and a typo stops start-up (the same for
        a trusted proxy's CIDR: a typo there would silently trust nothing, or the wrong hosts)."""
        try:
            ipaddress.ip_address(self.listen_address)
        except ValueError:
            raise ValueError(
                f"listen_address {self.listen_address!r} is not an IP address (e.g. 0.0.0.0, ::, 127.0.0.1)"
            ) from None
        if self.pod_ip:
            try:
                ipaddress.ip_address(self.pod_ip)
            except ValueError:
                raise ValueError(f"pod_ip {self.pod_ip!r} is not an IP address") from None
        for item in filter(None, (i.strip() for i in self.webhook_trusted_proxies.split(","))):
            try:  # parsed the same way by reconcile.webhook_sources.parse_networks
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(f"webhook_trusted_proxies: {item!r} is not a CIDR or IP address") from None
        return self

    @model_validator(mode="after")
    def _template_deadline_above_cpu_limit(self) -> Self:
        """A wall-clock deadline below the CPU limit would report every slow template as a timeout."""
        if self.template_timeout_seconds <= self.template_cpu_limit_seconds:
            raise ValueError("template_timeout_seconds must be above template_cpu_limit_seconds")
        return self

    @model_validator(mode="after")
    def _leader_timings_ordered(self) -> Self:
        """The leader must stop before a standby may take over (renew deadline below the lease) and
        must get at least one renewal in before its deadline (retry period below it)."""
        retry, renew, lease = (
            self.leader_retry_period_seconds,
            self.leader_renew_deadline_seconds,
            self.leader_lease_duration_seconds,
        )
        if not retry < renew < lease:
            raise ValueError(
                "leader election needs SECRETFERRY_LEADER_RETRY_PERIOD_SECONDS <"
                " SECRETFERRY_LEADER_RENEW_DEADLINE_SECONDS < SECRETFERRY_LEADER_LEASE_DURATION_SECONDS;"
                f" got {retry:g}, {renew:g}, {lease}"
            )
        return self

    def watched_namespaces(self) -> list[str]:
        return [ns.strip() for ns in self.watch_namespaces.split(",") if ns.strip()]

    def namespace_selector(self) -> models_base.LabelSelector | None:
        """The parsed ``watch_namespace_selector``; None when every namespace (of the list) is served."""
        return selectors.parse(self.watch_namespace_selector)


def load() -> Settings:
    """Read and validate the environment once; a bad value stops start-up with pydantic's message."""
    return Settings()

"""secretferry.reconcile — what the operator decides: which writes, when, and what status says.

The controller and its collaborators, one job each::

    controller       composition root: builds the collaborators, hands each what it needs, runs
                     a queued SecretSync through the pass; start/stop/wait_ready for handlers/
    startup          start-up order: watches, identities and their logins, then the big LISTs
    sync_intake      SecretSyncs in: our LIST+WATCH into the work queue (live vs backlog)
    target_intake    managed Secrets/ConfigMaps in: the watch cache, repairs of hand edits
    template_intake  templateFrom's sources in: labelled ConfigMaps/Secrets, which SecretSyncs use
                     each; a change re-renders them
    identity_intake  identities in: the start-up read, kopf's events, standby → leader hand-off
    identity_status  an identity's status: login check, last login, list route; patched on change
    identity_summary an identity's status.streams and .scopes (last list of each): noted in memory
                     as lists happen, patched at most once per interval and only on change
    streaming        event streams over the scopes: which to hold, what their news queues
    webhooks         the signed-webhook receiver: verified ``secrets.modified`` webhooks nudge the
                     served scopes they name, as a stream event does (off unless webhook_port)
    webhook_relay    a standby's receiver relays a verified webhook to the leader (its address
                     from the Lease), so a webhook that lands on a standby is not lost
    webhook_sources  the client address a webhook's rate-limit bucket is keyed by: the peer, or the
                     client a trusted proxy names in X-Forwarded-For / Forwarded
    webhook_admission  a bucket per source, then a shared budget that still verifies small requests,
                     so a forged flood from the service's own address cannot starve its webhooks
    recovery         a service host answers again: what waited for it retries now
    resync           the periodic resync of due scopes, and the gauges
    tasks            the background tasks, so that stop cancels every one
    cluster_syncs    ClusterSecretSyncs in: their LIST+WATCH and the namespaces they select, each
                     selected namespace an entry of the SecretSync table (the same pass)

The pass, for one SecretSync::

    sync             the pass, top to bottom: identity → scopes → fetch → build → write → report
    target_writes    create/apply/replace/trim the target, or a Problem (decided against the cache)
    ownership        the apply as the SecretSync's own field manager; 0.1's shared one handed over
    sync_report      status patch when it differs, an Event on a Ready transition
    cluster_report   a ClusterSecretSync's status: counts over its entries, first failures, Ready
    deps             the bag of what the pass needs (built once by the controller)

What the pass decides with, and keeps::

    guards           source and target checks (empty listings, depth, protected, not ours)
    drift            does the target need a write, and which keys to keep or remove
    desired          the desired Secret/ConfigMap: a pure function of (SecretSync, fetched data)
                     (``ClusterOrigin``: the seam that makes a ClusterSecretSync the writer)
    cluster_selection  which namespaces a ClusterSecretSync selects; the SecretSync it stands for
    outcomes         service and Kubernetes errors as Problems (the error class decides retry)
    conditions       status.conditions helpers (keep lastTransitionTime when unchanged)
    problems         Problem(reason, message, retriable, retry_after): what status, Events and
                     retries read, whoever found it
    reasons          every reason and mode string, as constants
    state            in-memory indexes: SecretSyncs, scopes, the target cache
    sync_table       the SecretSync table, indexed by the Secret each entry writes (PushLoop's check)
    identities       the identity registry: parsed identities and their shared sessions (the
                     lifecycle every login method shares: build, retire, revoke, CA and consent)
    login/           how spec.auth becomes credentials, one module per method: universal,
                     access_token, kubernetes, oidc, jwt (its own package; login/__init__.py)
    token_minting    ServiceAccount tokens for Kubernetes, OIDC and JWT logins: audience, opt-in
    served           which namespaces this operator serves (namespace selector): taken in, let go
    rollouts         restarting the workloads that read a changed Secret (cooldown)
    scheduler        the work queue: dedup, live before backlog, bounded workers
    slim tenancy     compact kept bodies; namespace tenancy rules
    template_trust   who may make the operator compute over values (templates' opt-in)
    rendering/       key rewriting, value decoding (binary values) and template rendering:
                     in child processes, isolated and fair (its own package; rendering/__init__.py)
    generators/      PasswordGenerator and UUIDGenerator: generate once into an owned Secret,
                     regenerate on request; their own watches and queue; the value a SecretSync's
                     generatorRef source reads (its own package; generators/__init__.py)
    push/            PushSecret: Kubernetes Secrets written to the service; its own intake, queue
                     and pass, fed by the identity intake's Secret watch (push/__init__.py)
    privileges/      TemporaryPrivilege: an identity's additional privilege at the service, one
                     small loop per resource while leading (its own package; privileges/__init__.py)

Where does a change go::

    a new field in SecretSync status        sync_report (and models.secretsync for the CRD)
    ClusterSecretSync selection or status   cluster_syncs / cluster_selection; cluster_report
    when a Secret is (not) written          drift, guards; the write itself in target_writes
    the order of a pass, or a new step      sync
    a new watch or how events are queued    sync_intake / target_intake
    which namespaces are served             served (the namespace watch feeding it: identity_intake)
    identity login checks or their status   identity_status; kopf's identity events: identity_intake
    an identity's streams or scopes status  identity_summary (stream states: service.streams)
    a login method, or what one reads       login/ (a module per method; the session: identities)
    what an event stream's news triggers    streaming (the streams themselves: service.streams)
    start-up order or readiness             startup
    TemporaryPrivilege (calls, status)      privileges/ (manager; wire and report are pure)
    a new collaborator                      its own module, built and wired in controller
    a new failure, or whether it is retried  a Problem where it is found (``retriable``); service
                                            and Kubernetes errors: outcomes; delays: ``secretferry.backoff``

Import direction (checked by import-linter, pyproject.toml "Layers inside reconcile"): controller
→ startup → the collaborators → sync → target_writes/sync_report/identity_status → deps → the
bookkeeping and decisions → login → token_minting → pure building → rendering → problems → reasons.
"""

"""secretferry.service — the only code that talks to the secrets service (httpx lives here alone).

One module per responsibility::

    connection   one pooled HTTP connection: send, map failures to ``errors``, decode bodies
    client_base  what every endpoint group shares: the connection, the token, the call plumbing
    client       ServiceClient: the typed client for the whole API, one method per endpoint
    wire         pure translation between our calls and the wire format
    validation   input checks run before a request is sent (the real server's limits and rules)
    models       typed resources of the API (pydantic)
    errors       ServiceError tree (Unavailable, RateLimited, AuthenticationError, …); ``retriable``
    health       whether a host answers, shared by every call through one pool
    credentials  how a machine identity logs in (token, universal, kubernetes, …)
    auth         AuthSession: one access token per identity, renewed and replaced on demand
    revoker      revoking tokens we no longer use, in the background
    scopes       Scope: what one list call selects; SlugCache for project slugs
    listroutes   which list route each host has: v4, or v3 raw on older servers
    secrets_v3   the v3 raw list of servers older than v4
    fetcher      ScopeFetcher: one list call per scope per cycle, ETag-aware, with backoff
    events       event-stream registrations, messages and the SSE parser (pure)
    streamplan   which streams to open per (identity, project), which scopes an event nudges (pure)
    streams      StreamManager: keep the streams open, fan their events out as resync nudges
    privileges   identity additional privileges (v1 and v2)
    admin        identity auth-method removal, organization memberships, dynamic secret definitions

Where does a change go::

    a new endpoint or a changed field       wire + models, then a ServiceClient method in client
    a new refusal the real server makes     validation (before sending) or errors (after)
    how failures are retried                errors (which class, ``retriable``); the delays come
                                            from ``secretferry.backoff``, shared with kube/reconcile
    how identities log in                   credentials, auth
    what is listed per scope, and when      scopes, fetcher, listroutes
    event streams                           events (framing), streamplan (what), streams (lifecycle)

It imports only ``secretferry.models``/``settings``/``backoff`` of ours, never reconcile, kube or
handlers: whether a call is worth making is decided in ``reconcile``.
"""

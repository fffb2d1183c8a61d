"""secretferry.kube — the only code that talks to the Kubernetes API.

One module per responsibility, each a handful of async functions taking a :class:`client.Kube`
first::

    client      connect() → Kube; Kube.request()/stream(): raw JSON over one aiohttp session
    kubeconfig  a kubeconfig → Access (current context, server, CA, client cert, token, …)
    execplugin  a kubeconfig user's exec credential plugin: its section, one run, its ExecCredential
    execcache   that credential kept until it expires, renewed after a 401 (command-line tools only)
    incluster   in-cluster config (KUBERNETES_SERVICE_HOST/PORT, ServiceAccount files), token re-reads;
                shared with kopf's login handler
    access      Access (address, trust, credentials) and the TLS context built from it
    errors      KubeError tree (NotFound, Conflict, Gone, Unavailable, …); nothing foreign leaks out
    objects     Secrets/ConfigMaps: get, server-side apply, delete, managedFields
    managers    field managers: one per SecretSync (``secretferry/<name>``), the hand-over from 0.1's
    status      merge patches of /status on our custom resources
    customresources  paths of our custom resources' collections; the start-up LIST of identities
    events      events.k8s.io/v1 Events, best effort
    eventcache  client-go's Event correlation: rate limit per object, aggregation, series
    tokens      TokenRequest for a ServiceAccount (Kubernetes auth logins)
    secretrefs  a referenced Secret: its annotations (opt-in) and one decoded value
    serviceaccounts  a ServiceAccount's annotations (opt-in before a TokenRequest)
    hmackey     the operator's HMAC key Secret (get or create)
    namespaces  namespace labels
    watching    our own LIST+WATCH loop (ADDED/MODIFIED/DELETED + SYNCED after each listing)
    workloads   rollout restarts of the Deployments/StatefulSets/DaemonSets/Rollouts using a Secret

Why raw JSON and no client library: at 10,000 objects generated models' (de)serialisation costs
more CPU than the requests, and importing kubernetes_asyncio alone cost ~59 MiB and over a second
of start-up. Why so thin: deciding *whether* to write belongs to ``reconcile``;
this layer only writes what it is told, and reports failures as classes a caller can act on.
It imports only ``secretferry.models``/``secretferry.settings`` and the top-level helpers (``logfields``,
``controlchars``, ``metrics``) of ours, never reconcile or handlers.
"""

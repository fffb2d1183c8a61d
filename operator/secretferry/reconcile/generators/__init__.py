"""secretferry.reconcile.generators — PasswordGenerator and UUIDGenerator: generate once, keep it.

One job per module::

    values     the values themselves: passwords by the spec's rules, UUIDv4 (pure, ``secrets``)
    decide     keep, generate, regenerate or refuse: a pure function of (generator, its Secret's
               metadata); what the Secret and the status then say
    store      the owned Secret: its manifest, who owns it, reading its value for a consumer
    pass_      one generator through decide → write → status, Event and metrics
    intake     the watches (the two kinds, and their Secrets' metadata) and the work queue; a
               write queues the SecretSyncs that use the generator, at once

Why the value lives in a Secret and nowhere else: the Secret is the one durable place a tenant's
pods may read and a tenant may not write; the operator keeps no copy in memory or status, so a
restart reads the Secret again and never regenerates. Why regeneration only on an annotation with
a new token: a spec edit is not an order to rotate a credential a database already uses.
"""

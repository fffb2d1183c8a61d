"""secretferry.reconcile.leases — DynamicSecretLease: lease, renew, replace and revoke credentials.

::

    schedule   pure: when the next renewal is due, and whether it is a renewal or a new lease
    target     the Secret holding the credentials: built, created or updated (ours only)
    keeper     one DynamicSecretLease over time: lease → write → renew … → replace → revoke;
               status, Events, metrics, the per-namespace lease bound

Handlers (handlers/leases.py) run one keeper loop per object (a kopf daemon) and revoke on
deletion (a kopf finalizer); everything they call is here.
"""

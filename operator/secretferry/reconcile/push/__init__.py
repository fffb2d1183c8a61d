"""secretferry.reconcile.push — PushSecret: Kubernetes Secrets written to the service.

One job each::

    trust      who may push what where (pure): the source Secret's allow-push opt-in, a
               ClusterMachineIdentity's pushAllowed list (README, "Security model")
    loops      a SecretSync writing the source Secret from the destination: refused (pure)
    plan       what to write for one pass (pure): per key create / update / delete / conflict,
               decided from the source, the destination's listing and the HMACs of the last push
    pushing    the steps of a pass: read the source, check, list, write (passes runs them)
    passes     one pass for one PushSecret, and its removal behind the finalizer
    report     its status (conditions, HMACs) and Events on transitions
    intake     PushSecrets in (LIST+WATCH), the source Secrets they name (the identity intake's
               metadata-only Secret watch, filtered by name), the finalizer, the work queue

Why a pass lists the destination before writing: a value changed at the service behind our back
is only visible there (one read); then each changed key costs exactly one write, and an unchanged
source costs nothing at all — no timer runs unless spec.refreshInterval asks for one.
"""

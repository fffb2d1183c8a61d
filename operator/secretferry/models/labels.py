"""Labels and annotations the operator puts on the objects it writes.

They live in the lowest layer because both ``reconcile`` (which builds objects) and ``kube`` (which
selects them) need the same spelling.
"""

from __future__ import annotations

import hashlib
from typing import Final

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE: Final = "secretferry"
SYNC_LABEL: Final = "secretferry.io/sync"
"""On targets with creationPolicy Owner/Orphan: which SecretSync (see sync_label_value) wrote it."""
CLUSTER_SYNC_LABEL: Final = "secretferry.io/cluster-sync"
"""On targets a ClusterSecretSync wrote: its name (as sync_label_value spells it), to find them all
with one selector. Ownership itself is SYNC_LABEL (see cluster_sync_label_value) and the owner
reference."""
SYNCED_KEYS_ANNOTATION: Final = "secretferry.io/synced-keys"
"""On targets a ClusterSecretSync wrote: the names of the keys it wrote there (comma-separated, never
values). A ClusterSecretSync keeps no status per namespace on the apiserver, so after a restart this
is what tells its own (retained) keys from someone else's (reconcile/target_writes.py)."""
DATA_HMAC_ANNOTATION: Final = "secretferry.io/data-hmac"
MERGE_FROM_ANNOTATION: Final = "secretferry.io/merge-from"
"""On a Secret/ConfigMap someone else owns: the SecretSyncs of its namespace (comma-separated
names) that may write into it with creationPolicy Merge. Only who can write that object can set it."""
# On a SecretSync or ClusterSecretSync: a new value makes the operator read the service now
# (reconcile/sync_intake.py); what ``kubectl secretferry sync`` sets.
FORCE_SYNC_ANNOTATION: Final = "secretferry.io/force-sync"
WEBHOOK_ADDRESS_ANNOTATION: Final = "secretferry.io/webhook-address"
"""On the leader-election Lease: ``<pod IP>:<port>`` of the leader's webhook receiver, where standbys
relay the webhooks that land on them (reconcile/webhook_relay.py). Only the operator's
ServiceAccount can write that Lease, and whoever can may already take the lead."""

# Label values are at most 63 characters; object names may have 253.
LABEL_VALUE_MAX: Final = 63
_DIGEST_CHARS: Final = 10  # 40 bits: collisions among names sharing a 52-character prefix are moot


def sync_label_value(name: str) -> str:
    """``name`` if it fits a label value, else a prefix of it plus a short digest of all of it."""
    if len(name) <= LABEL_VALUE_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_DIGEST_CHARS]
    prefix = name[: LABEL_VALUE_MAX - _DIGEST_CHARS - 1].rstrip("-.")
    return f"{prefix}-{digest}"


# "_" cannot occur in an object name (a DNS subdomain), so no SecretSync's label value can ever
# equal a ClusterSecretSync's: a tenant's SecretSync named like the ClusterSecretSync, aimed at its
# target, is still refused as not ours (guards.py, "labelled ours").
_CLUSTER_MARK: Final = "cluster_"


def cluster_sync_label_value(name: str) -> str:
    """The SYNC_LABEL value of a target written for ClusterSecretSync ``name``: never a value any
    SecretSync's name gives (``_CLUSTER_MARK``), shortened like ``sync_label_value``."""
    return sync_label_value(_CLUSTER_MARK + name)

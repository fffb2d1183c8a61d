"""secretferry.models: pydantic models of the custom resources (imports nothing else of ours).

The names below are the public surface; the submodules group them by resource.
"""

from secretferry.models.base import (
    API_VERSION,
    GROUP,
    VERSION,
    ClusterSecretKeyRef,
    Condition,
    LabelSelector,
    ObjectMeta,
    SecretKeyRef,
    find_condition,
    parse_duration,
)
from secretferry.models.errors import describe_validation_error
from secretferry.models.identity import (
    AllowedNamespaces,
    ClusterMachineIdentity,
    ClusterMachineIdentitySpec,
    IdentityAuth,
    MachineIdentity,
    MachineIdentitySpec,
    MachineIdentityStatus,
)
from secretferry.models.secretsync import (
    CreationPolicy,
    DeletionPolicy,
    IdentityRef,
    SecretSync,
    SecretSyncSpec,
    SecretSyncStatus,
    Source,
    Target,
    TargetStatus,
    Template,
)

__all__ = [
    "API_VERSION",
    "GROUP",
    "VERSION",
    "AllowedNamespaces",
    "ClusterMachineIdentity",
    "ClusterMachineIdentitySpec",
    "ClusterSecretKeyRef",
    "Condition",
    "CreationPolicy",
    "DeletionPolicy",
    "IdentityAuth",
    "IdentityRef",
    "LabelSelector",
    "MachineIdentity",
    "MachineIdentitySpec",
    "MachineIdentityStatus",
    "ObjectMeta",
    "SecretKeyRef",
    "SecretSync",
    "SecretSyncSpec",
    "SecretSyncStatus",
    "Source",
    "Target",
    "TargetStatus",
    "Template",
    "describe_validation_error",
    "find_condition",
    "parse_duration",
]

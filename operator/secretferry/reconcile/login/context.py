"""The identity a login is for, and what its method reads and mints with.

A small value handed to every method module so that none of them knows about the registry (its
entries, sessions and watches live in ``identities``).
"""

from __future__ import annotations

from dataclasses import dataclass

from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.reconcile import token_minting


@dataclass(frozen=True)
class LoginContext:
    label: str
    """How messages name the identity (``MachineIdentity/ns/name``, ``ClusterMachineIdentity/name``)."""
    identity: str
    """The identity's name: what opt-in annotations list."""
    namespaced: bool
    """A MachineIdentity (tenancy rules and opt-ins apply), not a ClusterMachineIdentity."""
    namespace: str
    """A MachineIdentity's namespace; "" for a ClusterMachineIdentity."""
    kube: kube_client.Kube
    tokens: token_minting.TokenMinter
    settings: settings_mod.Settings

    def ref_namespace(self, ref: object) -> str:
        """References of a namespaced identity live in its namespace; cluster ones name theirs
        (the Cluster* reference models carry a ``namespace``; the namespaced ones have none, so a
        tenant cannot point outside its namespace)."""
        if not self.namespaced:
            return str(getattr(ref, "namespace"))  # noqa: B009 - the Cluster* ref models carry it
        return self.namespace

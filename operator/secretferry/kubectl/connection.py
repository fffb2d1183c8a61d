"""Which kubeconfig a command-line tool uses: the user's own, as kubectl finds it.

Why not ``client.connect``'s default order: that is the operator's (in-cluster first, for a pod).
A person at a terminal means their kubeconfig — ``--kubeconfig``, then ``$KUBECONFIG``, then
``~/.kube/config`` — and in-cluster only when none exists (a debug pod), as kubectl does. So
``kubectl secretferry`` and ``secretferry template --live`` act with the user's credentials and
RBAC, never the operator's, and reach nothing but the apiserver.

Exec credential plugins (EKS, GKE, AKS kubeconfigs) are run here, as kubectl runs them
(:mod:`secretferry.kube.execplugin`): a person's kubeconfig is theirs to trust, and the plugin runs
as them. The operator never runs one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from secretferry.kube import client, kubeconfig


def kubeconfig_paths(explicit: str | None, *, env: Mapping[str, str] | None = None) -> str | None:
    """The kubeconfig path(s) to read, or None to fall back to the in-cluster configuration."""
    environ = os.environ if env is None else env
    if explicit:
        return explicit
    if environ.get("KUBECONFIG"):
        return environ["KUBECONFIG"]
    default = Path.home() / ".kube" / "config"
    return str(default) if default.is_file() else None


async def connect(explicit: str | None, *, context: str | None = None) -> client.Kube:
    """A connection as the user (see the module docstring); raises ``kube.errors.NotConfigured``."""
    return await client.connect(
        kubeconfig=kubeconfig_paths(explicit), context=context, connection_limit=8, exec_plugins=True
    )


def default_namespace(explicit: str | None, *, context: str | None = None) -> str:
    """The namespace of the kubeconfig's context, else ``default``, as kubectl's ``-n`` defaults."""
    paths = kubeconfig_paths(explicit)
    found = kubeconfig.context_namespace(paths, context=context) if paths else None
    return found or "default"

"""Who may push what where: pure checks, run before anything is read from a Secret or sent.

The attack (README, "Security model"): a tenant can create our kinds in their namespace but
cannot read its Secrets. The operator can. A PushSecret naming such a Secret, written to a folder
the tenant can read at the service, would hand them its values. So:

- **The source must opt in** (``opted_in``): the Secret carries ``secretferry.io/allow-push``
  listing this PushSecret's name (or ``*``: any PushSecret of the namespace). Only someone who may
  write that Secret can set it — and they could publish its values anyway. A generator's Secret
  is a Secret like any other: the same annotation is needed. A missing Secret is refused in the
  same words as one that did not opt in, so no one probes which Secret names exist.
- **A namespaced MachineIdentity** pushes only Secrets of its own namespace: the PushSecret,
  the identity and the Secret share it by construction (no field names another namespace), and
  the identity's own consent rules (``allowed-identities`` on its credentials) apply as for a
  SecretSync. Where it may write is what the service lets that identity write.
- **A ClusterMachineIdentity** is an admin's credential shared by namespaces; whatever it may
  write at the service, a PushSecret using it writes only within ``spec.pushAllowed`` (project,
  environment, path prefix by whole segments); empty means no push at all (``push_allowed``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from secretferry.models import identity as identity_models
from secretferry.models import pushsecret as push_models
from secretferry.reconcile import problems, reasons

ALLOW_PUSH_ANNOTATION: Final = "secretferry.io/allow-push"
"""On a Secret: comma-separated names of PushSecrets (same namespace) that may push it, or ``*``."""


def opted_in(annotations: Mapping[str, str] | None, push_name: str) -> bool:
    """Whether the Secret's ``secretferry.io/allow-push`` admits PushSecret ``push_name``."""
    listed = {name.strip() for name in (annotations or {}).get(ALLOW_PUSH_ANNOTATION, "").split(",")}
    return "*" in listed or push_name in listed


def not_opted_in(*, namespace: str, secret: str, push_name: str) -> problems.Problem:
    """The same refusal for a Secret that is missing and one that did not opt in."""
    return problems.Problem(
        reasons.PUSH_SOURCE_NOT_OPTED_IN,
        f"Secret {namespace}/{secret} does not exist or has not opted in: a PushSecret pushes a "
        f"Secret only when it carries the annotation {ALLOW_PUSH_ANNOTATION} listing "
        f"{push_name!r} or '*' (someone who may edit that Secret sets it); nothing was read or sent",
        # The Secret watch requeues this PushSecret when the annotation appears.
        retriable=False,
    )


def _under(path: str, prefix: str) -> bool:
    """Whether ``path`` is ``prefix`` or below it, by whole segments."""
    path, prefix = path.rstrip("/") or "/", prefix.rstrip("/") or "/"
    return prefix == "/" or path == prefix or path.startswith(prefix + "/")


def push_allowed(scopes: Sequence[identity_models.PushScope], destination: push_models.Destination) -> bool:
    """Whether one of an admin's ``pushAllowed`` entries admits ``destination``.

    The project must be named the same way on both sides (ID with ID, slug with slug): matching a
    slug to an ID would need a call, and an admin's list is read literally."""
    for scope in scopes:
        same_project = (scope.project_id is not None and scope.project_id == destination.project_id) or (
            scope.project_slug is not None and scope.project_slug == destination.project_slug
        )
        if (
            same_project
            and scope.environment == destination.environment
            and _under(destination.path, scope.path_prefix)
        ):
            return True
    return False


def check_cluster_identity(
    spec: identity_models.ClusterMachineIdentitySpec, *, identity: str, destination: push_models.Destination
) -> problems.Problem | None:
    """A ClusterMachineIdentity pushes only where its admin's ``spec.pushAllowed`` says."""
    if push_allowed(spec.push_allowed, destination):
        return None
    where = describe(destination)
    listed = "is empty (no push at all)" if not spec.push_allowed else "does not admit it"
    return problems.Problem(
        reasons.PUSH_NOT_ALLOWED,
        f"ClusterMachineIdentity {identity!r} may not push to {where}: its spec.pushAllowed {listed}; "
        "a cluster admin sets that list; nothing was read or sent",
    )


def describe(destination: push_models.Destination) -> str:
    """``<project>/<environment><path>``: the Destination column and messages."""
    project = destination.project_id or destination.project_slug or ""
    return f"{project}/{destination.environment}{destination.path}"

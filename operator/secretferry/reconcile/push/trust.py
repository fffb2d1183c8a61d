"""Who may push what where: pure checks, run before anything is read from a Secret or sent.

The attack (README, "Security model"): a tenant can create our kinds in their namespace but
cannot read its Secrets. The operator can. A PushSecret naming such a Secret, written to a folder
the tenant can read at the service, would hand them its values. So:

- **The source must opt in, to a place** (``opted_in``): the Secret carries
  ``secretferry.io/allow-push`` listing this PushSecret's name (or ``*``: any PushSecret of the
  namespace) **and** ``secretferry.io/allow-push-to`` listing where its values may go
  (``<project>/<environment>/<path prefix>``). Only someone who may write that Secret can set
  them — and they could publish its values anyway. The place matters because a tenant may edit
  the PushSecret the Secret names: without it, they would point its destination at a folder
  they can read. A generator's Secret is a Secret like any other: the same annotations are
  needed. A missing Secret is refused in the same words as one that did not opt in (to this
  place), so no one probes which Secret names exist.
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
ALLOW_PUSH_TO_ANNOTATION: Final = "secretferry.io/allow-push-to"
"""On a Secret: comma-separated places its values may be pushed to, each
``<project id or slug>/<environment>/<path prefix>`` (e.g. ``shop/prod/shared``; ``shop/prod/``
for the whole environment). Path prefixes compare by whole segments."""


def _place(text: str) -> tuple[str, str, str] | None:
    parts = text.strip().split("/", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        return None
    return parts[0], parts[1], "/" + (parts[2] if len(parts) == 3 else "")


def opted_in(
    annotations: Mapping[str, str] | None, push_name: str, destination: push_models.Destination
) -> bool:
    """Whether the Secret admits PushSecret ``push_name`` (``allow-push``) to ``destination``
    (``allow-push-to``; the project named as the PushSecret names it, ID or slug)."""
    found = annotations or {}
    listed = {name.strip() for name in found.get(ALLOW_PUSH_ANNOTATION, "").split(",")}
    if "*" not in listed and push_name not in listed:
        return False
    project = destination.project_id or destination.project_slug
    for entry in found.get(ALLOW_PUSH_TO_ANNOTATION, "").split(","):
        place = _place(entry)
        at_place = place is not None and place[:2] == (project, destination.environment)
        if at_place and place is not None and _under(destination.path, place[2]):
            return True
    return False


def not_opted_in(*, namespace: str, secret: str, push_name: str) -> problems.Problem:
    """The same refusal for a Secret that is missing, did not opt in, or not to this place."""
    return problems.Problem(
        reasons.PUSH_SOURCE_NOT_OPTED_IN,
        f"Secret {namespace}/{secret} does not exist or has not opted in to this push: a PushSecret "
        f"pushes a Secret only when it carries the annotation {ALLOW_PUSH_ANNOTATION} listing "
        f"{push_name!r} or '*', and {ALLOW_PUSH_TO_ANNOTATION} listing the destination "
        "(<project>/<environment>/<path prefix>; someone who may edit that Secret sets both); "
        "nothing was read or sent",
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

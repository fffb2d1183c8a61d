"""Keep, generate, regenerate or refuse: a pure function of (generator, its Secret's metadata).

The chain, first match wins:

1. no Secret of that name: **generate** (the first value, or the Secret was deleted: the value is
   gone either way, and a consumer needs one);
2. a Secret of that name not owned by this generator (controller ownerReference, its uid):
   **refuse** (TargetConflict) — whatever its labels say, and nothing is written: a tenant cannot
   make a generator overwrite a Secret they could not write themselves;
3. ours, but the key is missing (a hand edit): **regenerate**;
4. the regenerate annotation holds a token the Secret has not answered yet: **regenerate**, once
   (the token goes onto the Secret with the value);
5. otherwise **keep** the value: Generated, or SpecChangedSinceGenerated when the rules changed
   since it was generated (never a silent regeneration: a password already in use by a database
   would stop working).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from secretferry.models import generators
from secretferry.reconcile import reasons
from secretferry.reconcile.generators import store

Action = Literal["keep", "generate", "regenerate", "refuse"]


@dataclass(frozen=True, slots=True)
class Plan:
    action: Action
    reason: str
    """The Ready condition's reason once the plan is carried out."""
    message: str
    cause: str = ""
    """Why a value is (re)generated, for the Event and the metric: created, requested, key-missing."""


def plan(generator: generators.Generator, secret: Mapping[str, Any] | None) -> Plan:
    """What to do, given the metadata (and only the data keys) of the Secret ``secret_name`` names.

    ``secret``: ``{"metadata": ..., "keys": [...]}`` or None when it does not exist."""
    name = generator.secret_name
    if secret is None:
        return Plan(
            "generate", reasons.GENERATED, f"Secret {name} holds the generated {generator.key}", "created"
        )
    metadata = secret.get("metadata") or {}
    if not store.owned_by(metadata, generator.metadata.uid):
        return Plan(
            "refuse",
            reasons.TARGET_CONFLICT,
            f"Secret {name} exists and is not owned by this {generator.KIND}; nothing was written"
            " (delete it, or set spec.target.name to another name)",
        )
    annotations = metadata.get("annotations") or {}
    if generator.key not in (secret.get("keys") or ()):
        return Plan(
            "regenerate",
            reasons.GENERATED,
            f"Secret {name} lacked the key {generator.key}: a new value was generated",
            "key-missing",
        )
    token = generator.regenerate_token
    if token is not None and token != annotations.get(store.TOKEN_ANNOTATION):
        return Plan(
            "regenerate",
            reasons.GENERATED,
            f"Secret {name} holds a value regenerated for {generators.REGENERATE_ANNOTATION}={token}",
            "requested",
        )
    if annotations.get(store.RULES_ANNOTATION) != store.rules_digest(generator):
        return Plan(
            "keep",
            reasons.SPEC_CHANGED_SINCE_GENERATED,
            f"Secret {name} holds a value generated under an earlier spec; it is kept until"
            f" {generators.REGENERATE_ANNOTATION} is set to a new token",
        )
    return Plan("keep", reasons.GENERATED, f"Secret {name} holds the generated {generator.key}")

"""The Secret a generator owns: its manifest, whose it is, and reading it for a consumer.

What the Secret carries besides the value (annotations, none secret): when the value was
generated, the regenerate token it answered, and a digest of the rules it was generated under
(the spec is readable by whoever reads the generator; the digest only tells "the rules changed").
Kept on the Secret, not only in status: the value and what it answered are written in one
request, so a crash between two writes can neither regenerate twice nor forget a token.

Whose it is: a controller ownerReference with the generator's uid. Nothing else counts (a label
anyone with write access to Secrets can set): a Secret of that name without it is someone else's,
never written (TargetConflict), and never read for a consumer either — so a consumer naming a
generator cannot read an arbitrary Secret of its namespace through it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import objects as kube_objects
from secretferry.kube import status as kube_status
from secretferry.models import base, generators, labels
from secretferry.reconcile import outcomes, problems, reasons

FIELD_MANAGER: Final = "secretferry-generator"
GENERATOR_LABEL: Final = "secretferry.io/generator"
"""On every generator's Secret: the generator's name (as a label value). Selects the watch of
these Secrets (metadata only); ownership is decided by the ownerReference, never by this label."""
GENERATOR_KIND_LABEL: Final = "secretferry.io/generator-kind"
GENERATED_AT_ANNOTATION: Final = "secretferry.io/generated-at"
TOKEN_ANNOTATION: Final = "secretferry.io/regenerate-token"
RULES_ANNOTATION: Final = "secretferry.io/generator-rules"
GENERATIONS_ANNOTATION: Final = "secretferry.io/generations"


def rules_digest(generator: generators.Generator) -> str:
    """SHA-256 of the spec's generation rules (public text, so an unkeyed digest reveals nothing)."""
    canonical = json.dumps(generator.spec.rules(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]  # 64 bits: tells a change, no more


def owned_by(metadata: Mapping[str, Any], uid: str | None) -> bool:
    """Whether the Secret's controller ownerReference is the generator with ``uid``."""
    if not uid:
        return False
    return any(
        ref.get("uid") == uid and ref.get("controller") is True
        for ref in metadata.get("ownerReferences") or []
    )


def manifest(
    generator: generators.Generator,
    value: str,
    *,
    generated_at: datetime,
    generations: int,
    resource_version: str | None = None,
) -> dict[str, Any]:
    """The whole Secret. ``resource_version``: a precondition for a regeneration (the Secret must
    still be the one found ours)."""
    meta = generator.metadata
    if meta.uid is None or meta.namespace is None:
        raise ValueError("a generator's Secret needs the generator's uid and namespace")
    annotations = {
        GENERATED_AT_ANNOTATION: generated_at.strftime(base.TIME_FORMAT),
        RULES_ANNOTATION: rules_digest(generator),
        GENERATIONS_ANNOTATION: str(generations),
    }
    token = generator.regenerate_token
    if token is not None:
        annotations[TOKEN_ANNOTATION] = token
    metadata: dict[str, Any] = {
        "name": generator.secret_name,
        "namespace": meta.namespace,
        "labels": {
            labels.MANAGED_BY_LABEL: labels.MANAGED_BY_VALUE,
            GENERATOR_LABEL: labels.sync_label_value(meta.name),
            GENERATOR_KIND_LABEL: generator.KIND,
        },
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": base.API_VERSION,
                "kind": generator.KIND,
                "name": meta.name,
                "uid": meta.uid,
                "controller": True,
            }
        ],
    }
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": metadata,
        "data": {generator.key: base64.b64encode(value.encode()).decode()},
    }


def generator_path(kind: str, namespace: str, name: str) -> str:
    return kube_status.resource_path(
        group=base.GROUP,
        version=base.VERSION,
        plural=generators.PLURALS[kind],
        namespace=namespace,
        name=name,
    )


def secret_name_of(ref_name: str, body: Mapping[str, Any]) -> str:
    """The Secret a generator writes: ``spec.target.name``, else the generator's own name."""
    spec_target = ((body.get("spec") or {}).get("target") or {}).get("name")
    return str(spec_target or ref_name)


def value_of(
    ref: generators.GeneratorRef,
    *,
    generator: Mapping[str, Any],
    secret: Mapping[str, Any] | None,
) -> dict[str, str]:
    """``{key: value}`` from the generator body and its Secret (as read, or as a watch keeps
    them); raises GeneratorNotReady when the Secret is missing, not the generator's (by uid), or
    holds no value yet. One rule for both the read and the cache, so neither lets a consumer read
    a Secret its generator does not own."""
    what = f"generator {ref.kind} {ref.name}"
    key = generators.KEYS[ref.kind]
    uid = (generator.get("metadata") or {}).get("uid")
    encoded = ((secret or {}).get("data") or {}).get(key)
    if secret is None or not owned_by(secret.get("metadata") or {}, uid) or not encoded:
        raise problems.Problem(
            reasons.GENERATOR_NOT_READY,
            f"{what} has not generated a value into its Secret {secret_name_of(ref.name, generator)} yet",
            retriable=True,
        )
    return {key: base64.b64decode(encoded).decode()}


async def read_value(
    kube: kube_client.Kube, ref: generators.GeneratorRef, *, namespace: str
) -> dict[str, str]:
    """``{key: value}`` of the generator ``ref`` in ``namespace``, read from its own Secret: two
    GETs (the generator, its Secret). The pass asks the intake's watch cache first
    (intake.py ``value``); this read serves what the cache does not hold.

    Raises ``problems.Problem``: GeneratorNotFound (no such generator), GeneratorNotReady (no
    value yet, or its Secret is not the generator's); Kubernetes errors as ``outcomes`` says.
    Retriable where the generator's next write fixes it: its write queues the consumer again
    anyway (intake.py), the retry is a safety net.
    """
    what = f"generator {ref.kind} {ref.name}"
    try:
        body = await kube.request("GET", generator_path(ref.kind, namespace, ref.name))
    except kube_errors.NotFound:
        raise problems.Problem(
            reasons.GENERATOR_NOT_FOUND, f"{what} does not exist in namespace {namespace}"
        ) from None
    except kube_errors.KubeError as exc:
        raise outcomes.from_kube_error(exc, what=f"reading {what}") from None
    secret_name = secret_name_of(ref.name, body)
    try:
        secret = await kube_objects.get(kube, kind="Secret", namespace=namespace, name=secret_name)
    except kube_errors.KubeError as exc:
        raise outcomes.from_kube_error(exc, what=f"reading the Secret of {what}") from None
    return value_of(ref, generator=body, secret=secret)

"""The operator's HMAC key: 32 random bytes in a Secret, created once, shared by all replicas.

Status fields show an HMAC of synced data (never an unkeyed digest, which would let anyone confirm
a guessed value). The key must survive restarts and be the same for every replica, hence a Secret;
it is created ``immutable`` so nothing edits it by accident.
"""

from __future__ import annotations

import base64
import binascii
import os

from secretferry.kube import errors, objects
from secretferry.kube.client import Kube

KEY_FIELD = "key"
KEY_BYTES = 32  # HMAC-SHA256's block-size-independent sweet spot: key length = digest length


def _decode(secret: dict[str, object], namespace: str, name: str) -> bytes:
    data = secret.get("data")
    encoded = data.get(KEY_FIELD) if isinstance(data, dict) else None
    try:
        key = base64.b64decode(encoded, validate=True) if isinstance(encoded, str) else b""
    except binascii.Error:
        key = b""
    if len(key) != KEY_BYTES:
        raise errors.Invalid(
            422,
            "InvalidHMACKey",
            f"Secret {namespace}/{name} exists but its {KEY_FIELD!r} is not {KEY_BYTES} bytes; "
            "delete it to have a new key generated",
        )
    return key


async def get_or_create(kube: Kube, *, namespace: str, name: str) -> bytes:
    """Read the key, creating the Secret if missing; concurrent creators all end with the same key.

    The namespace must exist (``NotFound`` naming it otherwise): creating namespaces is not ours to do.
    """
    existing = await objects.get(kube, kind="Secret", namespace=namespace, name=name)
    if existing is not None:
        return _decode(existing, namespace, name)
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/managed-by": "secretferry",
                "app.kubernetes.io/component": "hmac-key",
            },
        },
        "type": "Opaque",
        "immutable": True,
        "data": {KEY_FIELD: base64.b64encode(os.urandom(KEY_BYTES)).decode()},
    }
    try:
        created = await kube.request("POST", objects.path("Secret", namespace), body=body)
    except errors.AlreadyExists:
        # Another replica won the race: its key is the key.
        again = await objects.get(kube, kind="Secret", namespace=namespace, name=name)
        if again is None:
            raise errors.Conflict(
                409, "Conflict", f"Secret {namespace}/{name} appeared and vanished; retry"
            ) from None
        return _decode(again, namespace, name)
    except errors.NotFound as exc:
        raise errors.NotFound(
            404,
            "NamespaceNotFound",
            f"namespace {namespace!r} for the HMAC key Secret {name!r} does not exist",
        ) from exc
    return _decode(created, namespace, name)

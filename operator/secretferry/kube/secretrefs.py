"""One value out of a referenced Secret (client secrets, CA bundles, access tokens).

Errors name the Secret and the key — what a user needs to fix the reference — and never the value.
"""

from __future__ import annotations

import base64
import binascii

from secretferry.kube import errors, objects
from secretferry.kube.client import Kube


async def read_key(kube: Kube, *, namespace: str, name: str, key: str) -> str:
    """The decoded (UTF-8) value of ``key`` in Secret ``namespace/name``.

    Raises :class:`errors.NotFound` (missing Secret), :class:`errors.SecretKeyMissing` (missing key),
    :class:`errors.SecretValueUndecodable` (not UTF-8 text).
    """
    try:
        secret = await kube.request("GET", objects.path("Secret", namespace, name))
    except errors.NotFound as exc:
        raise errors.NotFound(404, "NotFound", f"Secret {namespace}/{name} not found") from exc
    encoded = (secret.get("data") or {}).get(key)
    if encoded is None:
        present = sorted(secret.get("data") or {})
        raise errors.SecretKeyMissing(
            404,
            "SecretKeyMissing",
            f"Secret {namespace}/{name} has no key {key!r} (keys: {', '.join(present) or 'none'})",
        )
    try:
        return base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        # Deliberately `from None`: a decode error carries (and may print) the bytes it choked on.
        raise errors.SecretValueUndecodable(
            422, "SecretValueUndecodable", f"key {key!r} of Secret {namespace}/{name} is not UTF-8 text"
        ) from None

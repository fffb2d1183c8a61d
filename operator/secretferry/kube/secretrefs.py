"""One value out of a referenced Secret (client secrets, CA bundles, access tokens).

Errors name the Secret and the key — what a user needs to fix the reference — and never the value.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from secretferry.kube import errors, objects
from secretferry.kube.client import Kube


@dataclass(frozen=True)
class ReferencedSecret:
    """A referenced Secret as read: its annotations (for an opt-in check) and its data."""

    namespace: str
    name: str
    annotations: dict[str, str]
    data: dict[str, str] = field(repr=False)  # base64 values: never in a repr
    resource_version: str = ""
    """As read: a watch event with another one means the data may have changed (CA bundles)."""

    def value(self, key: str) -> str:
        """The decoded (UTF-8) value of ``key``.

        Raises :class:`errors.SecretKeyMissing` (missing key), :class:`errors.SecretValueUndecodable`
        (not UTF-8 text).
        """
        encoded = self.data.get(key)
        where = f"{self.namespace}/{self.name}"
        if encoded is None:
            present = sorted(self.data)
            raise errors.SecretKeyMissing(
                404,
                "SecretKeyMissing",
                f"Secret {where} has no key {key!r} (keys: {', '.join(present) or 'none'})",
            )
        try:
            return base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            # Deliberately `from None`: a decode error carries (and may print) the bytes it choked on.
            raise errors.SecretValueUndecodable(
                422, "SecretValueUndecodable", f"key {key!r} of Secret {where} is not UTF-8 text"
            ) from None


async def read(kube: Kube, *, namespace: str, name: str) -> ReferencedSecret:
    """Secret ``namespace/name``; raises :class:`errors.NotFound` when it is missing."""
    try:
        secret = await kube.request("GET", objects.path("Secret", namespace, name))
    except errors.NotFound as exc:
        raise errors.NotFound(404, "NotFound", f"Secret {namespace}/{name} not found") from exc
    meta = secret.get("metadata") or {}
    return ReferencedSecret(
        namespace=namespace,
        name=name,
        annotations=dict(meta.get("annotations") or {}),
        data=dict(secret.get("data") or {}),
        resource_version=str(meta.get("resourceVersion") or ""),
    )

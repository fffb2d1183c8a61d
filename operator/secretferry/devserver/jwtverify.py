"""Verify a JWT's signature and time claims against public keys, with ``cryptography`` only.

What the real service does with ``jsonwebtoken``/``jwks-rsa`` for OIDC and JWT auth, for the
algorithms a Kubernetes apiserver signs ServiceAccount tokens with (RS256 from an RSA key, ES256
from a P-256 key) and their larger siblings. The messages are ``jsonwebtoken``'s (``jwt expired``,
``invalid signature``, ``jwt issuer invalid. expected: …``), because the real service passes them
on after ``Access denied:``; a client matches them, so they are kept word for word.

No PyJWT: ``cryptography`` is already a dependency and the subset needed is small; a token is
refused unless its header names one of ``_ALGORITHMS`` (``none`` and HMAC never verify).
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey

_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "RS256": hashes.SHA256,
    "RS384": hashes.SHA384,
    "RS512": hashes.SHA512,
    "ES256": hashes.SHA256,
    "ES384": hashes.SHA384,
    "ES512": hashes.SHA512,
}
_ALGORITHMS = frozenset(_HASHES)
_CURVES: dict[str, ec.EllipticCurve] = {
    "P-256": ec.SECP256R1(),
    "P-384": ec.SECP384R1(),
    "P-521": ec.SECP521R1(),
}


class JWTInvalid(Exception):
    """The token is refused; ``str(exc)`` is ``jsonwebtoken``'s message for the same case."""


@dataclass(frozen=True)
class Decoded:
    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes
    signature: bytes


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def decode(token: str) -> Decoded:
    """Split and parse without verifying (``jwt.decode(..., {complete: true})``)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise JWTInvalid("jwt malformed")
    try:
        header = json.loads(_b64(parts[0]))
        claims = json.loads(_b64(parts[1]))
        signature = _b64(parts[2])
    except (ValueError, binascii.Error) as exc:
        raise JWTInvalid("invalid token") from exc
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise JWTInvalid("invalid token")
    return Decoded(header, claims, f"{parts[0]}.{parts[1]}".encode(), signature)


def key_from_jwk(jwk: dict[str, Any]) -> PublicKey:
    """An RSA or EC public key from one JWKS entry (``kty`` RSA with n/e, EC with crv/x/y)."""
    try:
        if jwk.get("kty") == "RSA":
            n = int.from_bytes(_b64(str(jwk["n"])), "big")
            e = int.from_bytes(_b64(str(jwk["e"])), "big")
            return rsa.RSAPublicNumbers(e, n).public_key()
        if jwk.get("kty") == "EC" and jwk.get("crv") in _CURVES:
            x = int.from_bytes(_b64(str(jwk["x"])), "big")
            y = int.from_bytes(_b64(str(jwk["y"])), "big")
            return ec.EllipticCurvePublicNumbers(x, y, _CURVES[str(jwk["crv"])]).public_key()
    except (KeyError, ValueError, binascii.Error) as exc:
        raise JWTInvalid(f"invalid JWK: {type(exc).__name__}") from exc
    raise JWTInvalid(f"unsupported JWK key type {jwk.get('kty')!r}")


def key_from_pem(pem: str) -> PublicKey:
    """A public key from PEM (``-----BEGIN PUBLIC KEY-----``), as JWT auth's ``publicKeys`` hold."""
    try:
        key = serialization.load_pem_public_key(pem.encode())
    except ValueError as exc:
        raise JWTInvalid("invalid public key") from exc
    if not isinstance(key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
        raise JWTInvalid("unsupported public key type")
    return key


def verify(
    decoded: Decoded, key: PublicKey, *, issuer: str | None = None, now: float | None = None
) -> dict[str, Any]:
    """The claims, if the signature verifies with ``key`` and the token is in date (``exp``/``nbf``,
    no leeway) and, when ``issuer`` is given, was issued by it."""
    alg = str(decoded.header.get("alg", ""))
    if alg not in _ALGORITHMS:
        raise JWTInvalid("invalid algorithm")
    digest = _HASHES[alg]()
    try:
        if alg.startswith("RS"):
            if not isinstance(key, rsa.RSAPublicKey):
                raise JWTInvalid("invalid algorithm")
            key.verify(decoded.signature, decoded.signing_input, padding.PKCS1v15(), digest)
        else:
            if not isinstance(key, ec.EllipticCurvePublicKey):
                raise JWTInvalid("invalid algorithm")
            size = (key.curve.key_size + 7) // 8
            if len(decoded.signature) != 2 * size:
                raise JWTInvalid("invalid signature")
            r = int.from_bytes(decoded.signature[:size], "big")
            s = int.from_bytes(decoded.signature[size:], "big")
            key.verify(encode_dss_signature(r, s), decoded.signing_input, ec.ECDSA(digest))
    except InvalidSignature as exc:
        raise JWTInvalid("invalid signature") from exc
    claims = decoded.claims
    at = time.time() if now is None else now
    if "exp" in claims and (not isinstance(claims["exp"], int | float) or at >= claims["exp"]):
        raise JWTInvalid("jwt expired")
    if "nbf" in claims and (not isinstance(claims["nbf"], int | float) or at < claims["nbf"]):
        raise JWTInvalid("jwt not active")
    if issuer and claims.get("iss") != issuer:
        raise JWTInvalid(f"jwt issuer invalid. expected: {issuer}")
    return claims


def verify_any(
    decoded: Decoded, keys: Sequence[PublicKey], *, issuer: str | None = None, now: float | None = None
) -> dict[str, Any]:
    """Try each key (a token without ``kid``, or static keys); the last refusal if none verifies.

    A refusal that is not about the signature (expired, wrong issuer) is the answer at once: the
    key was right."""
    last = JWTInvalid("invalid signature")
    for key in keys:
        try:
            return verify(decoded, key, issuer=issuer, now=now)
        except JWTInvalid as exc:
            if str(exc) not in ("invalid signature", "invalid algorithm"):
                raise
            last = exc
    raise last

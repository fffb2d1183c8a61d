"""OIDC and JWT auth logins: verify a JWT against an issuer's public keys, as the real service does.

OIDC auth fetches ``{oidcDiscoveryUrl}/.well-known/openid-configuration``, then its ``jwks_uri``,
and verifies the token with the key its ``kid`` names (every key, at most 10, without one), the
issuer checked during verification. JWT auth uses ``jwksUrl`` or the static ``publicKeys`` (PEM)
and checks the issuer afterwards. Then both check ``boundSubject``, ``boundAudiences`` (", "
separated) and ``boundClaims`` (dot paths, ", " separated alternatives), globs allowed. The
refusals and their status codes are the real service's (401 UnauthorizedError, or 403 for a
subject or, in JWT auth, an issuer that does not match), so a client can tell them apart.

Unlike the real service, private and loopback addresses are allowed for discovery (the dev cluster's
apiserver is one); a CA bundle (``caCert``/``jwksCaCert``) is trusted for https. Nothing is cached:
every login fetches the keys again, so a rotated signing key is seen at once.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx

from secretferry.devserver import globs, jwtverify
from secretferry.devserver.errors import PermissionDenied, Unauthorized

FETCH_TIMEOUT_SECONDS = 10.0
MAX_KEYS_TO_TRY = 10  # the real service's limit for a token without kid


async def verify_oidc(config: dict[str, Any], token: str, *, now: float) -> dict[str, Any]:
    """The verified claims of ``token`` under the stored OIDC-auth document ``config``."""
    base = str(config.get("oidcDiscoveryUrl") or "").rstrip("/")
    ca_cert = str(config.get("_caCert") or "")
    try:
        discovery = await _get_json(f"{base}/.well-known/openid-configuration", ca_cert)
    except (httpx.HTTPError, ValueError) as exc:
        raise Unauthorized(
            f"Access denied: Failed to fetch OIDC discovery document from {base}. {_what(exc)}"
        ) from exc
    jwks_uri = str(discovery.get("jwks_uri") or "")
    if not jwks_uri:
        raise Unauthorized(
            "Access denied: OIDC discovery document does not contain a jwks_uri. The identity "
            "provider may be misconfigured."
        )
    decoded = _decode(token)
    keys = await _jwks_keys(jwks_uri, ca_cert, kid=decoded.header.get("kid"), oidc=True)
    issuer = str(config.get("boundIssuer") or "") or None
    try:
        claims = jwtverify.verify_any(decoded, keys, issuer=issuer, now=now)
    except jwtverify.JWTInvalid as exc:
        raise Unauthorized(f"Access denied: {exc}") from exc
    if config.get("boundSubject") and not _matches(claims.get("sub"), str(config["boundSubject"])):
        raise PermissionDenied("Access denied: OIDC subject not allowed.")
    if config.get("boundAudiences") and not _any_policy(claims.get("aud"), str(config["boundAudiences"])):
        raise Unauthorized("Access denied: OIDC audience not allowed.")
    _check_claims(config, claims, mismatch=lambda _key: "Access denied: OIDC claim not allowed.")
    return claims


async def verify_jwt(config: dict[str, Any], token: str, *, now: float) -> dict[str, Any]:
    """The verified claims of ``token`` under the stored JWT-auth document ``config``."""
    decoded = _decode(token)
    if config.get("configurationType") == "jwks":
        keys = await _jwks_keys(
            str(config.get("jwksUrl") or ""),
            str(config.get("_jwksCaCert") or ""),
            kid=decoded.header.get("kid"),
            oidc=False,
        )
        try:
            claims = jwtverify.verify_any(decoded, keys, now=now)
        except jwtverify.JWTInvalid as exc:
            raise Unauthorized(f"Access denied: {exc}") from exc
    else:
        errors: list[str] = []
        claims = {}
        for pem in config.get("_publicKeys") or []:
            try:
                claims = jwtverify.verify(decoded, jwtverify.key_from_pem(str(pem)), now=now)
                break
            except jwtverify.JWTInvalid as exc:
                errors.append(str(exc))
        else:
            raise Unauthorized(
                f"Access denied: JWT verification failed with all keys. Errors - {'; '.join(errors)}"
            )
    if config.get("boundIssuer") and claims.get("iss") != config["boundIssuer"]:
        raise PermissionDenied("Access denied: issuer mismatch")
    if config.get("boundSubject"):
        if not claims.get("sub"):
            raise Unauthorized("Access denied: token has no subject field")
        if not _matches(claims.get("sub"), str(config["boundSubject"])):
            raise PermissionDenied("Access denied: subject not allowed")
    if config.get("boundAudiences"):
        if not claims.get("aud"):
            raise Unauthorized("Access denied: token has no audience field")
        if not _any_policy(claims.get("aud"), str(config["boundAudiences"])):
            raise Unauthorized("Access denied: token audience not allowed")
    _check_claims(config, claims, mismatch=lambda key: f"Access denied: claim mismatch for field {key}")
    return claims


def _decode(token: str) -> jwtverify.Decoded:
    try:
        return jwtverify.decode(token)
    except jwtverify.JWTInvalid as exc:
        raise Unauthorized("Invalid JWT") from exc


async def _jwks_keys(url: str, ca_cert: str, *, kid: Any, oidc: bool) -> list[jwtverify.PublicKey]:
    """The keys to try: the one ``kid`` names (a refusal when absent), or all of them."""
    source = "the OIDC provider" if oidc else "the JWKS URL"
    try:
        document = await _get_json(url, ca_cert)
    except (httpx.HTTPError, ValueError) as exc:
        raise Unauthorized(
            f"Access denied: Failed to retrieve signing key from {source}: {_what(exc)}"
        ) from exc
    entries = [k for k in document.get("keys") or [] if isinstance(k, dict)]
    if kid is not None:
        entries = [k for k in entries if k.get("kid") == kid]
        if not entries:
            raise Unauthorized(
                f"Access denied: Unable to verify JWT signature. The signing key '{kid}' was not found "
                f"in {source}'s JWKS endpoint. This may indicate an invalid token or misconfigured "
                "OIDC provider."
            )
    elif not entries:
        raise Unauthorized(f"Access denied: No signing keys available from {source}'s JWKS endpoint.")
    elif len(entries) > MAX_KEYS_TO_TRY:
        raise Unauthorized(
            f"Access denied: OIDC provider has {len(entries)} signing keys. Tokens must include 'kid' "
            f"header when provider has more than {MAX_KEYS_TO_TRY} keys."
        )
    keys = []
    for entry in entries:
        try:
            keys.append(jwtverify.key_from_jwk(entry))
        except jwtverify.JWTInvalid:
            continue  # a key of a type we cannot use is skipped, as jwks-rsa skips it
    return keys


async def _get_json(url: str, ca_cert: str) -> dict[str, Any]:
    verify: ssl.SSLContext | bool = ssl.create_default_context(cadata=ca_cert) if ca_cert else True
    async with httpx.AsyncClient(verify=verify, timeout=FETCH_TIMEOUT_SECONDS) as client:
        response = await client.get(url)
    response.raise_for_status()
    body = response.json()
    if not isinstance(body, dict):
        raise ValueError("not a JSON object")
    return body


def _what(exc: Exception) -> str:
    if isinstance(exc, httpx.HTTPStatusError):
        return f"Request failed with status code {exc.response.status_code}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _matches(value: Any, policy: str) -> bool:
    """One policy entry against a claim value (a list matches when any element does)."""
    values = value if isinstance(value, list) else [value]
    policy = policy.strip()
    return any(v is not None and globs.glob_match(policy, str(v)) for v in values)


def _any_policy(value: Any, policies: str) -> bool:
    return any(_matches(value, p) for p in policies.split(", ") if p.strip())


def _claim(claims: dict[str, Any], dotted: str) -> Any:
    value: Any = claims
    for part in dotted.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _check_claims(config: dict[str, Any], claims: dict[str, Any], *, mismatch: Any) -> None:
    for key, allowed in (config.get("boundClaims") or {}).items():
        value = _claim(claims, str(key))
        if not value:
            raise Unauthorized(f"Access denied: token has no {key} field")
        if not _any_policy(value, str(allowed)):
            raise Unauthorized(mismatch(key))

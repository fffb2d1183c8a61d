"""OIDC and JWT auth at the dev server: attach/get/update/revoke, and logins verified for real.

JWT auth with static keys needs no network, so the verification rules (signature, expiry, bound
issuer/subject/audience/claims, a key rotated out) are proven here on signed tokens; OIDC discovery
and JWKS against a real apiserver are proven in tests/integration/operator/test_operator_oidc.py.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from devserver_fixtures import ADMIN, ADMIN_ID, T0, VIEWER, VIEWER_ID

from secretferry.devserver import jwtverify

JWT_ROUTE = f"/api/v1/auth/jwt-auth/identities/{ADMIN_ID}"
OIDC_ROUTE = f"/api/v1/auth/oidc-auth/identities/{ADMIN_ID}"
LOGIN = "/api/v1/auth/jwt-auth/login"
ISSUER = "https://kubernetes.default.svc.cluster.local"
SUBJECT = "system:serviceaccount:team-a:robot"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


KEY, OTHER_KEY = _key(), _key()


def _pem(key: rsa.RSAPrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def sign(key: rsa.RSAPrivateKey, **claims: Any) -> str:
    body = {"iss": ISSUER, "sub": SUBJECT, "aud": ["secretferry"], "iat": T0, "exp": T0 + 600, **claims}
    head = _b64(json.dumps({"alg": "RS256", "kid": "k1"}).encode())
    payload = _b64(json.dumps(body).encode())
    signature = key.sign(f"{head}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{head}.{payload}.{_b64(signature)}"


def _attach_body(**extra: Any) -> dict[str, Any]:
    return {
        "configurationType": "static",
        "publicKeys": [_pem(KEY)],
        "boundIssuer": ISSUER,
        "boundAudiences": "secretferry , other",
        "boundSubject": "system:serviceaccount:team-a:*",
        "boundClaims": {"ns.name": "team-a"},
        **extra,
    }


async def _attached(client: httpx.AsyncClient, **extra: Any) -> dict[str, Any]:
    r = await client.post(JWT_ROUTE, json=_attach_body(**extra), headers=ADMIN)
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()["identityJwtAuth"]
    return doc


async def test_attach_get_update_revoke(client: httpx.AsyncClient) -> None:
    doc = await _attached(client)
    assert doc["boundAudiences"] == "secretferry, other"  # normalised like the real schema
    assert doc["publicKeys"] == [_pem(KEY)] and doc["identityId"] == ADMIN_ID
    again = await client.post(JWT_ROUTE, json=_attach_body(), headers=ADMIN)
    assert again.status_code == 400
    assert again.json()["message"] == "Failed to add JWT Auth to already configured identity"

    got = await client.get(JWT_ROUTE, headers=ADMIN)
    assert got.json()["identityJwtAuth"]["boundSubject"] == "system:serviceaccount:team-a:*"
    patched = await client.patch(JWT_ROUTE, json={"boundSubject": SUBJECT}, headers=ADMIN)
    assert patched.json()["identityJwtAuth"]["boundSubject"] == SUBJECT
    bad = await client.patch(JWT_ROUTE, json={"accessTokenTTL": 10, "accessTokenMaxTTL": 5}, headers=ADMIN)
    assert (
        bad.status_code == 400 and bad.json()["message"] == "Access token TTL cannot be greater than max TTL"
    )

    assert (await client.delete(JWT_ROUTE, headers=ADMIN)).status_code == 200
    gone = await client.get(JWT_ROUTE, headers=ADMIN)
    assert (
        gone.status_code == 400 and gone.json()["message"] == "The identity does not have JWT Auth attached"
    )
    login = await client.post(LOGIN, json={"identityId": ADMIN_ID, "jwt": sign(KEY)})
    assert login.status_code == 404
    assert login.json()["message"] == "JWT auth method not found for identity, did you configure JWT auth?"


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"configurationType": "static", "publicKeys": []}, 422),
        ({"configurationType": "jwks", "jwksUrl": "not a url"}, 422),
        ({"configurationType": "other"}, 422),
    ],
)
async def test_attach_is_validated(client: httpx.AsyncClient, body: dict[str, Any], status: int) -> None:
    r = await client.post(JWT_ROUTE, json=body, headers=ADMIN)
    assert r.status_code == status


async def test_only_an_org_admin_manages_the_methods(client: httpx.AsyncClient) -> None:
    body = {"oidcDiscoveryUrl": "https://issuer.example", "boundIssuer": "https://issuer.example"}
    viewer_route = f"/api/v1/auth/oidc-auth/identities/{VIEWER_ID}"
    refused = await client.post(OIDC_ROUTE, json=body, headers=VIEWER)
    assert refused.status_code == 403  # a member cannot point the admin's login at its own issuer
    assert (await client.post(viewer_route, json=body, headers=ADMIN)).status_code == 200
    got = await client.get(viewer_route, headers=ADMIN)
    assert (
        got.json()["identityOidcAuth"]["caCert"] == ""
        and got.json()["identityOidcAuth"]["boundSubject"] == ""
    )
    assert (await client.post(OIDC_ROUTE, json={"boundIssuer": "x"}, headers=ADMIN)).status_code == 422


@pytest.mark.parametrize(
    ("token", "status", "message"),
    [
        (lambda: sign(KEY), 200, None),
        (
            lambda: sign(KEY, exp=T0 - 1),
            401,
            "Access denied: JWT verification failed with all keys. Errors - jwt expired",
        ),
        (
            lambda: sign(OTHER_KEY),
            401,
            "Access denied: JWT verification failed with all keys. Errors - invalid signature",
        ),
        (lambda: sign(KEY, aud=["kubernetes"]), 401, "Access denied: token audience not allowed"),
        (
            lambda: sign(KEY, sub="system:serviceaccount:team-b:robot"),
            403,
            "Access denied: subject not allowed",
        ),
        (lambda: sign(KEY, iss="https://elsewhere"), 403, "Access denied: issuer mismatch"),
        (
            lambda: sign(KEY, ns={"name": "team-b"}),
            401,
            "Access denied: claim mismatch for field ns.name",
        ),
        (lambda: "not-a-jwt", 401, "Invalid JWT"),
    ],
    ids=["ok", "expired", "other-key", "audience", "subject", "issuer", "claim", "garbage"],
)
async def test_jwt_login_enforces_every_binding(
    client: httpx.AsyncClient, token: Any, status: int, message: str | None
) -> None:
    await _attached(client, boundClaims={})
    if message and "claim" in message:
        await client.patch(JWT_ROUTE, json={"boundClaims": {"ns.name": "team-a"}}, headers=ADMIN)
    r = await client.post(LOGIN, json={"identityId": ADMIN_ID, "jwt": token()})
    assert r.status_code == status, r.text
    if message is None:
        assert r.json()["accessToken"] and r.json()["tokenType"] == "Bearer"
    else:
        assert r.json()["message"] == message


async def test_a_rotated_key_is_seen_at_the_next_login(client: httpx.AsyncClient) -> None:
    await _attached(client, boundClaims={})
    assert (await client.post(LOGIN, json={"identityId": ADMIN_ID, "jwt": sign(KEY)})).status_code == 200
    await client.patch(JWT_ROUTE, json={"publicKeys": [_pem(OTHER_KEY)]}, headers=ADMIN)
    assert (await client.post(LOGIN, json={"identityId": ADMIN_ID, "jwt": sign(KEY)})).status_code == 401
    assert (
        await client.post(LOGIN, json={"identityId": ADMIN_ID, "jwt": sign(OTHER_KEY)})
    ).status_code == 200


def test_verify_refuses_none_and_hmac() -> None:
    token = sign(KEY)
    _head, payload, sig = token.split(".")
    for alg in ("none", "HS256"):
        forged = _b64(json.dumps({"alg": alg}).encode())
        with pytest.raises(jwtverify.JWTInvalid, match="invalid algorithm"):
            jwtverify.verify(
                jwtverify.decode(f"{forged}.{payload}.{sig}"), jwtverify.key_from_pem(_pem(KEY)), now=T0
            )
    claims = jwtverify.verify(jwtverify.decode(token), jwtverify.key_from_pem(_pem(KEY)), now=T0)
    assert claims["sub"] == SUBJECT

"""OIDC and JWT auth: attach, update, get, revoke and login (``/api/v1/auth/{oidc,jwt}-auth/...``).

The real routes, bodies and answers: attach (POST) refuses a second attach with 400, update
(PATCH) and get (GET) need the method attached (400), revoke (DELETE) removes it and revokes its
access tokens; only an admin of the identity's organization manages them. The stored documents
keep the CA bundles and public keys in private ``_`` fields, returned as ``caCert``,
``jwksCaCert`` and ``publicKeys`` the way the real service decrypts them into its answers.
Verification itself is in ``oidc_jwt_login``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from secretferry.devserver import identity_store, oidc_jwt_login
from secretferry.devserver.auth import CallerDep, StateDep, issue_for
from secretferry.devserver.errors import ApiError, BadRequest, NotFound
from secretferry.devserver.identity_store import public
from secretferry.devserver.state import DevState
from secretferry.devserver.store import new_id
from secretferry.devserver.timeutil import iso
from secretferry.devserver.tokens import login_response

router = APIRouter()

_MAX_TTL = 315_360_000  # the real schema's upper bound for TTLs (10 years)
_PRIVATE = {"caCert": "_caCert", "jwksCaCert": "_jwksCaCert", "publicKeys": "_publicKeys"}


def _comma_list(value: str) -> str:
    """``validateOidcAuthAudiencesField``: entries trimmed, empty ones dropped, joined by ", "."""
    return ", ".join(part.strip() for part in value.split(",") if part.strip())


def _claims(value: dict[str, str]) -> dict[str, str]:
    return {k: _comma_list(v) for k, v in value.items()}


CommaList = Annotated[str, AfterValidator(_comma_list)]
Claims = Annotated[dict[str, str], AfterValidator(_claims)]
Ttl = Annotated[int, Field(ge=0, le=_MAX_TTL)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Login(_Body):
    identityId: Annotated[str, Field(min_length=1)]
    jwt: Annotated[str, Field(min_length=1)]
    organizationSlug: str | None = None


class _TokenLimits(_Body):
    accessTokenTTL: Ttl = identity_store.DEFAULT_TTL_SECONDS
    accessTokenMaxTTL: Ttl = identity_store.DEFAULT_TTL_SECONDS
    accessTokenNumUsesLimit: Annotated[int, Field(ge=0)] = identity_store.DEFAULT_NUM_USES


class OidcAttach(_TokenLimits):
    oidcDiscoveryUrl: Annotated[str, Field(min_length=1, pattern=r"^https?://")]
    caCert: str = ""
    boundIssuer: Annotated[str, Field(min_length=1)]
    boundAudiences: CommaList = ""
    boundClaims: Claims = Field(default_factory=dict)
    boundSubject: str = ""


class OidcUpdate(_Body):
    oidcDiscoveryUrl: Annotated[str, Field(min_length=1, pattern=r"^https?://")] | None = None
    caCert: str | None = None
    boundIssuer: Annotated[str, Field(min_length=1)] | None = None
    boundAudiences: CommaList | None = None
    boundClaims: Claims | None = None
    boundSubject: str | None = None
    accessTokenTTL: Ttl | None = None
    accessTokenMaxTTL: Ttl | None = None
    accessTokenNumUsesLimit: Annotated[int, Field(ge=0)] | None = None


class JwtAttach(_TokenLimits):
    configurationType: Literal["jwks", "static"]
    jwksUrl: str = ""
    jwksCaCert: str = ""
    publicKeys: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    boundIssuer: str = ""
    boundAudiences: CommaList = ""
    boundClaims: Claims = Field(default_factory=dict)
    boundSubject: str = ""

    @model_validator(mode="after")
    def _source(self) -> JwtAttach:
        _check_jwt_source(self.configurationType, self.jwksUrl, self.publicKeys)
        return self


class JwtUpdate(_Body):
    configurationType: Literal["jwks", "static"] | None = None
    jwksUrl: str | None = None
    jwksCaCert: str | None = None
    publicKeys: list[Annotated[str, Field(min_length=1)]] | None = None
    boundIssuer: str | None = None
    boundAudiences: CommaList | None = None
    boundClaims: Claims | None = None
    boundSubject: str | None = None
    accessTokenTTL: Ttl | None = None
    accessTokenMaxTTL: Ttl | None = None
    accessTokenNumUsesLimit: Annotated[int, Field(ge=0)] | None = None


def _check_jwt_source(kind: str, jwks_url: str, public_keys: list[str]) -> None:
    """The real schema's refinement: a JWKS configuration needs a URL, a static one keys."""
    if kind == "jwks" and not jwks_url.startswith(("http://", "https://")):
        raise ValueError("Invalid JWKS URI")
    if kind == "static" and not public_keys:
        raise ValueError("Public keys are required for static configuration")


# --- OIDC ------------------------------------------------------------------------------------------


@router.post("/api/v1/auth/oidc-auth/login")
async def oidc_login(body: Login, state: StateDep) -> dict[str, Any]:
    config = _login_config(state, body.identityId, identity_store.OIDC, "OIDC")
    await _counted(state, oidc_jwt_login.verify_oidc(config, body.jwt, now=_token_clock(state)))
    return login_response(issue_for(state, body.identityId, identity_store.OIDC, config), state.now())


@router.post("/api/v1/auth/oidc-auth/identities/{identityId}")
async def oidc_attach(
    identityId: str, body: OidcAttach, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    return {
        "identityOidcAuth": _attach(state, caller.identity_id, identityId, identity_store.OIDC, "OIDC", body)
    }


@router.patch("/api/v1/auth/oidc-auth/identities/{identityId}")
async def oidc_update(
    identityId: str, body: OidcUpdate, caller: CallerDep, state: StateDep
) -> dict[str, Any]:
    return {
        "identityOidcAuth": _update(state, caller.identity_id, identityId, identity_store.OIDC, "OIDC", body)
    }


@router.get("/api/v1/auth/oidc-auth/identities/{identityId}")
async def oidc_get(identityId: str, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    return {
        "identityOidcAuth": _wire(
            _attached(state, caller.identity_id, identityId, identity_store.OIDC, "OIDC")
        )
    }


@router.delete("/api/v1/auth/oidc-auth/identities/{identityId}")
async def oidc_revoke(identityId: str, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    return {"identityOidcAuth": _revoke(state, caller.identity_id, identityId, identity_store.OIDC, "OIDC")}


# --- JWT -------------------------------------------------------------------------------------------


@router.post("/api/v1/auth/jwt-auth/login")
async def jwt_login(body: Login, state: StateDep) -> dict[str, Any]:
    config = _login_config(state, body.identityId, identity_store.JWT, "JWT")
    await _counted(state, oidc_jwt_login.verify_jwt(config, body.jwt, now=_token_clock(state)))
    return login_response(issue_for(state, body.identityId, identity_store.JWT, config), state.now())


@router.post("/api/v1/auth/jwt-auth/identities/{identityId}")
async def jwt_attach(identityId: str, body: JwtAttach, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    return {
        "identityJwtAuth": _attach(state, caller.identity_id, identityId, identity_store.JWT, "JWT", body)
    }


@router.patch("/api/v1/auth/jwt-auth/identities/{identityId}")
async def jwt_update(identityId: str, body: JwtUpdate, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    return {
        "identityJwtAuth": _update(state, caller.identity_id, identityId, identity_store.JWT, "JWT", body)
    }


@router.get("/api/v1/auth/jwt-auth/identities/{identityId}")
async def jwt_get(identityId: str, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    return {
        "identityJwtAuth": _wire(_attached(state, caller.identity_id, identityId, identity_store.JWT, "JWT"))
    }


@router.delete("/api/v1/auth/jwt-auth/identities/{identityId}")
async def jwt_revoke(identityId: str, caller: CallerDep, state: StateDep) -> dict[str, Any]:
    return {"identityJwtAuth": _revoke(state, caller.identity_id, identityId, identity_store.JWT, "JWT")}


# --- shared ----------------------------------------------------------------------------------------


def _login_config(state: DevState, identity_id: str, method: str, label: str) -> dict[str, Any]:
    config = state.identities.auth(identity_id, method)
    if config is None:
        state.stats.counters["loginFailures"] += 1
        raise NotFound(f"{label} auth method not found for identity, did you configure {label} auth?")
    return config


async def _counted(state: DevState, verification: Any) -> None:
    try:
        await verification
    except ApiError:
        state.stats.counters["loginFailures"] += 1
        raise


def _token_clock(state: DevState) -> float:
    """When a token's ``exp``/``nbf`` are judged: now, or later by the ``jwtClockSkewSeconds``
    fault, so a test can see a real ServiceAccount token expire without waiting 10 minutes."""
    return state.now() + state.faults.current.jwt_clock_skew_seconds


def _managed(state: DevState, caller_id: str, identity_id: str) -> None:
    identity = state.identities.identity(identity_id)
    if identity is None:
        raise NotFound(f"Failed to find identity with ID {identity_id}")
    state.permissions.require_org_admin(caller_id, identity.org_id)


def _attached(state: DevState, caller_id: str, identity_id: str, method: str, label: str) -> dict[str, Any]:
    _managed(state, caller_id, identity_id)
    doc = state.identities.auth(identity_id, method)
    if doc is None:
        raise BadRequest(f"The identity does not have {label} Auth attached")
    return doc


def _check_ttls(doc: dict[str, Any]) -> None:
    max_ttl = int(doc["accessTokenMaxTTL"])
    if max_ttl > 0 and int(doc["accessTokenTTL"]) > max_ttl:
        raise BadRequest("Access token TTL cannot be greater than max TTL")


def _attach(
    state: DevState, caller_id: str, identity_id: str, method: str, label: str, body: BaseModel
) -> dict[str, Any]:
    _managed(state, caller_id, identity_id)
    if state.identities.auth(identity_id, method) is not None:
        raise BadRequest(f"Failed to add {label} Auth to already configured identity")
    doc = stored_doc(identity_id, body, now=state.now())
    state.identities.put_auth(identity_id, method, doc)
    return _wire(doc)


def stored_doc(identity_id: str, body: BaseModel, *, now: float) -> dict[str, Any]:
    """The stored document of a validated attach body (also what a seed's ``oidcAuth``/``jwtAuth``
    becomes); raises 400 when the TTL exceeds the max TTL."""
    at = iso(now)
    doc: dict[str, Any] = {"id": new_id(), "identityId": identity_id, "createdAt": at, "updatedAt": at}
    doc |= {_PRIVATE.get(k, k): v for k, v in body.model_dump().items()}
    doc["accessTokenTrustedIps"] = [{"ipAddress": "0.0.0.0/0"}]
    _check_ttls(doc)
    return doc


def _update(
    state: DevState, caller_id: str, identity_id: str, method: str, label: str, body: BaseModel
) -> dict[str, Any]:
    _managed(state, caller_id, identity_id)
    doc = state.identities.auth(identity_id, method)
    if doc is None:
        raise BadRequest(f"Failed to update {label} Auth")
    doc |= {_PRIVATE.get(k, k): v for k, v in body.model_dump(exclude_none=True).items()}
    _check_ttls(doc)
    if method == identity_store.JWT:
        try:
            _check_jwt_source(str(doc["configurationType"]), str(doc["jwksUrl"]), list(doc["_publicKeys"]))
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
    doc["updatedAt"] = iso(state.now())
    state.identities.put_auth(identity_id, method, doc)
    return _wire(doc)


def _revoke(state: DevState, caller_id: str, identity_id: str, method: str, label: str) -> dict[str, Any]:
    _managed(state, caller_id, identity_id)
    doc = state.identities.remove_auth(identity_id, method)
    if doc is None:
        raise BadRequest(f"The identity does not have {label} auth")
    return _wire(doc)


def _wire(doc: dict[str, Any]) -> dict[str, Any]:
    """The answer's form: the private CA bundles and keys under their public names."""
    shown = public(doc)
    for name, private in _PRIVATE.items():
        if private in doc:
            shown[name] = doc[private]
    return shown

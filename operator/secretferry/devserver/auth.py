"""Who is calling: Bearer-token authentication, and the two machine-identity logins.

Token failures answer 401, or 403 ``TokenError`` when the server is configured like newer real
servers (``--token-error-status 403``); clients must treat both as "log in again".
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request

from secretferry.devserver import identity_store, tokenreview
from secretferry.devserver.errors import ApiError, NotFound, Unauthorized
from secretferry.devserver.state import DevState, get_state
from secretferry.devserver.tokens import TokenInfo, TokenInvalid

# Universal-auth lockout defaults (docs/service-contract.md: 3 failures → locked for 300 s).
LOCKOUT_THRESHOLD = 3
LOCKOUT_DURATION_SECONDS = 300
LOCKOUT_COUNTER_RESET_SECONDS = 30


@dataclass(frozen=True)
class Caller:
    identity_id: str
    token: str


def token_error(state: DevState, reason: str) -> ApiError:
    if state.config.token_error_status == 403:
        return ApiError(reason, name="TokenError", status=403)
    return Unauthorized(reason)


def bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def use_token(state: DevState, token: str) -> TokenInfo:
    """Validate and count one use of ``token``."""
    try:
        return state.tokens.use(token, state.now())
    except TokenInvalid as exc:
        raise token_error(state, exc.reason) from exc


def authenticate(request: Request, state: Annotated[DevState, Depends(get_state)]) -> Caller:
    """The caller of a service route; every one needs a token, as on the real service.

    Only the logins and token renew/revoke go without (their body carries the credential); the
    route-guard unit test fails for any other route that answers without a token.
    """
    token = bearer(request)
    if token is None:
        raise Unauthorized("Missing Authorization header with a Bearer access token")
    info = use_token(state, token)
    return Caller(info.identity_id, info.token)


CallerDep = Annotated[Caller, Depends(authenticate)]
StateDep = Annotated[DevState, Depends(get_state)]


def issue_for(state: DevState, identity_id: str, method: str, config: dict[str, Any]) -> TokenInfo:
    """An access token for a login with ``method``, under the limits of its ``config``."""
    ttl = int(config.get("accessTokenTTL", identity_store.DEFAULT_TTL_SECONDS))
    max_ttl = int(config.get("accessTokenMaxTTL", identity_store.DEFAULT_TTL_SECONDS))
    uses = int(config.get("accessTokenNumUsesLimit", identity_store.DEFAULT_NUM_USES))
    return state.tokens.issue(identity_id, method, state.now(), ttl=ttl, max_ttl=max_ttl, uses_limit=uses)


def universal_login(state: DevState, client_id: str, client_secret: str) -> TokenInfo:
    config = state.identities.universal_by_client_id(client_id)
    if config is None:
        state.stats.counters["loginFailures"] += 1
        if state.config.unknown_client_id_status == 404:  # the 2024-10 release's answer
            raise NotFound("No identity with specified client ID was found")
        raise Unauthorized("Invalid credentials")
    now = state.now()
    lockout = config.get("lockoutEnabled", True)
    row = state.db.one("SELECT * FROM lockouts WHERE client_id = ?", (client_id,))
    if lockout and row is not None and row["locked_until"] > now:
        state.stats.counters["loginFailures"] += 1
        raise Unauthorized("This identity auth method is temporarily locked, please try again later")
    if config.get("_clientSecret") != client_secret:
        state.stats.counters["loginFailures"] += 1
        if lockout:
            _count_failure(state, config, client_id, now, row)
        raise Unauthorized("Invalid credentials")
    state.db.execute("DELETE FROM lockouts WHERE client_id = ?", (client_id,))
    return issue_for(state, str(config["identityId"]), identity_store.UNIVERSAL, config)


def _count_failure(state: DevState, config: dict[str, Any], client_id: str, now: float, row: Any) -> None:
    threshold = int(config.get("lockoutThreshold", LOCKOUT_THRESHOLD))
    duration = float(config.get("lockoutDurationSeconds", LOCKOUT_DURATION_SECONDS))
    reset = float(config.get("lockoutCounterResetSeconds", LOCKOUT_COUNTER_RESET_SECONDS))
    failures, first = (
        (1, now)
        if row is None or now - row["first_failure"] > reset
        else (row["failures"] + 1, row["first_failure"])
    )
    locked_until = now + duration if failures >= threshold else 0.0
    state.db.execute(
        "INSERT OR REPLACE INTO lockouts (client_id, failures, first_failure, locked_until) "
        "VALUES (?, ?, ?, ?)",
        (client_id, 0 if locked_until else failures, first, locked_until),
    )


async def kubernetes_login(state: DevState, identity_id: str, jwt: str) -> TokenInfo:
    config = state.identities.auth(identity_id, identity_store.KUBERNETES)
    if config is None:
        state.stats.counters["loginFailures"] += 1
        raise NotFound(f"Kubernetes auth method not found for identity with ID {identity_id}")
    # The real service accepts a still-valid jwt twice; the dev server counts reuse so that tests
    # can prove a client mints a fresh ServiceAccount token for every login (only digests kept).
    digest = hashlib.sha256(jwt.encode()).hexdigest()
    if digest in state.seen_jwts:
        state.stats.counters["reusedJwts"] += 1
    state.seen_jwts.add(digest)
    try:
        status = await tokenreview.review(
            config,
            jwt,
            send_audiences=state.config.tokenreview_audiences,
            verify_without_ca=state.config.tokenreview_verify_without_ca,
        )
        tokenreview.check(config, status)
    except ApiError:
        state.stats.counters["loginFailures"] += 1
        raise
    return issue_for(state, identity_id, identity_store.KUBERNETES, config)

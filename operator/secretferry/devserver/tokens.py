"""Access tokens: issue, check (each check is one use), renew, revoke, force-expire.

Tokens live in SQLite so that a restarted dev server still honours them, like the real service.
Rules (docs/service-contract.md): a token dies at ``renewed_at + ttl``, at ``created_at + max_ttl`` and
once ``uses_limit`` uses are spent (0 = unlimited); every authenticated request is a use.

Renewal follows the real server (``renewAccessToken``, every generation to date): it is refused
when the renewed lifetime would pass the max TTL (``now + ttl > created_at + max_ttl``), not only
once the max TTL is over, and the refused token is deleted, so the revoke a client may send after
it finds no token. With ttl = max_ttl (the default) a token can never be renewed.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from secretferry.devserver import db as dbm

RENEW_PAST_MAX_TTL = "Failed to renew MI access token past its Max TTL expiration"


class TokenInvalid(Exception):
    """The presented token cannot be used; ``reason`` names why (never the token itself)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class TokenInfo:
    token: str
    identity_id: str
    method: str
    created_at: float
    renewed_at: float
    ttl: int
    max_ttl: int
    uses_limit: int
    uses: int
    revoked: bool

    def expires_in(self, now: float) -> int:
        """Seconds left until the earlier of TTL and max TTL (0 = never, reported as the TTL)."""
        limits = []
        if self.ttl > 0:
            limits.append(self.renewed_at + self.ttl - now)
        if self.max_ttl > 0:
            limits.append(self.created_at + self.max_ttl - now)
        return max(0, int(min(limits))) if limits else 0

    def problem(self, now: float) -> str | None:
        if self.revoked:
            return "Access token has been revoked"
        if self.max_ttl > 0 and now >= self.created_at + self.max_ttl:
            return "Access token has reached its maximum TTL"
        if self.ttl > 0 and now >= self.renewed_at + self.ttl:
            return "Access token has expired"
        if self.uses_limit > 0 and self.uses >= self.uses_limit:
            return "Access token has reached its use limit"
        return None


def _info(row: dbm.Row) -> TokenInfo:
    return TokenInfo(
        token=row["token"],
        identity_id=row["identity_id"],
        method=row["method"],
        created_at=row["created_at"],
        renewed_at=row["renewed_at"],
        ttl=row["ttl"],
        max_ttl=row["max_ttl"],
        uses_limit=row["uses_limit"],
        uses=row["uses"],
        revoked=bool(row["revoked"]),
    )


class Tokens:
    def __init__(self, database: dbm.Database) -> None:
        self.db = database

    def issue(
        self,
        identity_id: str,
        method: str,
        now: float,
        *,
        ttl: int,
        max_ttl: int,
        uses_limit: int,
        token: str | None = None,
    ) -> TokenInfo:
        value = token or "sfdev." + secrets.token_urlsafe(32)
        self.db.execute(
            "INSERT OR REPLACE INTO tokens (token, identity_id, method, created_at, renewed_at, ttl, "
            "max_ttl, "
            "uses_limit, uses, revoked) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 0)",
            (value, identity_id, method, now, now, ttl, max_ttl, uses_limit),
        )
        info = self.get(value)
        assert info is not None
        return info

    def get(self, token: str) -> TokenInfo | None:
        row = self.db.one("SELECT * FROM tokens WHERE token = ?", (token,))
        return _info(row) if row else None

    def use(self, token: str, now: float) -> TokenInfo:
        """Validate and count one use; raises ``TokenInvalid``."""
        info = self.get(token)
        if info is None:
            raise TokenInvalid("Invalid access token")
        problem = info.problem(now)
        if problem is not None:
            raise TokenInvalid(problem)
        self.db.execute("UPDATE tokens SET uses = uses + 1 WHERE token = ?", (token,))
        return info

    def renew(self, token: str, now: float) -> TokenInfo:
        """Renew ``token``; raises ``TokenInvalid`` (and deletes it) past the max TTL rule."""
        info = self.use(token, now)
        if info.max_ttl > 0 and now + info.ttl > info.created_at + info.max_ttl:
            self.db.execute("DELETE FROM tokens WHERE token = ?", (token,))
            raise TokenInvalid(RENEW_PAST_MAX_TTL)
        self.db.execute("UPDATE tokens SET renewed_at = ? WHERE token = ?", (now, token))
        renewed = self.get(token)
        assert renewed is not None and info.token == renewed.token
        return renewed

    def revoke(self, token: str) -> bool:
        return self.db.execute("UPDATE tokens SET revoked = 1 WHERE token = ?", (token,)) > 0

    def live_by_identity(self, now: float) -> dict[str, int]:
        """Tokens that would still be accepted now, counted per identity (tests and benchmarks:
        a client that replaces tokens without revoking them leaves a trail of live ones)."""
        counts: dict[str, int] = {}
        for row in self.db.all("SELECT * FROM tokens WHERE revoked = 0"):
            info = _info(row)
            if info.problem(now) is None:
                counts[info.identity_id] = counts.get(info.identity_id, 0) + 1
        return counts

    def expire_identity(self, identity_id: str) -> int:
        """Make every token of the identity expired now (tests of re-login)."""
        return self.db.execute(
            "UPDATE tokens SET ttl = 1, renewed_at = 0 WHERE identity_id = ?", (identity_id,)
        )


def login_response(info: TokenInfo, now: float) -> dict[str, Any]:
    """The login/renew response body (times in seconds)."""
    return {
        "accessToken": info.token,
        "expiresIn": info.expires_in(now) or info.ttl,
        "accessTokenMaxTTL": info.max_ttl,
        "tokenType": "Bearer",
    }

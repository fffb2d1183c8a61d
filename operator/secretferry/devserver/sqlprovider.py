"""The ``sql-database`` dynamic-secret provider, PostgreSQL only: real roles in a real database.

Like the real service's SQL provider, a definition's ``inputs`` hold the root connection (``host``,
``port``, ``database``, ``username``, ``password``) and three statements with handlebars-style
placeholders — ``{{username}}``, ``{{password}}``, ``{{expiration}}`` (ISO 8601), ``{{database}}`` —
split on ``;`` and run in one transaction:

- ``creationStatement`` on lease: by default ``CREATE ROLE … LOGIN PASSWORD … VALID UNTIL <expiry>``,
  so the database itself refuses the password after the lease's expiry even if nobody revokes;
- ``renewStatement`` on renewal: by default ``ALTER ROLE … VALID UNTIL <new expiry>``;
- ``revocationStatement`` on revoke: by default ``DROP ROLE``. Then, unlike the real provider, every
  session of the role is terminated: a dropped role's open connections would otherwise keep working,
  and "after revoke it cannot connect" must hold for a consumer that is already connected.

The lease's ``data`` is ``{DB_USERNAME, DB_PASSWORD}`` as the real provider returns it. Errors are
re-raised as ``ProviderError`` with the generated and root credentials cut out of the message (the
real provider's ``sanitizeString``), since the route answers them to the caller.
"""

from __future__ import annotations

import secrets
import string
from dataclasses import dataclass
from typing import Any

import asyncpg

DEFAULT_CREATION = (
    "CREATE ROLE \"{{username}}\" WITH LOGIN PASSWORD '{{password}}' VALID UNTIL '{{expiration}}';"
    ' GRANT CONNECT ON DATABASE "{{database}}" TO "{{username}}";'
)
DEFAULT_RENEW = "ALTER ROLE \"{{username}}\" VALID UNTIL '{{expiration}}';"
DEFAULT_REVOCATION = (
    'REVOKE ALL ON DATABASE "{{database}}" FROM "{{username}}"; DROP ROLE IF EXISTS "{{username}}";'
)
CONNECT_TIMEOUT_SECONDS = 10.0  # a local database answers in milliseconds; a dead one must not hang a request
USERNAME_LENGTH = 32  # the real provider's random username length (lowercase letters and digits)
PASSWORD_LENGTH = 48  # the real provider's generated password length
_USERNAME_ALPHABET = string.ascii_lowercase + string.digits
_PASSWORD_ALPHABET = string.ascii_letters + string.digits


class ProviderError(Exception):
    """The database refused a statement or could not be reached; the message holds no credential."""


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str

    def data(self) -> dict[str, str]:
        return {"DB_USERNAME": self.username, "DB_PASSWORD": self.password}


def _render(template: str, values: dict[str, str]) -> list[str]:
    text = template
    for name, value in values.items():
        text = text.replace("{{" + name + "}}", value)
    return [part.strip() for part in text.split(";") if part.strip()]


def _sanitize(message: str, tokens: list[str]) -> str:
    for token in tokens:
        if token:
            message = message.replace(token, "[REDACTED]")
    return message


def validate_inputs(inputs: dict[str, Any]) -> None:
    """Refuse a definition the provider cannot use (raised as ProviderError at lease time)."""
    if inputs.get("client", "postgres") != "postgres":
        raise ProviderError(
            f"Unsupported SQL client '{inputs.get('client')}': the dev server speaks postgres only"
        )
    for field in ("host", "port", "username", "password"):
        if inputs.get(field) in (None, ""):
            raise ProviderError(f"Dynamic secret inputs lack '{field}'")


async def _connect(inputs: dict[str, Any], secrets_in_play: list[str]) -> asyncpg.Connection:
    validate_inputs(inputs)
    try:
        return await asyncpg.connect(
            host=str(inputs["host"]),
            port=int(inputs["port"]),
            user=str(inputs["username"]),
            password=str(inputs["password"]),
            database=str(inputs.get("database") or "postgres"),
            timeout=CONNECT_TIMEOUT_SECONDS,
        )
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        raise ProviderError(_sanitize(str(exc), [*secrets_in_play, str(inputs["password"])])) from None


async def _run(
    inputs: dict[str, Any], statements: list[str], *, secrets_in_play: list[str], cut_sessions_of: str = ""
) -> None:
    """Run ``statements`` in one transaction; then, with ``cut_sessions_of``, terminate every session
    the role had (found by its oid, taken before: a dropped role's sessions show no user name)."""
    conn = await _connect(inputs, secrets_in_play)
    try:
        oid = await conn.fetchval("SELECT oid FROM pg_roles WHERE rolname = $1", cut_sessions_of or None)
        async with conn.transaction():
            for statement in statements:
                await conn.execute(statement)
        if oid is not None:
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usesysid = $1", oid
            )
    except asyncpg.PostgresError as exc:
        raise ProviderError(_sanitize(str(exc), [*secrets_in_play, str(inputs["password"])])) from None
    finally:
        await conn.close()


def _values(inputs: dict[str, Any], username: str, expire_at_iso: str) -> dict[str, str]:
    return {
        "username": username,
        "expiration": expire_at_iso,
        "database": str(inputs.get("database") or "postgres"),
    }


async def create(inputs: dict[str, Any], expire_at_iso: str) -> Credentials:
    creds = Credentials(
        username="".join(secrets.choice(_USERNAME_ALPHABET) for _ in range(USERNAME_LENGTH)),
        password="".join(secrets.choice(_PASSWORD_ALPHABET) for _ in range(PASSWORD_LENGTH)),
    )
    values = _values(inputs, creds.username, expire_at_iso) | {"password": creds.password}
    statements = _render(str(inputs.get("creationStatement") or DEFAULT_CREATION), values)
    await _run(inputs, statements, secrets_in_play=[creds.username, creds.password])
    return creds


async def renew(inputs: dict[str, Any], username: str, expire_at_iso: str) -> None:
    statements = _render(
        str(inputs.get("renewStatement") or DEFAULT_RENEW), _values(inputs, username, expire_at_iso)
    )
    await _run(inputs, statements, secrets_in_play=[username])


async def revoke(inputs: dict[str, Any], username: str) -> None:
    """Run the revocation statements, then cut the role's open sessions (see the module docstring)."""
    values = _values(inputs, username, "")
    statements = _render(str(inputs.get("revocationStatement") or DEFAULT_REVOCATION), values)
    await _run(inputs, statements, secrets_in_play=[username], cut_sessions_of=username)

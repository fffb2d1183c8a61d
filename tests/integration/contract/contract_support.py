"""Seed, ids and small helpers shared by the contract tests (client ↔ dev server over loopback).

Every test module starts its own dev server subprocess from ``seed()`` (``run_dev_server``), talks
to it only through ``ServiceClient`` and uses the ``DevServer`` admin helpers only to arrange state
(writes that emit events, faults, token expiry) and to read request counters.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest

from secretferry.devserver.testing import DevServer, run_dev_server
from secretferry.service.client import ServiceClient
from secretferry.service.events import Heartbeat, SecretEvent, StreamMessage

ORG = "0c0a0000-0000-4000-8000-000000000001"
PROJECT = "0c0a0000-0000-4000-8000-0000000000a1"
PROJECT_SLUG = "contract-app"

ADMIN = "0c0a0000-0000-4000-8000-0000000000b1"  # org admin, project admin
LIMITED = "0c0a0000-0000-4000-8000-0000000000b2"  # no-access + privilege on dev /backend/**
REMOVABLE = "0c0a0000-0000-4000-8000-0000000000b3"  # has both auth methods, to be removed
PRIV_TARGET = "0c0a0000-0000-4000-8000-0000000000b4"  # privileges are managed on this one
LOCKABLE = "0c0a0000-0000-4000-8000-0000000000b5"  # wrong-secret logins
EVENTS_RECHECK = "0c0a0000-0000-4000-8000-0000000000b6"  # its tokens get expired under a stream
EVENTS_CAP = "0c0a0000-0000-4000-8000-0000000000b7"  # fills the stream cap

ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET = "admin-client-id", "admin-client-secret"
ADMIN_TOKEN = "contract-admin-static-token"
LIMITED_TOKEN = "contract-limited-static-token"
ADMIN_TOKEN_TTL = 3600

MEMBERSHIP = "0c0a0000-0000-4000-8000-0000000000d1"
IMPORT_COMMON = "0c0a0000-0000-4000-8000-0000000000c1"  # dev / ← staging /common, position 2
IMPORT_SHARED = "0c0a0000-0000-4000-8000-0000000000c2"  # dev / ← prod /shared, position 1
IMPORT_EDITABLE = "0c0a0000-0000-4000-8000-0000000000c3"  # staging /importer ← dev /backend
DYNAMIC_SECRET = "contract-pg"
SEEDED_PRIVILEGE = "read-dev-backend"

# Short enough to keep the event tests fast, long enough to notice a missing heartbeat.
HEARTBEAT_SECONDS = 0.3
RECHECK_SECONDS = 0.5
EVENT_TIMEOUT_SECONDS = 5.0


def seed() -> dict[str, Any]:
    """One project with three environments, tags, metadata, references, imports and identities."""
    return {
        "organizations": [{"id": ORG, "name": "Contract org", "slug": "contract-org"}],
        "projects": [
            {
                "id": PROJECT,
                "slug": PROJECT_SLUG,
                "name": "Contract app",
                "organization": "contract-org",
                "environments": [
                    {"slug": "dev", "name": "Development"},
                    {"slug": "staging", "name": "Staging"},
                    {"slug": "prod", "name": "Production"},
                ],
                "tags": [
                    {"slug": "database", "name": "Database", "color": "#1f77b4"},
                    {"slug": "public", "name": "Public", "color": "#2ca02c"},
                ],
                "folders": [{"environment": "dev", "path": "/empty", "description": "no secrets"}],
                "secrets": [
                    {
                        "environment": "dev",
                        "path": "/",
                        "key": "APP_NAME",
                        "value": "contract",
                        "tags": ["public"],
                    },
                    {
                        "environment": "dev",
                        "path": "/",
                        "key": "DATABASE_URL",
                        "value": "postgres://fake@db.example/app",
                        "tags": ["database"],
                        "metadata": [
                            {"key": "team", "value": "payments"},
                            {"key": "vault", "value": "sealed", "isEncrypted": True},
                        ],
                    },
                    {"environment": "dev", "path": "/", "key": "GREETING", "value": "hello ${APP_NAME}"},
                    {"environment": "dev", "path": "/", "key": "CROSS", "value": "${prod.shared.SENTRY_DSN}"},
                    {"environment": "dev", "path": "/backend", "key": "API_KEY", "value": "key-123"},
                    {
                        "environment": "dev",
                        "path": "/backend",
                        "key": "LOG_LEVEL",
                        "value": "debug",
                        "personalOverrides": [{"identity": ADMIN, "value": "trace"}],
                    },
                    {"environment": "dev", "path": "/backend/deep", "key": "NESTED", "value": "deep"},
                    {
                        "environment": "prod",
                        "path": "/shared",
                        "key": "SENTRY_DSN",
                        "value": "https://s.example/1",
                    },
                    {"environment": "staging", "path": "/common", "key": "COMMON", "value": "common"},
                ],
                # Seeded in reverse position order: the list answer must follow position, not rowid.
                "imports": [
                    {
                        "id": IMPORT_COMMON,
                        "environment": "dev",
                        "path": "/",
                        "from": {"environment": "staging", "path": "/common"},
                        "position": 2,
                    },
                    {
                        "id": IMPORT_SHARED,
                        "environment": "dev",
                        "path": "/",
                        "from": {"environment": "prod", "path": "/shared"},
                        "position": 1,
                    },
                    {
                        "id": IMPORT_EDITABLE,
                        "environment": "staging",
                        "path": "/importer",
                        "from": {"environment": "dev", "path": "/backend"},
                        "position": 1,
                    },
                ],
                "dynamicSecrets": [
                    {
                        "name": DYNAMIC_SECRET,
                        "environment": "dev",
                        "path": "/",
                        "type": "sql-database",
                        "defaultTTL": "1h",
                        "maxTTL": "24h",
                        "inputs": {"client": "postgres", "host": "db.example"},
                        "metadata": [{"key": "owner", "value": "platform"}],
                    }
                ],
            }
        ],
        "identities": [
            {
                "id": ADMIN,
                "name": "contract-admin",
                "organization": "contract-org",
                "orgRole": "admin",
                "universalAuth": {
                    "clientId": ADMIN_CLIENT_ID,
                    "clientSecret": ADMIN_CLIENT_SECRET,
                    "accessTokenTTL": ADMIN_TOKEN_TTL,
                    "accessTokenMaxTTL": 86400,
                },
                "accessTokens": [{"token": ADMIN_TOKEN}],
                "projects": [{"project": PROJECT_SLUG, "role": "admin"}],
            },
            {
                "id": LIMITED,
                "name": "contract-limited",
                "organization": "contract-org",
                "accessTokens": [{"token": LIMITED_TOKEN}],
                "projects": [
                    {
                        "project": PROJECT_SLUG,
                        "role": "no-access",
                        "privileges": [
                            {
                                "slug": SEEDED_PRIVILEGE,
                                "permissions": [
                                    {
                                        "action": ["read"],
                                        "subject": "secrets",
                                        "conditions": {
                                            "environment": "dev",
                                            "secretPath": {"$glob": "/backend/**"},
                                        },
                                    },
                                    {
                                        "action": ["subscribe-on-updated", "subscribe-on-created"],
                                        "subject": "secret-events",
                                        "conditions": {
                                            "environment": "dev",
                                            "secretPath": {"$glob": "/backend/**"},
                                        },
                                    },
                                ],
                            }
                        ],
                    }
                ],
            },
            {
                "id": REMOVABLE,
                "name": "contract-removable",
                "organization": "contract-org",
                "universalAuth": {"clientId": "removable-client-id", "clientSecret": "removable-secret"},
                "kubernetesAuth": {
                    "kubernetesHost": "https://127.0.0.1:1",
                    "allowedNamespaces": "team-a,team-*",
                    "allowedAudience": "contract",
                    "accessTokenTTL": 600,
                },
                "projects": [{"project": PROJECT_SLUG, "role": "member"}],
            },
            {
                "id": PRIV_TARGET,
                "name": "contract-privilege-target",
                "organization": "contract-org",
                "projects": [{"project": PROJECT_SLUG, "role": "member"}],
            },
            {
                "id": LOCKABLE,
                "name": "contract-lockable",
                "organization": "contract-org",
                "universalAuth": {"clientId": "lockable-client-id", "clientSecret": "lockable-secret"},
                "projects": [{"project": PROJECT_SLUG, "role": "viewer"}],
            },
            {
                "id": EVENTS_RECHECK,
                "name": "contract-recheck",
                "organization": "contract-org",
                "projects": [{"project": PROJECT_SLUG, "role": "viewer"}],
            },
            {
                "id": EVENTS_CAP,
                "name": "contract-cap",
                "organization": "contract-org",
                "projects": [{"project": PROJECT_SLUG, "role": "viewer"}],
            },
        ],
        "memberships": [
            {
                "id": MEMBERSHIP,
                "organization": "contract-org",
                "role": "member",
                "status": "invited",
                "inviteEmail": "invitee@example.com",
            }
        ],
    }


@contextlib.contextmanager
def dev_server(tmp_path_factory: pytest.TempPathFactory, *extra_args: str) -> Iterator[DevServer]:
    """A fresh dev server subprocess with ``seed()``; stopped on exit."""
    with run_dev_server(
        seed=seed(), data_dir=tmp_path_factory.mktemp("contract-devserver"), extra_args=extra_args
    ) as server:
        yield server


def request_count(server: DevServer, route: str | None = None) -> int:
    """Requests the server answered on ``route`` ("METHOD /template"), or on every API route."""
    routes: dict[str, int] = server.stats()["routes"]
    return routes.get(route, 0) if route is not None else sum(routes.values())


@contextlib.asynccontextmanager
async def client(
    server: DevServer, token: str | None = ADMIN_TOKEN, **kwargs: Any
) -> AsyncIterator[ServiceClient]:
    async with ServiceClient(server.base_url, access_token=token, **kwargs) as service:
        yield service


async def next_event(
    messages: AsyncIterator[StreamMessage], within: float = EVENT_TIMEOUT_SECONDS
) -> SecretEvent:
    """The next ``SecretEvent`` on the stream, skipping heartbeats; fails after ``within`` seconds."""
    async with asyncio.timeout(within):
        async for message in messages:
            if isinstance(message, SecretEvent):
                return message
            assert isinstance(message, Heartbeat), message
    raise AssertionError("the stream ended before an event arrived")


async def collect(messages: AsyncIterator[StreamMessage], seconds: float) -> list[StreamMessage]:
    """Everything the stream yields during ``seconds`` (the iterator is not reusable afterwards)."""
    seen: list[StreamMessage] = []
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            async for message in messages:
                seen.append(message)
    return seen


def keys(secrets: Sequence[Any]) -> list[str]:
    return [s.secret_key for s in secrets]


def by_key(secrets: Sequence[Any]) -> dict[str, Any]:
    return {s.secret_key: s for s in secrets}

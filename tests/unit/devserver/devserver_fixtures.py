"""Seed and constants shared by the dev-server unit tests."""

from __future__ import annotations

from typing import Any

PROJECT = "11111111-1111-4111-8111-111111111111"
ADMIN_ID = "aaaaaaaa-0000-4000-8000-000000000001"
VIEWER_ID = "aaaaaaaa-0000-4000-8000-000000000002"
LIMITED_ID = "aaaaaaaa-0000-4000-8000-000000000003"
OUTSIDER_ID = "aaaaaaaa-0000-4000-8000-000000000004"
ADMIN = {"Authorization": "Bearer admin-token"}
VIEWER = {"Authorization": "Bearer viewer-token"}
LIMITED = {"Authorization": "Bearer limited-token"}
OUTSIDER = {"Authorization": "Bearer outsider-token"}
ADMIN_API_TOKEN = "admin-api-token"
ADMIN_API = {"X-Admin-Token": ADMIN_API_TOKEN}
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z

SEED: dict[str, Any] = {
    "organizations": [{"id": "org-1", "name": "Org", "slug": "org"}],
    "projects": [
        {
            "id": PROJECT,
            "slug": "proj",
            "environments": [{"slug": "dev", "name": "Dev"}, {"slug": "prod", "name": "Prod"}],
            "tags": [{"slug": "db", "name": "DB"}, {"slug": "web", "name": "Web"}],
            "secrets": [
                {
                    "environment": "dev",
                    "key": "A",
                    "value": "a",
                    "tags": ["db"],
                    "metadata": [{"key": "team", "value": "x"}, {"key": "tier", "value": "1"}],
                },
                {
                    "environment": "dev",
                    "key": "B",
                    "value": "ref-${A}",
                    "tags": ["web"],
                    "metadata": [
                        {"key": "team", "value": "x"},
                        {"key": "secret", "value": "s", "isEncrypted": True},
                    ],
                    "personalOverrides": [{"identity": ADMIN_ID, "value": "mine"}],
                },
                {"environment": "dev", "path": "/app", "key": "C", "value": "${prod.shared.S1}"},
                {"environment": "dev", "path": "/app/deep", "key": "D", "value": "d"},
                {"environment": "prod", "path": "/shared", "key": "S1", "value": "s1"},
                {"environment": "prod", "path": "/other", "key": "O1", "value": "o1"},
            ],
            "imports": [
                {
                    "id": "imp-2",
                    "environment": "dev",
                    "path": "/",
                    "from": {"environment": "prod", "path": "/other"},
                    "position": 2,
                },
                {
                    "id": "imp-1",
                    "environment": "dev",
                    "path": "/",
                    "from": {"environment": "prod", "path": "/shared"},
                    "position": 1,
                },
            ],
            "dynamicSecrets": [{"name": "pg", "environment": "dev", "path": "/", "type": "sql-database"}],
        }
    ],
    "identities": [
        {
            "id": ADMIN_ID,
            "name": "admin",
            "organization": "org",
            "orgRole": "admin",
            "accessTokens": [{"token": "admin-token"}],
            "universalAuth": {
                "clientId": "cid",
                "clientSecret": "csecret",
                "accessTokenTTL": 100,
                "accessTokenMaxTTL": 1000,
                "accessTokenNumUsesLimit": 0,
            },
            "kubernetesAuth": {"kubernetesHost": "https://127.0.0.1:1", "allowedNamespaces": "ns"},
            "projects": [{"project": "proj", "role": "admin"}],
        },
        {
            "id": VIEWER_ID,
            "name": "viewer",
            "organization": "org",
            "accessTokens": [{"token": "viewer-token"}],
            "projects": [{"project": "proj", "role": "viewer"}],
        },
        {
            "id": LIMITED_ID,
            "name": "limited",
            "organization": "org",
            "accessTokens": [{"token": "limited-token"}],
            "projects": [
                {
                    "project": "proj",
                    "role": "no-access",
                    "privileges": [
                        {
                            "id": "priv-1",
                            "slug": "app-only",
                            "permissions": [
                                {
                                    "action": ["read"],
                                    "subject": "secrets",
                                    "conditions": {"environment": "dev", "secretPath": {"$glob": "/app/**"}},
                                },
                                {
                                    "action": ["subscribe-on-updated", "subscribe-on-created"],
                                    "subject": "secret-events",
                                    "conditions": {"environment": "dev", "secretPath": {"$glob": "/app/**"}},
                                },
                            ],
                        }
                    ],
                }
            ],
        },
        {
            "id": OUTSIDER_ID,
            "name": "outsider",
            "organization": "org",
            "accessTokens": [{"token": "outsider-token"}],
        },
    ],
    "memberships": [{"id": "mem-1", "organization": "org", "role": "member", "inviteEmail": "a@example.com"}],
}


def params(**extra: str) -> dict[str, str]:
    return {"projectId": PROJECT, "environment": "dev", **extra}

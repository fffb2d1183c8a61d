"""Additional privileges count in every permission check, a temporary one only inside its window.

The real permission service merges an identity's additional privileges into its rules, dropping a
temporary one whose ``temporaryAccessEndTime`` has passed; the dev server does the same (and also
ignores one that has not started: start + range = end, both from the privilege). TemporaryPrivilege
relies on exactly this: the grant stops working at ``expiresAt`` with no call from the operator.
"""

from __future__ import annotations

import httpx
from clock_fakes import Clock
from devserver_fixtures import ADMIN, LIMITED, LIMITED_ID, PROJECT, T0

from secretferry.devserver.timeutil import iso

SECRETS = "/api/v4/secrets"
V1 = "/api/v1/additional-privilege/identity"
PROD_SHARED = {"projectId": PROJECT, "environment": "prod", "secretPath": "/shared"}


async def test_a_temporary_privilege_grants_only_inside_its_window(
    client: httpx.AsyncClient, clock: Clock
) -> None:
    async def read() -> int:
        return (await client.get(SECRETS, params=PROD_SHARED, headers=LIMITED)).status_code

    assert await read() == 403  # no-access role; its seeded privilege is on dev /app/** only
    body = {
        "identityId": LIMITED_ID,
        "projectSlug": "proj",
        "slug": "prod-shared",
        "temporaryMode": "relative",
        "temporaryRange": "30s",
        "temporaryAccessStartTime": iso(T0 + 10),
        "permissions": [
            {
                "action": "read",
                "subject": "secrets",
                "conditions": {"environment": "prod", "secretPath": {"$glob": "/shared"}},
            }
        ],
    }
    r = await client.post(f"{V1}/temporary", json=body, headers=ADMIN)
    assert r.status_code == 200 and r.json()["privilege"]["temporaryAccessEndTime"] == iso(T0 + 40)
    assert await read() == 403  # not started
    clock.now = T0 + 10
    assert await read() == 200
    clock.now = T0 + 39.9
    assert await read() == 200
    clock.now = T0 + 40
    assert await read() == 403  # ended: the end time is exclusive
    # Only where it grants: another path of the same environment stays closed.
    clock.now = T0 + 20
    other = {**PROD_SHARED, "secretPath": "/other"}
    assert (await client.get(SECRETS, params=other, headers=LIMITED)).status_code == 403


async def test_an_updated_window_grants_again(client: httpx.AsyncClient, clock: Clock) -> None:
    body = {
        "identityId": LIMITED_ID,
        "projectSlug": "proj",
        "slug": "prod-shared",
        "temporaryMode": "relative",
        "temporaryRange": "5s",
        "temporaryAccessStartTime": iso(T0),
        "permissions": [],
    }
    created = (await client.post(f"{V1}/temporary", json=body, headers=ADMIN)).json()["privilege"]
    rule = {
        "action": ["read"],
        "subject": "secrets",
        "conditions": {"environment": "prod", "secretPath": "/shared"},
    }
    clock.now = T0 + 10
    update = {
        "slug": "prod-shared",
        "permissions": [rule],
        "type": {
            "isTemporary": True,
            "temporaryMode": "relative",
            "temporaryRange": "1m",
            "temporaryAccessStartTime": iso(T0),
        },
    }
    r = await client.patch(
        f"/api/v2/identity-project-additional-privilege/{created['id']}", json=update, headers=ADMIN
    )
    assert r.status_code == 200
    assert (await client.get(SECRETS, params=PROD_SHARED, headers=LIMITED)).status_code == 200
    clock.now = T0 + 60
    assert (await client.get(SECRETS, params=PROD_SHARED, headers=LIMITED)).status_code == 403

"""How a machine identity logs in: the credentials an ``auth.AuthSession`` logs in with.

One class per login method of docs/service-contract.md. Kubernetes auth mints a NEW ServiceAccount
token for every login (``mint_jwt``); replaying the token of an earlier login fails once it
expires, the known failure of existing operators. Secrets stay out of every ``repr``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Protocol

from secretferry.service import client as service_client
from secretferry.service import models


class Credentials(Protocol):
    """How an identity logs in; ``kind`` names the method in logs and status."""

    @property
    def kind(self) -> str: ...

    @property
    def can_relogin(self) -> bool:
        """Whether a new login can yield a different (valid) token."""
        ...

    async def login(self, client: service_client.ServiceClient) -> models.LoginResult: ...


@dataclasses.dataclass(frozen=True)
class KubernetesCredentials:
    """Kubernetes auth; ``mint_jwt`` returns a NEW ServiceAccount token and is called at every login."""

    identity_id: str
    mint_jwt: Callable[[], Awaitable[str]]
    organization_slug: str | None = None

    kind = "kubernetes"
    can_relogin = True

    async def login(self, client: service_client.ServiceClient) -> models.LoginResult:
        jwt = await self.mint_jwt()
        return await client.login_kubernetes(
            identity_id=self.identity_id, jwt=jwt, organization_slug=self.organization_slug
        )


@dataclasses.dataclass(frozen=True)
class UniversalCredentials:
    """Universal auth (client id + secret)."""

    client_id: str
    client_secret: str = dataclasses.field(repr=False)

    kind = "universal"
    can_relogin = True

    async def login(self, client: service_client.ServiceClient) -> models.LoginResult:
        return await client.login_universal(client_id=self.client_id, client_secret=self.client_secret)


@dataclasses.dataclass(frozen=True)
class StaticTokenCredentials:
    """A ready access token (development): never renewed, never replaced, never revoked by us."""

    token: str = dataclasses.field(repr=False)

    kind = "accessToken"
    can_relogin = False

    async def login(self, client: service_client.ServiceClient) -> models.LoginResult:
        # Lifetime unknown: 0 means "no expiry known", so the session never tries to renew it.
        return models.LoginResult(access_token=self.token, expires_in=0)

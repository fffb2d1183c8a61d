"""How a machine identity logs in: the credentials an ``auth.AuthSession`` logs in with.

One class per login method of docs/service-contract.md. Kubernetes auth mints a NEW ServiceAccount
token for every login (``mint_jwt``); replaying the token of an earlier login fails once it
expires, the known failure of existing operators. Secrets stay out of every ``repr``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

from secretferry.service import client as service_client
from secretferry.service import errors, models


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
    """Kubernetes auth; ``mint_jwt`` returns a NEW ServiceAccount token and is called at every login.

    ``api_audiences`` gives the apiserver's own audiences once known (the minter learns them before
    minting): a TokenReview refusal whose target audiences are exactly those means the server sent
    no audience of its own (``errors.ServerIgnoresAudience``), not that ours is misconfigured.
    """

    identity_id: str
    mint_jwt: Callable[[], Awaitable[str]]
    organization_slug: str | None = None
    api_audiences: Callable[[], frozenset[str]] = dataclasses.field(default=frozenset, repr=False)

    kind = "kubernetes"
    can_relogin = True

    async def login(self, client: service_client.ServiceClient) -> models.LoginResult:
        jwt = await self.mint_jwt()
        try:
            return await client.login_kubernetes(
                identity_id=self.identity_id, jwt=jwt, organization_slug=self.organization_slug
            )
        except errors.TokenReviewAudienceRejected as exc:
            api = self.api_audiences()
            if api and exc.target_audiences and set(exc.target_audiences) <= api:
                raise ignores_audience(exc) from exc
            raise


def ignores_audience(exc: errors.TokenReviewAudienceRejected) -> errors.ServerIgnoresAudience:
    """The refusal of a server whose TokenReview checks the token against the apiserver's own
    audiences, with what to do about it (the message reaches the identity's status)."""
    token = ", ".join(exc.token_audiences) or "none"
    return errors.ServerIgnoresAudience(
        f"the service's TokenReview ignored the token's audience ({token}) and checked it against "
        f"the apiserver's own ({', '.join(exc.target_audiences)}): this server sends no audience "
        "(self-hosted releases of 2024-10 and older), so it accepts only a token that is valid for "
        "the Kubernetes API itself. Upgrade the service, or have a cluster admin use a "
        "ClusterMachineIdentity with spec.auth.kubernetes.allowAPIServerAudience: true (README, "
        f"security model); retried in {exc.retry_after_seconds / 3600:.0f} h or when the identity "
        f"changes. {exc.message}",
        status_code=exc.status_code,
        req_id=exc.req_id,
        token_audiences=exc.token_audiences,
        target_audiences=exc.target_audiences,
    )


@dataclasses.dataclass(frozen=True)
class OIDCCredentials:
    """OIDC auth; ``mint_jwt`` returns a NEW ServiceAccount token at every login, which the service
    verifies against the cluster's OIDC discovery document and keys (no call into the cluster)."""

    identity_id: str
    mint_jwt: Callable[[], Awaitable[str]]

    kind = "oidc"
    can_relogin = True

    async def login(self, client: service_client.ServiceClient) -> models.LoginResult:
        jwt = await self.mint_jwt()
        with _forbidden_is_rejected():
            return await client.login_oidc(identity_id=self.identity_id, jwt=jwt)


@dataclasses.dataclass(frozen=True)
class JWTCredentials:
    """JWT auth; ``mint_jwt`` returns a NEW ServiceAccount token at every login, which the service
    verifies against its static public keys or its JWKS URL."""

    identity_id: str
    mint_jwt: Callable[[], Awaitable[str]]

    kind = "jwt"
    can_relogin = True

    async def login(self, client: service_client.ServiceClient) -> models.LoginResult:
        jwt = await self.mint_jwt()
        with _forbidden_is_rejected():
            return await client.login_jwt(identity_id=self.identity_id, jwt=jwt)


@contextlib.contextmanager
def _forbidden_is_rejected() -> Iterator[None]:
    """OIDC and JWT auth answer a token whose subject (or, for JWT, issuer) is not bound with 403:
    a refused login (AuthFailed), not a missing permission of a logged-in identity."""
    try:
        yield
    except errors.PermissionDenied as exc:
        raise errors.AuthenticationError(exc.message, status_code=exc.status_code, req_id=exc.req_id) from exc


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

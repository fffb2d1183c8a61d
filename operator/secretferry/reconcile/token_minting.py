"""ServiceAccount tokens for the logins that send one: Kubernetes, OIDC and JWT auth.

All three send the service a token minted by TokenRequest, so the rules that keep a tenant from
exporting a token the apiserver itself would accept are here, once, whatever the method: at every
login the audiences are compared with the apiserver's own (``tenancy.check_api_audience``,
nothing minted when they meet), a namespaced identity's ServiceAccount must list it in its opt-in
annotation, and only then is a fresh token minted; an old one is never replayed. The apiserver's
audiences are learnt from the cluster once an hour (``kube.apiaudiences``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from secretferry import settings as settings_mod
from secretferry.kube import apiaudiences, serviceaccounts, tokens
from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.reconcile import problems, reasons, tenancy

log = logging.getLogger(__name__)

# --api-audiences changes only with an apiserver restart: learnt again hourly, not per login.
_API_AUDIENCES_TTL_SECONDS: Final = 3600.0


class TokenMinter:
    """Mints ServiceAccount tokens for logins, after the audience and opt-in checks."""

    def __init__(
        self, kube: kube_client.Kube, settings: settings_mod.Settings, *, clock: Callable[[], float]
    ) -> None:
        self._kube = kube
        self._settings = settings
        self._clock = clock
        self._api_audiences: tuple[float, frozenset[str]] | None = None
        self._lock = asyncio.Lock()

    def known_api_audiences(self) -> frozenset[str]:
        """The apiserver's own audiences once learnt (empty before)."""
        return self._api_audiences[1] if self._api_audiences is not None else frozenset()

    def minter(
        self,
        label: str,
        *,
        identity: str,
        namespaced: bool,
        namespace: str,
        name: str,
        audiences: list[str],
        expiration_seconds: int,
        allow_api_server_audience: bool = False,
        method: str = "kubernetes",
    ) -> Callable[[], Awaitable[str]]:
        """A fresh TokenRequest at every login for ServiceAccount ``namespace/name``, on behalf of
        identity ``identity`` (``label`` names it in messages). For a namespaced identity the
        ServiceAccount's opt-in is read at every login, so removing the annotation stops the next
        one."""

        async def mint() -> str:
            refusal = tenancy.check_api_audience(
                audiences,
                api_audiences=await self._learn(label),
                namespaced=namespaced,
                allowed=allow_api_server_audience,
                method=method,
            )
            if refusal is not None:
                raise problems.Problem(refusal.reason, f"{label}: {refusal.message}")
            if namespaced:
                await self._opted_in(label, identity=identity, namespace=namespace, name=name)
            try:
                token, _ = await tokens.request_token(
                    self._kube,
                    namespace=namespace,
                    service_account=name,
                    audiences=audiences,
                    expiration_seconds=expiration_seconds,
                )
            except kube_errors.KubeError as exc:
                raise credentials_problem(
                    f"{label}: TokenRequest for ServiceAccount {namespace}/{name} failed: {exc}"
                ) from exc
            return token

        return mint

    async def _learn(self, label: str) -> frozenset[str]:
        """The apiserver's own audiences, learnt once an hour. Until they are known nothing is
        minted: an unknown answer is a refusal that is tried again."""
        async with self._lock:
            cached = self._api_audiences
            now = self._clock()
            if cached is not None and now - cached[0] < _API_AUDIENCES_TTL_SECONDS:
                return cached[1]
            try:
                learnt = await apiaudiences.learn(self._kube, namespace=self._settings.namespace)
            except kube_errors.KubeError as exc:
                raise problems.Problem(
                    reasons.KUBERNETES_ERROR,
                    f"{label}: cannot learn the apiserver's own token audiences (a "
                    f"TokenRequest without audiences for ServiceAccount {self._settings.namespace}/"
                    f"{apiaudiences.PROBE_SERVICE_ACCOUNT}): {exc}; no token was minted",
                    retriable=True,
                ) from exc
            self._api_audiences = (now, learnt)
            log.info("the apiserver's own token audiences: %s", ", ".join(sorted(learnt)))
            return learnt

    async def _opted_in(self, label: str, *, identity: str, namespace: str, name: str) -> None:
        """Raise unless ServiceAccount ``namespace/name`` names ``identity`` in its opt-in annotation."""
        try:
            annotations = await serviceaccounts.read_annotations(self._kube, namespace=namespace, name=name)
        except kube_errors.NotFound:  # missing and not opted in read the same (tenancy.not_opted_in)
            raise not_opted_in(label, identity, namespace=namespace, name=name) from None
        except kube_errors.KubeError as exc:
            raise credentials_problem(f"{label}: cannot read ServiceAccount: {exc}") from exc
        if not tenancy.opted_in(annotations, identity):
            raise not_opted_in(label, identity, namespace=namespace, name=name)


def not_opted_in(
    label: str, identity: str, *, namespace: str, name: str, kind: str = "ServiceAccount"
) -> problems.Problem:
    refusal = tenancy.not_opted_in(kind, namespace=namespace, name=name, identity=identity)
    return problems.Problem(refusal.reason, f"{label}: {refusal.message}", retriable=refusal.retriable)


def credentials_problem(message: str) -> problems.Problem:
    """A referenced Secret or ServiceAccount is unreadable, a cluster identity's is missing, or
    a key is. Retriable: the RBAC to read it, or the key, is noticed by trying again."""
    return problems.Problem(reasons.CREDENTIALS_NOT_FOUND, message, retriable=True)

"""MachineIdentity and ClusterMachineIdentity: how to reach the service and log in.

The two kinds share one shape. The namespaced kind may only reference objects in its own
namespace, so its references carry no ``namespace`` field at all; the cluster kind's references
must name one. The cluster variants are subclasses, so code written against ``MachineIdentitySpec``
reads either kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar, Final, Literal, Self

from pydantic import Field, model_validator

from secretferry.models import base

MACHINE_IDENTITY_KIND: Final = "MachineIdentity"
CLUSTER_MACHINE_IDENTITY_KIND: Final = "ClusterMachineIdentity"

# TokenRequest refuses expirationSeconds below 10 minutes.
MIN_TOKEN_EXPIRATION_SECONDS: Final = 600
# The apiserver caps service-account tokens at --service-account-max-token-expiration; 48 h is a
# generous upper bound for a token the operator uses once, for one login.
MAX_TOKEN_EXPIRATION_SECONDS: Final = 48 * 3600

_ONE_OF_TLS = base.cel(
    "!(has(self.caBundle) && has(self.caSecretRef))", "set at most one of caBundle and caSecretRef"
)
_ONE_OF_AUTH = base.cel(
    "(has(self.kubernetes) ? 1 : 0) + (has(self.universal) ? 1 : 0) + (has(self.accessToken) ? 1 : 0) == 1",
    "set exactly one of auth.kubernetes, auth.universal, auth.accessToken",
)
_UNIVERSAL_SHAPE = base.cel(
    "has(self.credentialsSecretRef) ? !has(self.clientId) && !has(self.clientSecretRef)"
    " : has(self.clientId) && has(self.clientSecretRef)",
    "set either clientId and clientSecretRef, or credentialsSecretRef alone",
)


class ServiceAccountRef(base.CRModel):
    name: str = Field(min_length=1, max_length=base.DNS_SUBDOMAIN_MAX)


class ClusterServiceAccountRef(ServiceAccountRef):
    namespace: str = Field(min_length=1, max_length=63)


class TLSConfig(base.CRModel, json_schema_extra=base.validations(_ONE_OF_TLS)):
    """Extra trust for the service's TLS certificate (system roots are always trusted)."""

    ca_bundle: str | None = Field(default=None, min_length=1)
    """PEM-encoded CA certificates."""
    ca_secret_ref: base.SecretKeyRef | None = None
    """A Secret key holding PEM-encoded CA certificates."""

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if self.ca_bundle is not None and self.ca_secret_ref is not None:
            raise ValueError("set at most one of caBundle and caSecretRef")
        return self


class ClusterTLSConfig(TLSConfig):
    ca_secret_ref: base.ClusterSecretKeyRef | None = None


class KubernetesAuth(base.CRModel):
    """Log in with a freshly minted token of a ServiceAccount (TokenRequest on every login)."""

    identity_id: str = Field(min_length=1, max_length=256)
    service_account_ref: ServiceAccountRef
    audiences: list[str] = Field(default_factory=list, max_length=16)
    """Token audiences: the identity's allowed audience at the service. Required for a
    MachineIdentity (empty would mean the apiserver's own audience); a ClusterMachineIdentity may
    leave it empty."""
    token_expiration_seconds: int = Field(
        default=MIN_TOKEN_EXPIRATION_SECONDS, ge=MIN_TOKEN_EXPIRATION_SECONDS, le=MAX_TOKEN_EXPIRATION_SECONDS
    )
    """Lifetime of the token minted for each login; more than the operator's
    SECRETFERRY_MAX_TOKEN_EXPIRATION_SECONDS (600 by default) is lowered to it."""


class ClusterKubernetesAuth(KubernetesAuth):
    service_account_ref: ClusterServiceAccountRef


class CredentialsSecretRef(base.CRModel):
    """One Secret holding both the client id and the client secret."""

    name: str = Field(min_length=1, max_length=base.DNS_SUBDOMAIN_MAX)
    client_id_key: str = Field(default="clientId", min_length=1, max_length=base.DNS_SUBDOMAIN_MAX)
    client_secret_key: str = Field(default="clientSecret", min_length=1, max_length=base.DNS_SUBDOMAIN_MAX)


class ClusterCredentialsSecretRef(CredentialsSecretRef):
    namespace: str = Field(min_length=1, max_length=63)


class UniversalAuth(base.CRModel, json_schema_extra=base.validations(_UNIVERSAL_SHAPE)):
    """Client id + client secret: ``clientId`` and ``clientSecretRef``, or ``credentialsSecretRef``."""

    client_id: str | None = Field(default=None, min_length=1, max_length=256)
    client_secret_ref: base.SecretKeyRef | None = None
    credentials_secret_ref: CredentialsSecretRef | None = None

    @model_validator(mode="after")
    def _shape(self) -> Self:
        split = (self.client_id is not None, self.client_secret_ref is not None)
        if self.credentials_secret_ref is not None:
            if any(split):
                raise ValueError("set either clientId and clientSecretRef, or credentialsSecretRef alone")
        elif not all(split):
            raise ValueError("set either clientId and clientSecretRef, or credentialsSecretRef alone")
        return self


class ClusterUniversalAuth(UniversalAuth):
    client_secret_ref: base.ClusterSecretKeyRef | None = None
    credentials_secret_ref: ClusterCredentialsSecretRef | None = None


class AccessTokenAuth(base.CRModel):
    """A ready access token from a Secret (development only: it is never renewed)."""

    secret_ref: base.SecretKeyRef


class ClusterAccessTokenAuth(AccessTokenAuth):
    secret_ref: base.ClusterSecretKeyRef


class IdentityAuth(base.CRModel, json_schema_extra=base.validations(_ONE_OF_AUTH)):
    """Exactly one login method."""

    kubernetes: KubernetesAuth | None = None
    universal: UniversalAuth | None = None
    access_token: AccessTokenAuth | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        chosen = [m for m in (self.kubernetes, self.universal, self.access_token) if m is not None]
        if len(chosen) != 1:
            raise ValueError("set exactly one of auth.kubernetes, auth.universal, auth.accessToken")
        return self

    @property
    def method(self) -> Literal["kubernetes", "universal", "accessToken"]:
        """Which login method is configured."""
        if self.kubernetes is not None:
            return "kubernetes"
        return "universal" if self.universal is not None else "accessToken"


class ClusterIdentityAuth(IdentityAuth):
    kubernetes: ClusterKubernetesAuth | None = None
    universal: ClusterUniversalAuth | None = None
    access_token: ClusterAccessTokenAuth | None = None


class MachineIdentitySpec(base.CRModel):
    host_api: str | None = Field(default=None, alias="hostAPI", pattern=r"^https?://", max_length=2048)
    """Service base URL, e.g. ``https://app.infisical.com``; default from operator settings."""
    tls: TLSConfig | None = None
    auth: IdentityAuth


class AllowedNamespaces(base.CRModel):
    """Namespaces whose SecretSyncs may use a ClusterMachineIdentity: listed names, or selected."""

    names: list[str] = Field(default_factory=list, max_length=1024)
    selector: base.LabelSelector | None = None

    def allows(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether a namespace with these labels is listed or selected."""
        if namespace in self.names:
            return True
        return self.selector is not None and self.selector.matches(labels)


class ClusterMachineIdentitySpec(MachineIdentitySpec):
    tls: ClusterTLSConfig | None = None
    auth: ClusterIdentityAuth
    allowed_namespaces: AllowedNamespaces | None = None
    """Who may use this identity. Absent: every namespace; present: only names or selected ones."""

    def allows_namespace(self, namespace: str, labels: Mapping[str, str]) -> bool:
        return self.allowed_namespaces is None or self.allowed_namespaces.allows(namespace, labels)


class MachineIdentityStatus(base.CRModel):
    conditions: list[base.Condition] = base.conditions_field()
    observed_generation: int | None = None
    token_expires_at: datetime | None = None
    last_login_time: datetime | None = None
    list_endpoint: Literal["/api/v4/secrets", "/api/v3/secrets/raw"] | None = None
    """Route the operator lists secrets through on this identity's host, once a list there showed
    it: /api/v4/secrets, or /api/v3/secrets/raw on a self-hosted server older than v4."""


class MachineIdentity(base.CRModel):
    """A parsed ``MachineIdentity`` object."""

    KIND: ClassVar[str] = MACHINE_IDENTITY_KIND

    metadata: base.ObjectMeta
    spec: MachineIdentitySpec
    status: MachineIdentityStatus = Field(default_factory=MachineIdentityStatus)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        """Parse a raw object body; raises pydantic.ValidationError for an invalid spec."""
        return cls.model_validate(base.lenient_status(body, MachineIdentityStatus))


class ClusterMachineIdentity(MachineIdentity):
    """A parsed ``ClusterMachineIdentity`` object."""

    KIND: ClassVar[str] = CLUSTER_MACHINE_IDENTITY_KIND

    spec: ClusterMachineIdentitySpec

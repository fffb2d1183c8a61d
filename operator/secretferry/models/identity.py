"""MachineIdentity and ClusterMachineIdentity: how to reach the service and log in.

The two kinds share one shape. The namespaced kind may only reference objects in its own
namespace, so its references carry no ``namespace`` field at all; the cluster kind's references
must name one. The cluster variants are subclasses, so code written against ``MachineIdentitySpec``
reads either kind.
"""

from __future__ import annotations

from collections.abc import Mapping
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
_ONE_OF_AUTH_MESSAGE: Final = (
    "set exactly one of auth.kubernetes, auth.oidc, auth.jwt, auth.universal, auth.accessToken"
)
_ONE_OF_AUTH = base.cel(
    "(has(self.kubernetes) ? 1 : 0) + (has(self.oidc) ? 1 : 0) + (has(self.jwt) ? 1 : 0)"
    " + (has(self.universal) ? 1 : 0) + (has(self.accessToken) ? 1 : 0) == 1",
    _ONE_OF_AUTH_MESSAGE,
)
_UNIVERSAL_SHAPE = base.cel(
    "has(self.credentialsSecretRef) ? !has(self.clientId) && !has(self.clientSecretRef)"
    " : has(self.clientId) && has(self.clientSecretRef)",
    "set either clientId and clientSecretRef, or credentialsSecretRef alone",
)


class ServiceAccountRef(base.CRModel):
    """A ServiceAccount in the identity's own namespace."""

    name: str = Field(min_length=1, max_length=base.DNS_SUBDOMAIN_MAX)
    """Name of the ServiceAccount, e.g. ``app-login``."""


class ClusterServiceAccountRef(ServiceAccountRef):
    """A ServiceAccount in any namespace."""

    namespace: str = Field(min_length=1, max_length=63)
    """Namespace of the ServiceAccount."""


class TLSConfig(base.CRModel, json_schema_extra=base.validations(_ONE_OF_TLS)):
    """Extra trust for the service's TLS certificate (system roots are always trusted)."""

    ca_bundle: str | None = Field(default=None, min_length=1)
    """PEM-encoded CA certificates (``-----BEGIN CERTIFICATE-----`` ...). Set at most one of caBundle
    and caSecretRef."""
    ca_secret_ref: base.SecretKeyRef | None = None
    """A key of a Secret in this namespace holding PEM-encoded CA certificates. The Secret must carry
    the annotation secretferry.io/allowed-identities listing this MachineIdentity."""

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if self.ca_bundle is not None and self.ca_secret_ref is not None:
            raise ValueError("set at most one of caBundle and caSecretRef")
        return self


class ClusterTLSConfig(TLSConfig):
    """Extra trust for the service's TLS certificate (system roots are always trusted)."""

    ca_secret_ref: base.ClusterSecretKeyRef | None = None
    """A key of a Secret in any namespace holding PEM-encoded CA certificates; the Secret needs no
    opt-in annotation."""


class KubernetesAuth(base.CRModel):
    """Log in with a freshly minted token of a ServiceAccount (TokenRequest on every login)."""

    identity_id: str = Field(min_length=1, max_length=256)
    """ID of the machine identity at the service."""
    service_account_ref: ServiceAccountRef
    """The ServiceAccount in this namespace whose token is minted for every login. It must carry the
    annotation secretferry.io/allowed-identities listing this MachineIdentity (else
    CredentialsNotOptedIn)."""
    audiences: list[str] = Field(default_factory=list, max_length=16)
    """Token audiences, e.g. ``[secretferry]``: the identity's allowed audience at the service.
    Required for a MachineIdentity (empty would mean the apiserver's own audience), and never one
    of the apiserver's own audiences (AudienceNotAllowed); a ClusterMachineIdentity may use those
    (or leave it empty) only with allowAPIServerAudience."""
    token_expiration_seconds: int = Field(
        default=MIN_TOKEN_EXPIRATION_SECONDS, ge=MIN_TOKEN_EXPIRATION_SECONDS, le=MAX_TOKEN_EXPIRATION_SECONDS
    )
    """Lifetime of the token minted for each login, in seconds: 600 (the default, 10 minutes) to
    172800 (48 h), e.g. ``900``. More than the operator's SECRETFERRY_MAX_TOKEN_EXPIRATION_SECONDS
    (600 by default) is lowered to it."""


class ClusterKubernetesAuth(KubernetesAuth):
    """Log in with a freshly minted token of a ServiceAccount (TokenRequest on every login)."""

    service_account_ref: ClusterServiceAccountRef
    """The ServiceAccount, in any namespace, whose token is minted for every login; it needs no
    opt-in annotation."""
    allow_api_server_audience: bool = Field(default=False, alias="allowAPIServerAudience")
    """Allow a token that is valid against the Kubernetes API itself (audiences empty, or naming
    one of the apiserver's own) to be sent to the service. Only for a server whose TokenReview
    ignores audiences (self-hosted releases of 2024-10 and older): whoever controls that service
    can then act as the ServiceAccount against the cluster. Default false (AudienceNotAllowed)."""


class OIDCAuth(KubernetesAuth):
    """OIDC auth: log in with a freshly minted ServiceAccount token that the service verifies
    against the cluster's public issuer keys (OIDC discovery), without calling into the cluster.

    Same fields and the same opt-in and audience rules as Kubernetes auth: the token is minted by
    TokenRequest at every login, a namespaced identity must name an audience of its own and never
    one of the apiserver's (a token the apiserver accepts never leaves the cluster)."""


class ClusterOIDCAuth(ClusterKubernetesAuth, OIDCAuth):
    """OIDC auth: log in with a freshly minted ServiceAccount token that the service verifies
    against the cluster's public issuer keys (OIDC discovery), without calling into the cluster."""


class JWTAuth(KubernetesAuth):
    """JWT auth: log in with a freshly minted ServiceAccount token that the service verifies
    against static public keys or a JWKS URL configured there.

    Same fields and the same opt-in and audience rules as Kubernetes auth."""


class ClusterJWTAuth(ClusterKubernetesAuth, JWTAuth):
    """JWT auth: log in with a freshly minted ServiceAccount token that the service verifies
    against static public keys or a JWKS URL configured there."""


class CredentialsSecretRef(base.CRModel):
    """One Secret holding both the client id and the client secret."""

    name: str = Field(min_length=1, max_length=base.DNS_SUBDOMAIN_MAX)
    """Name of the Secret, e.g. ``app-universal-auth``."""
    client_id_key: str = Field(default="clientId", min_length=1, max_length=base.DNS_SUBDOMAIN_MAX)
    """Key holding the client id; default ``clientId``."""
    client_secret_key: str = Field(default="clientSecret", min_length=1, max_length=base.DNS_SUBDOMAIN_MAX)
    """Key holding the client secret; default ``clientSecret``."""


class ClusterCredentialsSecretRef(CredentialsSecretRef):
    """One Secret, in the given namespace, holding both the client id and the client secret."""

    namespace: str = Field(min_length=1, max_length=63)
    """Namespace of the Secret."""


class UniversalAuth(base.CRModel, json_schema_extra=base.validations(_UNIVERSAL_SHAPE)):
    """Client id + client secret: ``clientId`` and ``clientSecretRef``, or ``credentialsSecretRef``."""

    client_id: str | None = Field(default=None, min_length=1, max_length=256)
    """Client ID of the identity's universal auth at the service, written inline (it is not a
    secret); goes with clientSecretRef."""
    client_secret_ref: base.SecretKeyRef | None = None
    """A key of a Secret in this namespace holding the client secret. The Secret must carry the
    annotation secretferry.io/allowed-identities listing this MachineIdentity."""
    credentials_secret_ref: CredentialsSecretRef | None = None
    """One Secret in this namespace holding both the client ID and the client secret, instead of
    clientId and clientSecretRef. It must carry the annotation secretferry.io/allowed-identities
    listing this MachineIdentity."""

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
    """Client id + client secret: ``clientId`` and ``clientSecretRef``, or ``credentialsSecretRef``."""

    client_secret_ref: base.ClusterSecretKeyRef | None = None
    """A key of a Secret in any namespace holding the client secret; the Secret needs no opt-in
    annotation."""
    credentials_secret_ref: ClusterCredentialsSecretRef | None = None
    """One Secret, in any namespace, holding both the client ID and the client secret, instead of
    clientId and clientSecretRef; it needs no opt-in annotation."""


class AccessTokenAuth(base.CRModel):
    """A ready access token from a Secret (development only: it is never renewed)."""

    secret_ref: base.SecretKeyRef
    """A key of a Secret in this namespace holding the access token. The Secret must carry the
    annotation secretferry.io/allowed-identities listing this MachineIdentity."""


class ClusterAccessTokenAuth(AccessTokenAuth):
    """A ready access token from a Secret (development only: it is never renewed)."""

    secret_ref: base.ClusterSecretKeyRef
    """A key of a Secret in any namespace holding the access token; the Secret needs no opt-in
    annotation."""


class IdentityAuth(base.CRModel, json_schema_extra=base.validations(_ONE_OF_AUTH)):
    """Exactly one login method."""

    kubernetes: KubernetesAuth | None = None
    """Kubernetes auth: log in with a freshly minted ServiceAccount token."""
    oidc: OIDCAuth | None = None
    """OIDC auth: log in with a freshly minted ServiceAccount token, verified by the service
    against the cluster's OIDC discovery document and keys (no call into the cluster)."""
    jwt: JWTAuth | None = None
    """JWT auth: log in with a freshly minted ServiceAccount token, verified by the service against
    its configured static keys or JWKS URL."""
    universal: UniversalAuth | None = None
    """Universal auth: log in with a client ID and a client secret."""
    access_token: AccessTokenAuth | None = None
    """A ready access token from a Secret, for development only: it is never renewed."""

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        methods = (self.kubernetes, self.oidc, self.jwt, self.universal, self.access_token)
        if sum(m is not None for m in methods) != 1:
            raise ValueError(_ONE_OF_AUTH_MESSAGE)
        return self

    @property
    def method(self) -> Literal["kubernetes", "oidc", "jwt", "universal", "accessToken"]:
        """Which login method is configured."""
        if self.kubernetes is not None:
            return "kubernetes"
        if self.oidc is not None:
            return "oidc"
        if self.jwt is not None:
            return "jwt"
        return "universal" if self.universal is not None else "accessToken"

    @property
    def token_auth(self) -> KubernetesAuth | None:
        """The ServiceAccount-token method (kubernetes, oidc or jwt), if that is the one set: they
        share the TokenRequest, its opt-in and its audience rules."""
        return self.kubernetes or self.oidc or self.jwt


class ClusterIdentityAuth(IdentityAuth):
    """Exactly one login method."""

    kubernetes: ClusterKubernetesAuth | None = None
    """Kubernetes auth: log in with a freshly minted ServiceAccount token."""
    oidc: ClusterOIDCAuth | None = None
    """OIDC auth: log in with a freshly minted ServiceAccount token, verified by the service
    against the cluster's OIDC discovery document and keys (no call into the cluster)."""
    jwt: ClusterJWTAuth | None = None
    """JWT auth: log in with a freshly minted ServiceAccount token, verified by the service against
    its configured static keys or JWKS URL."""
    universal: ClusterUniversalAuth | None = None
    """Universal auth: log in with a client ID and a client secret."""
    access_token: ClusterAccessTokenAuth | None = None
    """A ready access token from a Secret, for development only: it is never renewed."""


class MachineIdentitySpec(base.CRModel):
    """Where the secrets service is and how to log in to it."""

    host_api: str | None = Field(default=None, alias="hostAPI", pattern=r"^https?://", max_length=2048)
    """Service base URL, e.g. ``https://app.infisical.com``; default: the operator's
    SECRETFERRY_DEFAULT_HOST_API. A namespaced MachineIdentity may only name that default host or one
    in the operator's SECRETFERRY_ALLOWED_HOSTS, and every identity needs https, or http to loopback,
    unless the operator allows insecure http (else HostNotAllowed)."""
    tls: TLSConfig | None = None
    """Extra CA certificates to trust for the service's TLS certificate (system roots are always
    trusted)."""
    auth: IdentityAuth
    """How to log in: exactly one of kubernetes, oidc, jwt, universal and accessToken."""


class AllowedNamespaces(base.CRModel):
    """Namespaces whose SecretSyncs may use a ClusterMachineIdentity: listed names, or selected."""

    names: list[str] = Field(default_factory=list, max_length=1024)
    """Namespaces allowed by name, e.g. ``[team-a, team-b]``."""
    selector: base.LabelSelector | None = None
    """Namespaces allowed by their labels, e.g. ``{matchLabels: {team: payments}}``; a namespace
    listed in names or selected here is allowed."""

    def allows(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether a namespace with these labels is listed or selected."""
        if namespace in self.names:
            return True
        return self.selector is not None and self.selector.matches(labels)


_PUSH_ONE_PROJECT = base.cel(
    "has(self.projectId) != has(self.projectSlug)", "set exactly one of projectId and projectSlug"
)


class PushScope(base.CRModel, json_schema_extra=base.validations(_PUSH_ONE_PROJECT)):
    """One place PushSecrets may write to with a ClusterMachineIdentity."""

    project_id: str | None = Field(default=None, min_length=1, max_length=256)
    """ID of the project. Set exactly one of projectId and projectSlug; a PushSecret must name the
    project the same way (by ID or by slug) to match."""
    project_slug: str | None = Field(default=None, min_length=1, max_length=256)
    """Slug of the project. Set exactly one of projectId and projectSlug."""
    environment: str = Field(min_length=1, max_length=256)
    """Environment slug, e.g. ``prod``."""
    path_prefix: str = Field(default="/", pattern=r"^/", max_length=1024)
    """Folders at or below this path, compared by whole segments: ``/shared`` admits ``/shared``
    and ``/shared/db``, not ``/shared-other``. Default ``/``: the whole environment."""


class ClusterMachineIdentitySpec(MachineIdentitySpec):
    """Where the secrets service is, how to log in to it, and which namespaces may use the identity."""

    tls: ClusterTLSConfig | None = None
    """Extra CA certificates to trust for the service's TLS certificate (system roots are always
    trusted)."""
    auth: ClusterIdentityAuth
    """How to log in: exactly one of kubernetes, oidc, jwt, universal and accessToken."""
    allowed_namespaces: AllowedNamespaces | None = None
    """Namespaces whose SecretSyncs may use this identity. Absent: every namespace; present: only
    the listed or selected ones (others get IdentityNotAllowed)."""
    allow_templates: bool = False
    """Let SecretSyncs using this identity have spec.target.template (else TemplatesNotAllowed).
    A template's author can read every value the identity reads (its output shows in status), so
    this hands every value of the identity to whoever may edit SecretSyncs in the allowed
    namespaces. Default false."""

    push_allowed: list[PushScope] = Field(default_factory=list, max_length=256)
    """Where PushSecrets using this identity may write: project, environment and a path prefix
    each. Empty (default): nowhere (PushNotAllowed). Set by the cluster admin who creates the
    identity, because any namespace it admits could otherwise publish there."""

    def allows_namespace(self, namespace: str, labels: Mapping[str, str]) -> bool:
        return self.allowed_namespaces is None or self.allowed_namespaces.allows(namespace, labels)


# Bounds of the identity's stream and scope summary (reconcile/identity_summary.py): a status
# stays a few KiB however many SecretSyncs use the identity (an object is capped at 1.5 MiB in etcd,
# and every watcher of identities receives it whole at each write).
MAX_STATUS_SCOPES: Final = 50
MAX_STATUS_STREAMS: Final = 50
StreamState = Literal["Open", "Connecting", "Reconnecting", "Refused"]


class IdentityStreamStatus(base.StatusModel):
    """One event stream of this identity: one per project its SecretSyncs read with instant
    updates (a project whose scopes need more registrations than one stream takes has several
    connections; they are summed up here)."""

    project_id: str = Field(max_length=256)
    """ID of the project the stream watches."""
    state: StreamState
    """Open: every connection of the stream is up. Connecting: the first connect is under way.
    Reconnecting: a connection dropped or failed and is retried with backoff (its scopes poll
    meanwhile). Refused: the service refused the subscription (plan, permission, or a server
    without streams); its scopes poll and it is tried again after
    SECRETFERRY_STREAM_RETRY_AFTER_REFUSAL_SECONDS."""
    message: str = Field(default="", max_length=1024)
    """Why the stream is in that state, e.g. ``the identity lacks the Secret Events permission for
    these paths``."""
    since: base.Time | None = None
    """When the stream entered this state."""
    last_event_time: base.Time | None = None
    """When the stream last brought a change event (heartbeats do not count); absent: none yet."""
    scopes: int = Field(default=0, ge=0)
    """How many scopes (distinct project, environment and path) the stream serves."""


class IdentityScopeStatus(base.StatusModel):
    """One scope this identity lists: a distinct (project, environment, path) that its SecretSyncs
    read, listed once per refresh for all of them. Names where, never what: no secret name or
    value, only the path a SecretSync spec already names."""

    project_id: str = Field(max_length=256)
    """ID of the project."""
    project_slug: str | None = Field(default=None, max_length=256)
    """The project's slug, when a SecretSync names the project by slug."""
    environment: str = Field(max_length=256)
    """Environment slug, e.g. ``prod``."""
    path: str = Field(max_length=1024)
    """Folder path, e.g. ``/app``."""
    recursive: bool = False
    """Whether the folders below path are listed too."""
    filtered: bool = False
    """Whether tag or metadata filters narrow the list (or imports or reference expansion are
    turned off): several scopes may then share one path."""
    last_list_time: base.Time | None = None
    """When the operator last listed this scope at the service (an answer of 304 Not Modified
    counts); absent: not listed yet."""
    last_list_result: str = Field(default="", max_length=128)
    """How that list ended: ``Changed``, ``Unchanged``, ``NotModified``, or the error's class
    (``PermissionDenied``, ``Unavailable``, ``RateLimited``, ...)."""
    secret_syncs: int = Field(default=0, ge=0)
    """How many SecretSyncs (and ClusterSecretSync namespaces) read this scope."""


class MachineIdentityStatus(base.StatusModel):
    """Whether the operator can log in with this identity; written by the operator only."""

    conditions: list[base.Condition] = base.conditions_field()
    """Ready: True (reason LoggedIn) when the last login or use of the identity worked; False with
    the reason when it did not."""
    observed_generation: int | None = None
    """The metadata.generation the conditions describe."""
    token_expires_at: base.Time | None = None
    """When the current access token expires; the operator renews it or logs in again before then."""
    last_login_time: base.Time | None = None
    """When the operator last logged in with this identity."""
    list_endpoint: Literal["/api/v4/secrets", "/api/v3/secrets/raw"] | None = None
    """Route the operator lists secrets through on this identity's host, once a list there showed
    it: /api/v4/secrets, or /api/v3/secrets/raw on a self-hosted server older than v4."""
    streams_open: int | None = Field(default=None, ge=0)
    """How many of the identity's event streams are open (the Streams column)."""
    streams: list[IdentityStreamStatus] | None = Field(default=None, max_length=MAX_STATUS_STREAMS)
    """The identity's event streams, one per project read with instant updates (at most 50).
    Written at most once per SECRETFERRY_IDENTITY_SUMMARY_INTERVAL_SECONDS, and only when it
    changed."""
    scope_count: int | None = Field(default=None, ge=0)
    """How many distinct scopes the identity lists (the Scopes column); scopes shows at most 50."""
    scopes: list[IdentityScopeStatus] | None = Field(default=None, max_length=MAX_STATUS_SCOPES)
    """The scopes the identity lists and when each was last listed: failing ones first, then by
    project, environment and path; at most SECRETFERRY_IDENTITY_SUMMARY_MAX_SCOPES (50 by
    default, 0 for none). On a MachineIdentity these are the paths its own namespace's
    SecretSyncs name; on a ClusterMachineIdentity, those of every namespace using it, with no
    namespace named (README, "Identity status")."""
    scopes_omitted: int | None = Field(default=None, ge=0)
    """How many scopes are not shown in scopes (beyond the cap)."""


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

"""What a namespaced MachineIdentity may make the operator do with credentials: pure checks.

A user who can create our kinds in one namespace, and nothing else, must not obtain a token or a
Secret value through the operator. The operator holds rights that user lacks (it mints
ServiceAccount tokens and reads Secrets), so every credential it handles on a tenant's behalf
passes these checks first, and a refusal means nothing was read, minted or sent:

- **Where** (``check_host``): a namespaced identity sends credentials only to the operator's
  default host or one in ``SECRETFERRY_ALLOWED_HOSTS``, both chosen by whoever installs the
  operator. Every identity talks ``https``, or plain ``http`` to loopback only, unless
  ``SECRETFERRY_ALLOW_INSECURE_HTTP`` is on. A ClusterMachineIdentity is created by a cluster
  admin, who may name any host.
- **Which audience** (``check_audiences``, ``check_api_audience``): a namespaced identity's
  ServiceAccount token is minted for an explicit audience, never the apiserver's default one, and
  never one of the apiserver's own audiences (its ``--api-audiences``, learnt from the cluster by
  ``kube.apiaudiences`` before anything is minted), so the token the service receives cannot be
  replayed against the apiserver. A ClusterMachineIdentity may send such a token only when its
  admin says so explicitly (``allowAPIServerAudience``), for servers whose TokenReview accepts
  nothing else.
- **Whose credentials** (``opted_in``): a namespaced identity uses a ServiceAccount, or reads a
  Secret, only if that object carries ``secretferry.io/allowed-identities`` naming it. Setting an
  annotation needs write access to that object, which a tenant without those rights lacks; who has
  it could replace the credential anyway. The objects an identity relies on
  (``credential_refs``) are watched, so consent taken back ends the identity's session at once.
  A missing object is refused in the same words as one that did not opt in
  (``CredentialsNotOptedIn``): otherwise a tenant could probe which Secret names exist.
- **How long** (``token_expiration``): minted tokens live at most
  ``SECRETFERRY_MAX_TOKEN_EXPIRATION_SECONDS`` (10 minutes by default): a token is used once, for
  one login, within a second.
- **Whether at all** (``check_token_requests``): an install may forbid token minting
  (``SECRETFERRY_TOKEN_REQUESTS_ENABLED=false``, with the chart's RBAC rules for it removed); then
  every identity with Kubernetes auth, namespaced or not, is refused up front with a reason that
  says so, instead of a TokenRequest the apiserver would answer with 403.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from secretferry import origins
from secretferry import settings as settings_mod
from secretferry.models import identity as identity_models
from secretferry.reconcile import problems, reasons

ALLOWED_IDENTITIES_ANNOTATION: Final = "secretferry.io/allowed-identities"
"""On a ServiceAccount or Secret: comma-separated names of the MachineIdentities (in the same
namespace) that may use it. Exact names only: a wildcard would hand it to every identity anyone in
the namespace can create."""

_ALLOWED_HOSTS_SETTING: Final = "SECRETFERRY_ALLOWED_HOSTS"
_INSECURE_SETTING: Final = "SECRETFERRY_ALLOW_INSECURE_HTTP"
_MAX_EXPIRATION_SETTING: Final = "SECRETFERRY_MAX_TOKEN_EXPIRATION_SECONDS"
_TOKEN_REQUESTS_SETTING: Final = "SECRETFERRY_TOKEN_REQUESTS_ENABLED"
_LISTED_HOSTS_MAX: Final = 5  # a status message names a few allowed hosts, not a long list


@dataclass(frozen=True)
class HostPolicy:
    default: origins.ServiceURL
    allowed: frozenset[origins.ServiceURL]
    """What a namespaced identity may use, the default included: scheme, host and port, all
    three compared (``http://host:443`` is not ``https://host:443``)."""
    allow_insecure_http: bool = False
    token_requests_enabled: bool = True
    """Whether Kubernetes auth may mint tokens at all (install-wide, like the hosts; hence here)."""

    @classmethod
    def from_settings(cls, settings: settings_mod.Settings) -> HostPolicy:
        default = origins.parse_url(settings.default_host_api)
        extra = origins.parse_list(settings.allowed_hosts)
        return cls(
            default=default,
            allowed=frozenset([default, *extra]),
            allow_insecure_http=settings.allow_insecure_http,
            token_requests_enabled=settings.token_requests_enabled,
        )


def check_host(host_api: str | None, *, namespaced: bool, policy: HostPolicy) -> problems.Problem | None:
    """Whether credentials may be sent to ``host_api`` (``None``: the operator's default host)."""
    if host_api is None:
        url = policy.default
    else:
        try:
            url = origins.parse_url(host_api)
        except ValueError as exc:
            return problems.Problem(
                reasons.HOST_NOT_ALLOWED,
                f"spec.hostAPI is not a plain http(s) URL ({exc}); nothing was sent",
            )
    if namespaced and url not in policy.allowed:
        listed = sorted(str(o) for o in policy.allowed)
        shown = ", ".join(listed[:_LISTED_HOSTS_MAX]) + (", …" if len(listed) > _LISTED_HOSTS_MAX else "")
        return problems.Problem(
            reasons.HOST_NOT_ALLOWED,
            f"spec.hostAPI {url} is not an allowed service host (scheme, host and port are compared): "
            f"a MachineIdentity may send "
            f"credentials only to the operator's default host or a host in {_ALLOWED_HOSTS_SETTING} "
            f"(allowed: {shown}); nothing was sent",
        )
    if url.scheme == "http" and not origins.is_loopback(url.origin) and not policy.allow_insecure_http:
        return problems.Problem(
            reasons.HOST_NOT_ALLOWED,
            f"{url} is plain http to a host that is not loopback: credentials are sent over https "
            f"only, unless the operator sets {_INSECURE_SETTING}=true; nothing was sent",
        )
    return None


def check_audiences(
    audiences: Sequence[str], *, namespaced: bool, method: str = "kubernetes"
) -> problems.Problem | None:
    """A namespaced identity's token must name an audience: the default one is the apiserver's."""
    if not namespaced or (audiences and all(a.strip() for a in audiences)):
        return None
    return problems.Problem(
        reasons.AUDIENCE_REQUIRED,
        f"spec.auth.{method}.audiences must list the identity's allowed audience at the service: "
        "a token without one is valid for the Kubernetes API itself; no token was minted",
    )


def check_api_audience(
    audiences: Sequence[str],
    *,
    api_audiences: frozenset[str],
    namespaced: bool,
    allowed: bool,
    method: str = "kubernetes",
) -> problems.Problem | None:
    """Whether a token minted for ``audiences`` would be valid against the apiserver itself.

    The apiserver accepts a token when one of its audiences is one of its own (``api_audiences``);
    a TokenRequest without audiences gets exactly those. Exact strings, as the apiserver compares.
    Namespaced: always refused. Cluster-scoped: only with ``allowAPIServerAudience: true``.
    """
    effective = frozenset(audiences) if audiences else api_audiences
    shared = sorted(effective & api_audiences)
    if not shared or (allowed and not namespaced):
        return None
    named = ", ".join(shared)
    what = (
        f"spec.auth.{method}.audiences names {named}"
        if audiences
        else "an empty audiences list means " + named
    )
    if namespaced:
        remedy = "use the identity's own allowed audience at the service"
    else:
        remedy = (
            "use the identity's own allowed audience at the service, or, only for a server whose "
            f"TokenReview accepts nothing else, set spec.auth.{method}.allowAPIServerAudience: true "
            "(README, security model)"
        )
    return problems.Problem(
        reasons.AUDIENCE_NOT_ALLOWED,
        f"{what}, an audience of the apiserver itself: such a token is valid against the Kubernetes "
        f"API, so it is never sent to the service; {remedy}; no token was minted",
    )


def check_token_requests(*, policy: HostPolicy, method: str = "kubernetes") -> problems.Problem | None:
    """Kubernetes, OIDC and JWT auth need a TokenRequest; refused for every identity kind when
    minting is off.

    Not retriable: only a new operator setting (a restart) changes the answer."""
    if policy.token_requests_enabled:
        return None
    return problems.Problem(
        reasons.TOKEN_REQUESTS_DISABLED,
        f"spec.auth.{method} needs a ServiceAccount token, and this operator mints none "
        f"({_TOKEN_REQUESTS_SETTING}=false): use universal or accessToken auth, or ask whoever "
        f"installs the operator to allow token requests; no token was minted",
    )


def check_identity(
    spec: identity_models.MachineIdentitySpec, *, namespaced: bool, policy: HostPolicy
) -> problems.Problem | None:
    """Every check that needs only the spec and the settings (no I/O): the first refusal, or None."""
    refusal = check_host(spec.host_api, namespaced=namespaced, policy=policy)
    token_auth, method = spec.auth.token_auth, spec.auth.method
    if refusal is None and token_auth is not None:
        refusal = check_token_requests(policy=policy, method=method) or check_audiences(
            token_auth.audiences, namespaced=namespaced, method=method
        )
    return refusal


def token_expiration(requested: int, *, cap: int) -> tuple[int, str | None]:
    """The lifetime to ask for, and a note for the status when the spec asked for more."""
    if requested <= cap:
        return requested, None
    return cap, f"tokenExpirationSeconds {requested} lowered to {cap} ({_MAX_EXPIRATION_SETTING})"


def opted_in(annotations: Mapping[str, str] | None, identity: str) -> bool:
    """Whether the object's ``secretferry.io/allowed-identities`` lists ``identity``."""
    listed = (annotations or {}).get(ALLOWED_IDENTITIES_ANNOTATION, "")
    return identity in {name.strip() for name in listed.split(",")}


CredentialRef = tuple[str, str]  # (kind: "Secret" | "ServiceAccount", name) in the identity's namespace


def credential_refs(spec: identity_models.MachineIdentitySpec) -> frozenset[CredentialRef]:
    """The ServiceAccount and Secrets whose opt-in a namespaced identity relies on."""
    refs: set[CredentialRef] = set()
    auth = spec.auth
    if auth.token_auth is not None:
        refs.add(("ServiceAccount", auth.token_auth.service_account_ref.name))
    if auth.universal is not None:
        uni = auth.universal
        for ref in (uni.credentials_secret_ref, uni.client_secret_ref):
            if ref is not None:
                refs.add(("Secret", ref.name))
    if auth.access_token is not None:
        refs.add(("Secret", auth.access_token.secret_ref.name))
    if spec.tls is not None and spec.tls.ca_secret_ref is not None:
        refs.add(("Secret", spec.tls.ca_secret_ref.name))
    return frozenset(refs)


def not_opted_in(kind: str, *, namespace: str, name: str, identity: str) -> problems.Problem:
    """The refusal for an object that has not opted in, or does not exist: the same words for
    both, so a tenant cannot tell whether a Secret or ServiceAccount of that name exists."""
    what = "no token was minted" if kind == "ServiceAccount" else "nothing was read from it"
    return problems.Problem(
        reasons.CREDENTIALS_NOT_OPTED_IN,
        f"{kind} {namespace}/{name} does not exist or has not opted in: a MachineIdentity uses "
        f"it only when it exists and is annotated {ALLOWED_IDENTITIES_ANNOTATION} listing "
        f"{identity!r} (someone who may edit that {kind} sets it); {what}",
        # Watched (identity_intake): an opt-in being added re-checks at once; retrying also
        # covers a watch that is down.
        retriable=True,
    )

"""Condition types and reasons: the one place their spelling lives.

Reasons are CamelCase (the metav1.Condition convention) and double as Event reasons. Whether a
failure is retried is decided by the exception class that produced it, never by these strings.
"""

from __future__ import annotations

from typing import Final

# Condition types.
READY: Final = "Ready"

# Ready=True.
SYNCED: Final = "Synced"  # SecretSync: target written (or already up to date)
NAMESPACES_FAILED: Final = "NamespacesFailed"  # ClusterSecretSync: some selected namespaces fail
PROGRESSING: Final = "Progressing"  # ClusterSecretSync: some selected namespaces are not synced yet
NO_NAMESPACES_SELECTED: Final = "NoNamespacesSelected"  # ClusterSecretSync: the selection is empty
LOGGED_IN: Final = "LoggedIn"  # (Cluster)MachineIdentity: login works

# Ready=False: the spec or its references.
INVALID_SPEC: Final = "InvalidSpec"  # fails validation the CRD schema could not express
IDENTITY_NOT_FOUND: Final = "IdentityNotFound"
IDENTITY_NOT_ALLOWED: Final = "IdentityNotAllowed"  # ClusterMachineIdentity.allowedNamespaces
IDENTITY_NOT_READY: Final = "IdentityNotReady"
CREDENTIALS_NOT_FOUND: Final = "CredentialsNotFound"  # a referenced Secret/key/ServiceAccount is missing
# What a namespaced MachineIdentity may do with credentials (reconcile/tenancy.py); nothing is sent.
HOST_NOT_ALLOWED: Final = "HostNotAllowed"  # hostAPI not allowed, or plain http off loopback
AUDIENCE_REQUIRED: Final = "AudienceRequired"  # Kubernetes auth without an explicit token audience
CREDENTIALS_NOT_OPTED_IN: Final = "CredentialsNotOptedIn"  # SA/Secret lacks the allowed-identities annotation
TOKEN_REQUESTS_DISABLED: Final = "TokenRequestsDisabled"  # Kubernetes auth while token minting is off
# A SecretSync with templates, and its identity's credential owner did not opt in (template_trust.py).
TEMPLATES_NOT_ALLOWED: Final = "TemplatesNotAllowed"
AUDIENCE_NOT_ALLOWED: Final = "AudienceNotAllowed"  # the token would be valid for the apiserver itself

# Ready=False: the secrets service.
AUTH_FAILED: Final = "AuthFailed"  # login rejected (401, bad credentials, TokenRequest refused)
SERVER_IGNORES_AUDIENCE: Final = "ServerIgnoresAudience"  # its TokenReview checks the apiserver's audiences
FORBIDDEN: Final = "Forbidden"  # logged in, but the identity may not read this scope (403)
SOURCE_NOT_FOUND: Final = "SourceNotFound"  # project / environment / path unknown
SOURCE_EMPTY: Final = "SourceEmpty"  # a source lists nothing (or filters keep nothing); not allowEmpty
SOURCE_TOO_DEEP: Final = "SourceTooDeep"  # a recursive listing reaches the service's depth limit
FILTER_NOT_SUPPORTED: Final = "FilterNotSupported"  # the list route would drop a tag/metadata filter
SERVICE_UNAVAILABLE: Final = "ServiceUnavailable"  # network error, 5xx, timeout
RATE_LIMITED: Final = "RateLimited"  # 429

# Ready=False: building or writing the target.
TEMPLATE_ERROR: Final = "TemplateError"
# template.templateFrom (reconcile/rendering/template_sources.py): the ConfigMap/Secret named ...
TEMPLATE_SOURCE_MISSING: Final = "TemplateSourceMissing"  # ... does not exist
TEMPLATE_SOURCE_NOT_LABELLED: Final = "TemplateSourceNotLabelled"  # ... lacks secretferry.io/template-source
TEMPLATE_SOURCE_TOO_LARGE: Final = "TemplateSourceTooLarge"  # ... holds more than 64 KiB
TEMPLATE_SOURCE_KEY_MISSING: Final = "TemplateSourceKeyMissing"  # ... lacks a key its entry's keys lists
TEMPLATE_SOURCE_INVALID: Final = "TemplateSourceInvalid"  # ... holds a value that is not UTF-8 text
INVALID_KEY: Final = "InvalidKey"  # a fetched key cannot be a Secret/ConfigMap data key
KEY_COLLISION: Final = "KeyCollision"  # two keys of a source renamed to one name by its rewrite rules
DECODING_FAILED: Final = "DecodingFailed"  # a value is not valid Base64/Base64URL where a source says it is
INVALID_SECRET_TYPE: Final = "InvalidSecretType"  # data lacks what the Secret type requires
TARGET_TOO_LARGE: Final = "TargetTooLarge"  # over the 1 MiB object limit
TARGET_CONFLICT: Final = "TargetConflict"  # the target exists and belongs to someone else
TARGET_NOT_FOUND: Final = "TargetNotFound"  # creationPolicy Merge, and the target does not exist
TARGET_NOT_OPTED_IN: Final = "TargetNotOptedIn"  # creationPolicy Merge, and the target does not name us
TARGET_PROTECTED: Final = "TargetProtected"  # SA token, Helm release or our HMAC key: never written
# Labels/annotations/type another controller trusts (Helm's owner=helm, Argo CD, Flux, kubernetes.io).
TARGET_METADATA_FORBIDDEN: Final = "TargetMetadataForbidden"
KUBERNETES_ERROR: Final = "KubernetesError"  # the apiserver refused a write for another reason

# status.updateMode and status.updateModeReason.
STREAMING: Final = "Streaming"
POLLING: Final = "Polling"
# status.updateMode of a SecretSync whose spec.refreshPolicy is not Periodic (reconcile/refresh.py).
ON_CHANGE: Final = "OnChange"
CREATED_ONCE: Final = "CreatedOnce"
INSTANT_UPDATES_DISABLED: Final = "InstantUpdatesDisabled"

# --- PasswordGenerator / UUIDGenerator (reconcile/generators/) ---
# Ready=True.
GENERATED: Final = "Generated"  # the generator's Secret holds a value generated under the current spec
# The rules changed since the value was generated; kept until the regenerate annotation asks.
SPEC_CHANGED_SINCE_GENERATED: Final = "SpecChangedSinceGenerated"
# Ready=False: a SecretSync's generatorRef source.
GENERATOR_NOT_FOUND: Final = "GeneratorNotFound"  # no such generator in the SecretSync's namespace
GENERATOR_NOT_READY: Final = "GeneratorNotReady"  # it has no value in a Secret it owns (yet)

# --- DynamicSecretLease (reconcile/leases/) ---------------------------------------------------
LEASED: Final = "Leased"  # Ready=True: the target holds credentials of a live lease
LEASE_REPLACED: Final = "LeaseReplaced"  # a new lease replaced one that could not be renewed
LEASE_REFUSED: Final = "LeaseRefused"  # the service refused the lease (400: TTL, limit, provider)
LEASE_RENEW_FAILED: Final = "LeaseRenewFailed"  # a renewal failed for a retriable reason; retried
LEASE_EXPIRED: Final = "LeaseExpired"  # the lease expired before it could be renewed or replaced
LEASE_LIMIT_REACHED: Final = "LeaseLimitReached"  # the namespace holds maxLeasesPerNamespace leases
LEASE_DATA_INVALID: Final = "LeaseDataInvalid"  # a key of the lease's data cannot be a Secret key
LEASE_WRITE_FAILED: Final = "LeaseWriteFailed"  # the apiserver refused the credentials' Secret
LEASE_REVOKED: Final = "LeaseRevoked"  # Event: revoked at deletion (revocationPolicy Revoke)
LEASE_RETAINED: Final = "LeaseRetained"  # Event: left to expire at deletion (revocationPolicy Retain)
LEASE_REVOKE_FAILED: Final = "LeaseRevokeFailed"  # revocation at deletion failed; retried
TARGET_NOT_OWNED: Final = "TargetNotOwned"  # the Secret exists and is not this lease's

# PushSecret (reconcile/push/): Ready=True.
PUSHED: Final = "Pushed"  # every key is at the service as pushed
# PushSecret: Ready=False, or the Conflict condition.
PUSH_CONFLICT: Final = "PushConflict"  # a value changed at the service; IfNotExists left it
PUSH_CONFLICT_REPLACED: Final = "PushConflictReplaced"  # Conflict=True: Replace overwrote it
NO_CONFLICT: Final = "NoConflict"  # Conflict=False
PUSH_SOURCE_NOT_OPTED_IN: Final = "PushSourceNotOptedIn"  # the Secret is missing or lacks allow-push
PUSH_SOURCE_EMPTY: Final = "PushSourceEmpty"  # the selected keys are not in the Secret
PUSH_GENERATOR_NOT_READY: Final = "PushGeneratorNotReady"  # the generator names no Secret yet
PUSH_NOT_ALLOWED: Final = "PushNotAllowed"  # a ClusterMachineIdentity's pushAllowed does not admit it
PUSH_FAILED: Final = "PushFailed"  # the service refused a write (403, 404 folder, 4xx)
PUSH_LOOP: Final = "PushLoop"  # a SecretSync writes the source Secret from the destination folder
# --- TemporaryPrivilege (reconcile/privileges/) --------------------------------------------------
# Condition types besides Ready.
ACTIVE: Final = "Active"  # also the reason of Active=True: the grant is in its window
# Ready=True: the privilege at the service matches the spec.
GRANTED: Final = "Granted"
# Active=False.
PENDING: Final = "Pending"  # the window has not started yet
EXPIRED: Final = "Expired"  # the window has ended: the service no longer counts the privilege
NOT_GRANTED: Final = "NotGranted"  # no privilege at the service for this resource (yet)
# Ready=False.
PERMANENT_NOT_ALLOWED: Final = "PermanentNotAllowed"  # permanent: true without the operator setting
GRANTER_NOT_FOUND: Final = "GranterNotFound"  # spec.granterRef names no ClusterMachineIdentity
GRANTER_NOT_READY: Final = "GranterNotReady"  # the granter is invalid, refused or cannot log in
GRANT_FORBIDDEN: Final = "GrantForbidden"  # the granter may not grant privileges in the project (403)
GRANT_REFUSED: Final = "GrantRefused"  # the service refused the request (unknown project or identity, 4xx)
SLUG_CONFLICT: Final = "SlugConflict"  # an older TemporaryPrivilege manages that identity's privilege slug
SERVER_NOT_SUPPORTED: Final = "ServerNotSupported"  # rules that need the v2 routes, on a server without them
# --- Egress proxy (HTTPS_PROXY/HTTP_PROXY towards the service; service/connection.py) -------------
# Ready=False, on every kind that calls the service; retried with backoff, nothing is deleted.
PROXY_REFUSED: Final = "ProxyRefused"  # the proxy refused the CONNECT or answered 403/407 itself
PROXY_UNREACHABLE: Final = "ProxyUnreachable"  # nothing answers at the proxy's address


# --- TLS with a private CA (service/connection.py) ---------------------------------------------
# Ready=False: the service's certificate does not verify against the system roots plus the
# identity's spec.tls CAs (unknown CA, host name mismatch, expired). Nothing was sent; retried.
TLS_VERIFY_FAILED: Final = "TLSVerifyFailed"

# --- GitOps health: kstatus (Flux) and the Argo CD health checks (docs/argocd/) ---------------------
# Condition type besides Ready, as kstatus defines it: True while Ready is False for a reason that
# does not clear by itself (kstatus: Failed, so Flux's `wait: true` fails at once instead of at its
# timeout). Written with Ready by conditions.set_condition; the reason and message are Ready's.
STALLED: Final = "Stalled"
# Ready=False (or Unknown) reasons that clear without a change to this resource, because another
# object may still be on its way: created in the same apply (`kubectl apply -f dir/`, one Argo CD
# or Flux sync), or being reconciled itself. Not Stalled (kstatus InProgress); Argo CD Progressing.
WAITING_FOR_REFERENCE: Final = frozenset(
    {
        PROGRESSING,
        IDENTITY_NOT_FOUND,
        IDENTITY_NOT_READY,
        CREDENTIALS_NOT_FOUND,
        CREDENTIALS_NOT_OPTED_IN,
        GENERATOR_NOT_FOUND,
        GENERATOR_NOT_READY,
        TEMPLATE_SOURCE_MISSING,
        TARGET_NOT_FOUND,
        PUSH_SOURCE_NOT_OPTED_IN,
        PUSH_GENERATOR_NOT_READY,
        GRANTER_NOT_FOUND,
        GRANTER_NOT_READY,
    }
)
# Ready=False reasons at the service that the operator retries with backoff and that usually pass:
# not Stalled (kstatus InProgress, a `wait` waits for its timeout); Argo CD shows them Degraded all
# the same, because its health is a dashboard nobody waits on, and an outage must show there.
RETRIED_AT_SERVICE: Final = frozenset({SERVICE_UNAVAILABLE, RATE_LIMITED, LEASE_EXPIRED, PROXY_UNREACHABLE})

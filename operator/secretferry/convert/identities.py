"""The identity a converted SecretSync logs in as: drafted per login, finished once its users are known.

Whether it is a namespaced MachineIdentity or a ClusterMachineIdentity depends on every SecretSync
that uses it, so a draft collects their namespaces first. Namespaced when the Secrets and the
ServiceAccount it references and every SecretSync using it share one namespace: then each of
those objects must opt in (``secretferry.io/allowed-identities``), and Kubernetes auth needs an
audience, which the steps and notes say. Otherwise cluster-scoped, admitting exactly the
namespaces of its SecretSyncs: Infisical's operator reads credentials in any namespace with its
own rights, and only a cluster identity may do that here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pydantic import ValidationError

from secretferry.convert import infisical, results, values
from secretferry.models import base, errors, identity

# reconcile.tenancy.ALLOWED_IDENTITIES_ANNOTATION, spelt out so that `convert` does not load
# reconcile (tests check the two agree).
ALLOWED_IDENTITIES_ANNOTATION: Final = "secretferry.io/allowed-identities"

UNSUPPORTED_AUTH: Final = {
    "serviceToken": "service tokens have no equivalent (Infisical deprecated them too)",
    "serviceAccount": "Infisical's legacy service accounts have no equivalent",
    "awsIamAuth": "AWS IAM auth has no equivalent",
    "azureAuth": "Azure auth has no equivalent",
    "gcpIdTokenAuth": "GCP ID-token auth has no equivalent",
    "gcpIamAuth": "GCP IAM auth has no equivalent",
    "ldapAuth": "LDAP auth has no equivalent",
}
USE_INSTEAD: Final = "; give the machine identity universal or Kubernetes auth at the service, and use that"
# The attribute of infisical.Authentication behind each name in UNSUPPORTED_AUTH (in its order), taken
# from the model's own aliases so the two cannot drift; a name the model lacks fails at import.
_ATTRIBUTE_BY_ALIAS: Final = {f.alias: name for name, f in infisical.Authentication.model_fields.items()}
_V1ALPHA1_FIELDS: Final = {alias: _ATTRIBUTE_BY_ALIAS[alias] for alias in UNSUPPORTED_AUTH}


@dataclass(frozen=True)
class Ref:
    """A Secret or ServiceAccount the identity references."""

    kind: Literal["Secret", "ServiceAccount"]
    namespace: str | None
    name: str
    extra: tuple[tuple[str, str], ...] = ()
    """Further fields of our reference, e.g. ``(("key", "ca.crt"),)``."""

    def body(self, *, cluster: bool) -> dict[str, str]:
        out = {"name": self.name, **dict(self.extra)}
        if cluster and self.namespace:
            out["namespace"] = self.namespace
        return out


@dataclass
class Identity:
    """A login, before it is known which kind of identity it becomes."""

    origin: str
    name: str
    namespace: str | None
    method: Literal["universal", "kubernetes"]
    inline: dict[str, Any]
    """Fields written as they are: clientId, identityId, audiences."""
    refs: dict[str, Ref]
    host_api: str | None = None
    ca: Ref | None = None
    audience_field: str = ""
    """Where the input sets the audiences, for the note when a namespaced identity has none."""
    comments: list[str] = field(default_factory=list)
    used_in: set[str | None] = field(default_factory=set)
    """Namespaces of the SecretSyncs that use it."""
    origins: list[str] = field(default_factory=list)
    kind: str = ""
    """Once finished and valid: MachineIdentity or ClusterMachineIdentity."""
    final_name: str = ""

    def fingerprint(self) -> str:
        """Equal for two drafts that log in the same way: they become one identity."""
        refs = sorted((k, r.kind, r.namespace, r.name, r.extra) for k, r in self.refs.items())
        ca = None if self.ca is None else (self.ca.namespace, self.ca.name, self.ca.extra)
        return json.dumps([self.host_api, ca, self.method, self.inline, refs], sort_keys=True)


def from_infisical_secret(
    cr: infisical.InfisicalSecret, obj: str, ledger: results.Ledger
) -> tuple[Identity, infisical.Scope] | None:
    """The login of a v1alpha1 InfisicalSecret, and the scope its auth method names."""
    auth, ns, where = cr.spec.authentication, cr.metadata.namespace, "spec.authentication"
    unsupported = [name for name, attr in _V1ALPHA1_FIELDS.items() if infisical.is_set(getattr(auth, attr))]
    for name in unsupported:
        ledger.note(obj, f"{where}.{name}", UNSUPPORTED_AUTH[name] + USE_INSTEAD)
    chosen = [m for m in (auth.universal_auth, auth.kubernetes_auth) if infisical.is_set(m)]
    if len(chosen) > 1:
        ledger.note(obj, where, "sets both universalAuth and kubernetesAuth; keep the one meant")
    if not chosen and not unsupported:
        ledger.note(obj, where, "sets no authentication method")
    if len(chosen) != 1:
        return None
    method, ca_ref = chosen[0], cr.spec.tls.ca_ref
    ca = Ref("Secret", ca_ref.secret_namespace or ns, ca_ref.secret_name, (("key", ca_ref.key),))
    host = values.host_api(cr.spec.host_api) if cr.spec.host_api else None
    common: dict[str, Any] = {"origin": obj, "name": cr.metadata.name, "namespace": ns, "host_api": host}
    common["ca"] = ca if ca_ref.secret_name else None
    if isinstance(method, infisical.UniversalAuth):
        # Infisical reads the keys clientId and clientSecret: our credentialsSecretRef's defaults.
        creds_ref = method.credentials_ref
        creds = Ref("Secret", creds_ref.secret_namespace or ns, creds_ref.secret_name)
        draft = Identity(method="universal", inline={}, refs={"credentialsSecretRef": creds}, **common)
        return draft, method.secrets_scope
    sa = Ref("ServiceAccount", method.service_account_ref.namespace or ns, method.service_account_ref.name)
    inline: dict[str, Any] = {"identityId": method.identity_id}
    if method.service_account_token_audiences:
        inline["audiences"] = list(method.service_account_token_audiences)
    draft = Identity(method="kubernetes", inline=inline, refs={"serviceAccountRef": sa}, **common)
    draft.audience_field = f"{where}.kubernetesAuth.serviceAccountTokenAudiences"
    if not method.auto_create_service_account_token:
        draft.comments.append("Infisical read a stored ServiceAccount token; secretferry mints one per login")
    return draft, method.secrets_scope


def from_infisical_auth(
    cr: infisical.InfisicalAuth,
    obj: str,
    connections: Mapping[str, infisical.InfisicalConnection],
    ledger: results.Ledger,
) -> Identity | None:
    """The login of a v1beta1 InfisicalAuth, with the host of its InfisicalConnection."""
    spec, ns = cr.spec, cr.metadata.namespace
    host, ca = None, None
    ref = spec.infisical_connection_ref
    if ref.name:
        conn_id = values.object_id("InfisicalConnection", ref.namespace or ns, ref.name)
        conn = connections.get(conn_id)
        if conn is None:
            why = f"{conn_id} is not in the input, so hostAPI is left to the operator's default"
            ledger.note(obj, "spec.infisicalConnectionRef", why)
        else:
            url = conn.spec.address or conn.spec.host
            host = values.host_api(url) if url else None
            c = conn.spec.tls.ca_ref
            if c.secret_name:
                ca = Ref(
                    "Secret", c.secret_namespace or conn.metadata.namespace, c.secret_name, (("key", c.key),)
                )
    common: dict[str, Any] = {
        "origin": obj,
        "name": cr.metadata.name,
        "namespace": ns,
        "host_api": host,
        "ca": ca,
    }
    if spec.method == "universal" and spec.universal is not None:
        cid, csec = spec.universal.client_id_ref, spec.universal.client_secret_ref
        if (cid.name, cid.namespace) == (csec.name, csec.namespace):
            keys = (("clientIdKey", cid.key), ("clientSecretKey", csec.key))
            creds = Ref("Secret", csec.namespace or ns, csec.name, keys)
            return Identity(method="universal", inline={}, refs={"credentialsSecretRef": creds}, **common)
        ledger.note(
            obj, "spec.universal.clientIdRef", _in_a_secret("client ID", cid, ns, "universal.clientId")
        )
        secret = Ref("Secret", csec.namespace or ns, csec.name, (("key", csec.key),))
        inline: dict[str, Any] = {"clientId": _placeholder("client ID", cid, ns)}
        return Identity(method="universal", inline=inline, refs={"clientSecretRef": secret}, **common)
    if spec.method == "kubernetes" and spec.kubernetes is not None:
        k = spec.kubernetes
        why = _in_a_secret("identity ID", k.identity_id_ref, ns, "kubernetes.identityId")
        ledger.note(obj, "spec.kubernetes.identityIdRef", why)
        inline = {"identityId": _placeholder("identity ID", k.identity_id_ref, ns)}
        if k.service_account_token_audiences:
            inline["audiences"] = list(k.service_account_token_audiences)
        sa = Ref("ServiceAccount", k.service_account_ref.namespace or ns, k.service_account_ref.name)
        draft = Identity(method="kubernetes", inline=inline, refs={"serviceAccountRef": sa}, **common)
        draft.audience_field = "spec.kubernetes.serviceAccountTokenAudiences"
        return draft
    what = f"{spec.method} auth has no equivalent" if spec.method else "no method is set"
    ledger.note(obj, "spec.method", f"{what} (or its block is missing){USE_INSTEAD}")
    return None


def _placeholder(what: str, ref: infisical.Key, namespace: str | None) -> str:
    return f"<{what} from Secret {ref.namespace or namespace}/{ref.name}, key {ref.key}>"


def _in_a_secret(what: str, ref: infisical.Key, namespace: str | None, our_field: str) -> str:
    return (
        f"the {what} is in Secret {ref.namespace or namespace}/{ref.name} (key {ref.key}), which the"
        f" converter never reads: write it into spec.auth.{our_field} in place of the placeholder"
    )


def finish(draft: Identity, ledger: results.Ledger) -> None:
    """Decide the kind, name it, check it against our model, and add it with its opt-in steps."""
    refs = [*draft.refs.values(), *([draft.ca] if draft.ca else [])]
    spaces = {r.namespace for r in refs} | draft.used_in
    cluster = len(spaces) > 1
    if cluster and None in spaces:
        ledger.note(draft.origin, "metadata.namespace", "spans several namespaces, some unnamed: name each")
        return
    kind = identity.CLUSTER_MACHINE_IDENTITY_KIND if cluster else identity.MACHINE_IDENTITY_KIND
    namespace = None if cluster else next(iter(spaces), draft.namespace)
    # Cluster-scoped names are shared by every namespace: keep the origin's namespace in it.
    wanted = f"{draft.namespace}-{draft.name}" if cluster and draft.namespace else draft.name
    name = ledger.unique(kind, namespace, wanted)
    spec: dict[str, Any] = {}
    if draft.host_api:
        spec["hostAPI"] = draft.host_api
    if draft.ca:
        spec["tls"] = {"caSecretRef": draft.ca.body(cluster=cluster)}
    spec["auth"] = {
        draft.method: {**draft.inline, **{k: r.body(cluster=cluster) for k, r in draft.refs.items()}}
    }
    if cluster:
        spec["allowedNamespaces"] = {"names": sorted(n for n in draft.used_in if n)}
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    body = {"apiVersion": base.API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}
    model = identity.ClusterMachineIdentity if cluster else identity.MachineIdentity
    try:
        model.from_body(body)
    except ValidationError as exc:
        why = f"the {kind} it converts to is not valid: {errors.describe_validation_error(exc)}"
        ledger.note(draft.origin, "spec", why)
        return
    draft.kind, draft.final_name = kind, name
    comments = list(draft.comments)
    if cluster:
        comments.append(
            "cluster-scoped: what it references and the SecretSyncs using it are in several namespaces,"
            " and a MachineIdentity reaches only its own (creating this one takes cluster-admin)"
        )
        if draft.method == "kubernetes" and not draft.inline.get("audiences"):
            why = (
                "without audiences the token would be valid for the Kubernetes API itself, which is sent"
                " only with spec.auth.kubernetes.allowAPIServerAudience: true (AudienceNotAllowed): set"
                " audiences to the identity's allowed audience at the service"
            )
            ledger.note(draft.origin, draft.audience_field, why)
    else:
        if draft.method == "kubernetes" and not draft.inline.get("audiences"):
            why = (
                "a namespaced MachineIdentity needs an audience: set spec.auth.kubernetes.audiences to the"
                " identity's allowed audience at the service"
            )
            ledger.note(draft.origin, draft.audience_field, why)
        for ref in refs:
            text = results.kubectl(
                "annotate",
                ref.kind.lower(),
                ref.namespace,
                ref.name,
                f"{ALLOWED_IDENTITIES_ANNOTATION}={name}",
            )
            ledger.step(results.OPT_IN, text)
            comments.append(f"to do: {text} (comma-separated after any it lists, with --overwrite)")
    ledger.result.manifests.append(results.Manifest(body, comments, list(draft.origins)))
